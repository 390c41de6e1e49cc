// The processes of one server, found from the targets' links (host/peers.hpp): on made-up
// process tables, and on two real sibling processes connected over a unix socket.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "host/peers.hpp"

using ld::host::find_peers;
using ld::host::Peer;
using ld::host::ProcessLinks;

namespace {

ProcessLinks proc(int pid, int ppid, const char* comm, std::map<int, std::string> fds = {}, uint32_t uid = 1000) {
  ProcessLinks p;
  p.pid = pid;
  p.ppid = ppid;
  p.comm = comm;
  p.uid = uid;
  p.fds = std::move(fds);
  return p;
}

std::string whys(const std::vector<Peer>& peers) {
  std::string out;
  for (const Peer& p : peers) out += std::to_string(p.pid) + " " + p.comm + ": " + p.why + "\n";
  return out;
}

}  // namespace

TEST(Peers, ChildrenSocketPipeAndSharedMemoryPeersButNotTheHostsPlumbing) {
  std::vector<ProcessLinks> host{
      proc(1, 0, "systemd", {}, 0), proc(10, 1, "bash"),  // the shell that started the server: an ancestor
      // The API server: its log pipe and journal socket on fd 0-2, a ZMQ socket to the engine
      // core, a pipe to a tokenizer pool, a socket to the journal on fd 8.
      proc(20, 10, "python3",
           {{0, "pipe:[1]"},
            {1, "socket:[900]"},
            {5, "socket:[501]"},
            {6, "pipe:[700]"},
            {7, "anon_inode:[eventfd]"},
            {8, "socket:[903]"},
            {10, "pipe:[702]"}}),
      proc(21, 20, "python3"),                                // a worker it forked
      proc(30, 1, "VLLM::EngineCor", {{9, "socket:[502]"}}),  // started apart, connected over ZMQ IPC
      proc(31, 30, "VLLM::Worker"), proc(40, 1, "systemd-journal", {{3, "socket:[901]"}, {4, "socket:[904]"}}, 0),
      proc(50, 1, "other-user", {{3, "pipe:[700]"}}, 1001), proc(60, 1, "tokenizer", {{3, "pipe:[700]"}}),
      proc(70, 1, "cache-daemon"), proc(80, 81, "latency-doctor"),
      proc(81, 1, "zsh", {{3, "pipe:[702]"}}),  // the agent's shell: never a peer
  };
  host[3].shared_memory["0:1a:1234"] = "/dev/shm/psm_1";  // the worker's shared ring...
  host[9].shared_memory["0:1a:1234"] = "/dev/shm/psm_1";  // ...mapped by another process
  const std::map<uint64_t, uint64_t> unix_peers{{501, 502}, {502, 501}, {900, 901}, {901, 900}, {903, 904}, {904, 903}};
  const std::map<uint64_t, std::string> paths{{502, "/tmp/vllm/ipc"}};
  const auto peers = find_peers({20}, host, unix_peers, paths, 80);
  EXPECT_EQ(whys(peers),
            "21 python3: a child of 20\n"
            "30 VLLM::EngineCor: connected to 20 over a unix socket (/tmp/vllm/ipc)\n"
            "60 tokenizer: shares a pipe with 20\n"
            "70 cache-daemon: maps shared memory /dev/shm/psm_1 with 21\n"
            "31 VLLM::Worker: a child of 30\n");
}

TEST(Peers, APipeInheritedFromTheShellLinksNoSiblings) {
  // The shell leaked a pipe on fd 3 into everything it started: the server and a `sleep`.
  const std::vector<ProcessLinks> host{
      proc(10, 1, "bash", {{3, "pipe:[77]"}}), proc(20, 10, "python3", {{3, "pipe:[77]"}, {4, "pipe:[78]"}}),
      proc(21, 10, "sleep", {{3, "pipe:[77]"}}), proc(22, 10, "helper", {{5, "pipe:[78]"}})};
  EXPECT_EQ(whys(find_peers({20}, host, {}, {}, 99)), "22 helper: shares a pipe with 20\n");
}

TEST(Peers, NothingLinkedNothingFound) {
  const std::vector<ProcessLinks> host{proc(1, 0, "systemd", {}, 0), proc(20, 1, "llama-server", {{3, "socket:[5]"}}),
                                       proc(21, 1, "bash", {{3, "socket:[6]"}})};
  EXPECT_TRUE(find_peers({20}, host, {}, {}, 99).empty());  // sockets without a unix peer: TCP
  EXPECT_TRUE(find_peers({}, host, {}, {}, 99).empty());
  EXPECT_TRUE(find_peers({12345}, host, {}, {}, 99).empty());  // a target that vanished
}

TEST(Peers, ATargetIsNeverItsOwnPeerAndTwoTargetsShareTheirFinds) {
  const std::vector<ProcessLinks> host{proc(20, 1, "api", {{3, "socket:[1]"}}),
                                       proc(30, 1, "engine", {{3, "socket:[2]"}}), proc(31, 30, "worker")};
  const auto peers = find_peers({20, 30}, host, {{1, 2}, {2, 1}}, {}, 99);
  EXPECT_EQ(whys(peers), "31 worker: a child of 30\n");  // 20 and 30 are both asked for
}

namespace {

// A child that serves on (listen) or connects to (!listen) a unix socket at `path`, then waits.
pid_t unix_socket_child(const std::string& path, bool listen_side) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (listen_side) {
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 1) != 0) _exit(1);
    if (accept(fd, nullptr, nullptr) < 0) _exit(1);
  } else {
    for (int i = 0; i < 200 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0; ++i) usleep(10000);
  }
  pause();
  _exit(0);
}

}  // namespace

TEST(ServerPeers, FindsASiblingConnectedOverAUnixSocket) {
  const std::string path = "/tmp/ld-peers-" + std::to_string(getpid()) + ".sock";
  unlink(path.c_str());
  const pid_t api = unix_socket_child(path, true), engine = unix_socket_child(path, false);
  std::vector<Peer> peers;
  for (int i = 0; i < 100; ++i) {  // until the connection is accepted
    peers = ld::host::server_peers({api});
    if (!peers.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(api, SIGKILL);
  kill(engine, SIGKILL);
  waitpid(api, nullptr, 0);
  waitpid(engine, nullptr, 0);
  unlink(path.c_str());
  ASSERT_EQ(peers.size(), 1u) << whys(peers);
  EXPECT_EQ(peers[0].pid, engine);
  EXPECT_EQ(peers[0].why, "connected to " + std::to_string(api) + " over a unix socket (" + path + ")");
}
