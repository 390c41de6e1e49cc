#include "host/peers.hpp"

#include <dirent.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <functional>
#include <sstream>

#include <fmt/format.h>

#include "util/files.hpp"

namespace ld::host {
namespace {

// Infrastructure that holds a socket or a pipe of every service: never part of a server.
constexpr std::array<std::string_view, 14> kInfrastructure{
    "systemd",    "systemd-journal", "systemd-logind", "systemd-udevd", "dbus-daemon", "dbus-broker", "sshd",
    "containerd", "dockerd",         "rsyslogd",       "tmux: server",  "screen",      "agetty",      "cron"};
// comm prefixes of the same (container shims carry their version: containerd-shim-runc-v2).
constexpr std::array<std::string_view, 2> kInfrastructurePrefixes{"containerd-shim", "conmon"};

std::vector<int> numeric_entries(const std::string& dir) {
  std::vector<int> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* ent = readdir(d)) {
      int n = 0;
      const char* end = ent->d_name + std::strlen(ent->d_name);
      if (auto [p, ec] = std::from_chars(ent->d_name, end, n); ec == std::errc() && p == end) out.push_back(n);
    }
    closedir(d);
  }
  return out;
}

// ppid and uid from /proc/PID/status; false when the process is gone or a zombie.
bool read_status(int pid, ProcessLinks& p) {
  const std::string status = util::read_file(fmt::format("/proc/{}/status", pid));
  if (status.empty()) return false;
  std::istringstream in(status);
  bool have_uid = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("State:", 0) == 0 && line.find('Z', 6) != std::string::npos) return false;
    if (line.rfind("PPid:", 0) == 0) p.ppid = std::atoi(line.c_str() + 5);
    if (line.rfind("Uid:", 0) == 0) {
      p.uid = static_cast<uint32_t>(std::strtoul(line.c_str() + 4, nullptr, 10));
      have_uid = true;
    }
  }
  return have_uid;
}

void read_fds(int pid, ProcessLinks& p) {
  const std::string dir = fmt::format("/proc/{}/fd", pid);
  for (int fd : numeric_entries(dir)) {
    std::array<char, 256> link{};
    const ssize_t n = readlink(fmt::format("{}/{}", dir, fd).c_str(), link.data(), link.size() - 1);
    if (n > 0) p.fds[fd] = std::string(link.data(), static_cast<size_t>(n));
  }
}

// Mappings of /dev/shm files and memfds, keyed by device and inode.
void read_shared_memory(int pid, ProcessLinks& p) {
  std::istringstream in(util::read_file(fmt::format("/proc/{}/maps", pid)));
  for (std::string line; std::getline(in, line);) {
    const size_t shm = line.find(" /dev/shm/"), memfd = line.find(" /memfd:");
    const size_t name_at = std::min(shm, memfd);
    if (name_at == std::string::npos) continue;
    // address perms offset dev inode name
    std::istringstream fields(line);
    std::string address, perms, offset, dev, inode;
    fields >> address >> perms >> offset >> dev >> inode;
    std::string name = line.substr(name_at + 1);
    if (const size_t deleted = name.find(" (deleted)"); deleted != std::string::npos) name.resize(deleted);
    p.shared_memory[dev + ":" + inode] = name;
  }
}

bool is_infrastructure(const ProcessLinks& p) {
  if (p.pid == 1) return true;
  if (std::find(kInfrastructure.begin(), kInfrastructure.end(), p.comm) != kInfrastructure.end()) return true;
  return std::any_of(kInfrastructurePrefixes.begin(), kInfrastructurePrefixes.end(),
                     [&](std::string_view prefix) { return p.comm.rfind(prefix, 0) == 0; });
}

// "socket:[123]" -> 123, for the given kind; 0 otherwise.
uint64_t inode_of(const std::string& link, std::string_view kind) {
  if (link.size() < kind.size() + 3 || link.compare(0, kind.size(), kind) != 0 || link[kind.size()] != ':') return 0;
  uint64_t n = 0;
  const char* from = link.data() + kind.size() + 2;
  std::from_chars(from, link.data() + link.size() - 1, n);
  return n;
}

class PeerSearch {
 public:
  PeerSearch(const std::vector<ProcessLinks>& processes, const std::map<uint64_t, uint64_t>& unix_peers,
             const std::map<uint64_t, std::string>& unix_paths)
      : unix_peers_(unix_peers), unix_paths_(unix_paths) {
    for (const ProcessLinks& p : processes) {
      by_pid_[p.pid] = &p;
      children_[p.ppid].push_back(p.pid);
      for (const auto& [fd, link] : p.fds) {
        if (uint64_t ino = inode_of(link, "socket")) socket_owners_[ino].insert(p.pid);
        if (uint64_t ino = inode_of(link, "pipe")) pipe_owners_[ino].insert(p.pid);
      }
      for (const auto& [key, name] : p.shared_memory) shm_owners_[key].insert(p.pid);
    }
  }

  std::vector<Peer> run(const std::vector<int>& targets, int agent) {
    for (int t : targets) taken_.insert(t);
    for (int a : ancestors_of(targets, agent)) excluded_.insert(a);
    uid_ = by_pid_.count(targets.front()) ? by_pid_.at(targets.front())->uid : 0;
    for (int t : targets) take_descendants(t);
    // One step out from the server as found so far (targets and their descendants), then the
    // descendants of what that step found.
    for (int pid : with(targets, order_)) link_from(pid);
    for (size_t i = 0, n = found_.size(); i < n; ++i) take_descendants(found_[i].pid);
    return found_;
  }

 private:
  static std::vector<int> with(std::vector<int> a, const std::vector<int>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  std::set<int> ancestors_of(const std::vector<int>& targets, int agent) const {
    std::set<int> out{agent};
    std::vector<int> from = targets;
    from.push_back(agent);
    for (int pid : from) {
      for (int hops = 0; hops < 64; ++hops) {  // a bound against a cycle in a torn read
        auto it = by_pid_.find(pid);
        if (it == by_pid_.end() || it->second->ppid <= 0) break;
        pid = it->second->ppid;
        out.insert(pid);
      }
    }
    return out;
  }

  bool eligible(int pid) const {
    if (taken_.count(pid) || excluded_.count(pid)) return false;
    auto it = by_pid_.find(pid);
    return it != by_pid_.end() && it->second->uid == uid_ && !is_infrastructure(*it->second);
  }

  void take(int pid, std::string why) {
    taken_.insert(pid);
    order_.push_back(pid);
    found_.push_back({pid, by_pid_.at(pid)->comm, std::move(why)});
  }

  void take_descendants(int root) {
    std::vector<int> todo{root};
    while (!todo.empty()) {
      const int parent = todo.back();
      todo.pop_back();
      auto it = children_.find(parent);
      if (it == children_.end()) continue;
      for (int child : it->second) {
        if (!eligible(child)) continue;
        take(child, fmt::format("a child of {}", parent));
        todo.push_back(child);
      }
    }
  }

  // The processes at the other end of `pid`'s links (fd 3 and above), and those mapping its
  // shared memory.
  void link_from(int pid) {
    auto it = by_pid_.find(pid);
    if (it == by_pid_.end()) return;
    const ProcessLinks& p = *it->second;
    for (const auto& [fd, link] : p.fds) {
      if (fd < 3) continue;
      if (const uint64_t ino = inode_of(link, "socket")) {
        auto peer = unix_peers_.find(ino);
        if (peer == unix_peers_.end()) continue;
        std::string where;
        for (uint64_t end : {ino, peer->second})
          if (auto path = unix_paths_.find(end); where.empty() && path != unix_paths_.end() && !path->second.empty())
            where = " (" + path->second + ")";
        take_owners(socket_owners_, peer->second, fmt::format("connected to {} over a unix socket{}", pid, where));
      } else if (const uint64_t pipe = inode_of(link, "pipe")) {
        take_owners(pipe_owners_, pipe, fmt::format("shares a pipe with {}", pid));
      }
    }
    for (const auto& [key, name] : p.shared_memory)
      take_owners(shm_owners_, key, fmt::format("maps shared memory {} with {}", name, pid));
  }

  // A link that an ancestor (the shell, a supervisor) or the agent holds too was inherited from
  // it, as a leaked fd: siblings that share it never talked over it.
  template <class Key>
  void take_owners(const std::map<Key, std::set<int>>& owners, const Key& key, const std::string& why) {
    auto it = owners.find(key);
    if (it == owners.end()) return;
    if (std::any_of(it->second.begin(), it->second.end(), [&](int owner) { return excluded_.count(owner) > 0; }))
      return;
    for (int owner : it->second)
      if (eligible(owner)) take(owner, why);
  }

  const std::map<uint64_t, uint64_t>& unix_peers_;
  const std::map<uint64_t, std::string>& unix_paths_;
  std::map<int, const ProcessLinks*> by_pid_;
  std::map<int, std::vector<int>> children_;
  std::map<uint64_t, std::set<int>> socket_owners_, pipe_owners_;
  std::map<std::string, std::set<int>> shm_owners_;
  std::set<int> taken_, excluded_;
  std::vector<int> order_;
  std::vector<Peer> found_;
  uint32_t uid_ = 0;
};

// One NETLINK_SOCK_DIAG dump of every unix socket with its peer and name.
template <class OnSocket>
bool dump_unix_sockets(OnSocket&& on_socket) {
  const int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return false;
  struct {
    nlmsghdr nlh;
    unix_diag_req req;
  } request{};
  request.nlh.nlmsg_len = sizeof(request);
  request.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  request.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  request.req.sdiag_family = AF_UNIX;
  request.req.udiag_states = ~0u;
  request.req.udiag_show = UDIAG_SHOW_PEER | UDIAG_SHOW_NAME;
  if (send(fd, &request, sizeof(request), 0) != static_cast<ssize_t>(sizeof(request))) {
    close(fd);
    return false;
  }
  std::vector<char> buf(64 * 1024);
  bool done = false, ok = true;
  while (!done && ok) {
    const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) break;
    auto len = static_cast<unsigned int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type == NLMSG_DONE) {
        done = true;
        break;
      }
      if (h->nlmsg_type == NLMSG_ERROR) {
        ok = false;
        break;
      }
      const auto* msg = static_cast<const unix_diag_msg*>(NLMSG_DATA(h));
      uint64_t peer = 0;
      std::string name;
      int attr_len = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof(*msg)));
      for (auto* a = reinterpret_cast<const rtattr*>(msg + 1); RTA_OK(a, attr_len); a = RTA_NEXT(a, attr_len)) {
        if (a->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(a) >= sizeof(uint32_t)) {
          uint32_t v = 0;
          std::memcpy(&v, RTA_DATA(a), sizeof(v));
          peer = v;
        } else if (a->rta_type == UNIX_DIAG_NAME && RTA_PAYLOAD(a) > 0) {
          const char* s = static_cast<const char*>(RTA_DATA(a));
          const size_t l = RTA_PAYLOAD(a);
          name = s[0] == '\0' ? "@" + std::string(s + 1, strnlen(s + 1, l - 1)) : std::string(s, strnlen(s, l));
        }
      }
      on_socket(msg->udiag_ino, peer, name);
    }
  }
  close(fd);
  return ok && done;
}

}  // namespace

std::vector<ProcessLinks> read_process_links(std::optional<uint32_t> maps_of_uid) {
  std::vector<ProcessLinks> out;
  for (int pid : numeric_entries("/proc")) {
    ProcessLinks p;
    p.pid = pid;
    if (!read_status(pid, p)) continue;
    p.comm = util::read_file(fmt::format("/proc/{}/comm", pid));
    while (!p.comm.empty() && (p.comm.back() == '\n' || p.comm.back() == ' ')) p.comm.pop_back();
    read_fds(pid, p);
    if (maps_of_uid && p.uid == *maps_of_uid) read_shared_memory(pid, p);
    out.push_back(std::move(p));
  }
  return out;
}

std::map<uint64_t, uint64_t> unix_socket_peers(std::map<uint64_t, std::string>* paths) {
  std::map<uint64_t, uint64_t> peers;
  dump_unix_sockets([&](uint64_t ino, uint64_t peer, const std::string& name) {
    if (peer) peers[ino] = peer;
    if (paths && !name.empty()) (*paths)[ino] = name;
  });
  return peers;
}

std::vector<Peer> find_peers(const std::vector<int>& targets, const std::vector<ProcessLinks>& processes,
                             const std::map<uint64_t, uint64_t>& unix_peers,
                             const std::map<uint64_t, std::string>& unix_paths, int agent) {
  if (targets.empty()) return {};
  return PeerSearch(processes, unix_peers, unix_paths).run(targets, agent);
}

std::vector<Peer> server_peers(const std::vector<int>& targets) {
  if (targets.empty()) return {};
  ProcessLinks first;
  if (!read_status(targets.front(), first)) return {};  // it exited: nothing to follow
  std::map<uint64_t, std::string> paths;
  const auto peers = unix_socket_peers(&paths);
  return find_peers(targets, read_process_links(first.uid), peers, paths, getpid());
}

}  // namespace ld::host
