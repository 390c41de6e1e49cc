#include "host/procnet.hpp"

#include <dirent.h>
#include <unistd.h>

#include <charconv>
#include <climits>
#include <fstream>
#include <sstream>

#include "util/files.hpp"

namespace ld::host {
namespace {

std::string slurp(const std::string& path) { return util::read_file(path); }

std::vector<std::string_view> split_ws(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

template <typename T>
std::optional<T> to_num(std::string_view s, int base = 10) {
  T value{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), value, base);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return value;
}

// "0100007F:1F90" or "00000000000000000000000001000000:1F90" -> port 0x1F90.
std::optional<uint16_t> port_of(std::string_view addr) {
  auto colon = addr.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  return to_num<uint16_t>(addr.substr(colon + 1), 16);
}

}  // namespace

std::vector<TcpSocketLine> parse_proc_net_tcp(std::string_view text) {
  std::vector<TcpSocketLine> out;
  for (auto line : lines_of(text)) {
    auto f = split_ws(line);
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...; the header has "sl".
    if (f.size() < 10 || f[0] == "sl") continue;
    auto lport = port_of(f[1]), rport = port_of(f[2]);
    auto st = to_num<uint8_t>(f[3], 16);
    auto inode = to_num<uint64_t>(f[9]);
    if (!lport || !rport || !st || !inode) continue;
    out.push_back({*lport, *rport, *st, *inode});
  }
  return out;
}

std::optional<uint64_t> parse_socket_link(std::string_view link) {
  constexpr std::string_view prefix = "socket:[";
  if (link.substr(0, prefix.size()) != prefix || link.size() < prefix.size() + 2 || link.back() != ']')
    return std::nullopt;
  return to_num<uint64_t>(link.substr(prefix.size(), link.size() - prefix.size() - 1));
}

std::set<uint16_t> listening_ports_of(const std::string& root, int pid) {
  std::string proc = root + "/proc/" + std::to_string(pid);
  constexpr uint8_t kListen = 0x0A;
  std::vector<TcpSocketLine> listening;
  for (const char* file : {"/net/tcp", "/net/tcp6"})
    for (const auto& s : parse_proc_net_tcp(slurp(proc + file)))
      if (s.state == kListen) listening.push_back(s);
  std::set<uint16_t> ports;
  if (listening.empty()) return ports;
  std::set<uint64_t> inodes;
  if (DIR* dir = opendir((proc + "/fd").c_str())) {
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      char buf[64];
      ssize_t n = readlink((proc + "/fd/" + e->d_name).c_str(), buf, sizeof(buf) - 1);
      if (n <= 0) continue;
      if (auto inode = parse_socket_link(std::string_view(buf, n))) inodes.insert(*inode);
    }
    closedir(dir);
  }
  for (const auto& s : listening)
    if (inodes.count(s.inode)) ports.insert(s.local_port);
  return ports;
}

std::optional<uint64_t> parse_proc_net_pairs(std::string_view text, std::string_view prefix, std::string_view key) {
  auto lines = lines_of(text);
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    auto names = split_ws(lines[i]);
    auto values = split_ws(lines[i + 1]);
    if (names.empty() || values.empty() || names[0] != values[0]) continue;
    if (names[0].size() != prefix.size() + 1 || names[0].substr(0, prefix.size()) != prefix || names[0].back() != ':')
      continue;
    for (size_t k = 1; k < names.size() && k < values.size(); ++k)
      if (names[k] == key) return to_num<uint64_t>(values[k]);
    ++i;  // the value line is not a header
  }
  return std::nullopt;
}

std::optional<uint64_t> parse_sockstat_tcp(std::string_view text, std::string_view key) {
  for (auto line : lines_of(text)) {
    auto f = split_ws(line);
    if (f.empty() || f[0] != "TCP:") continue;
    for (size_t k = 1; k + 1 < f.size(); k += 2)
      if (f[k] == key) return to_num<uint64_t>(f[k + 1]);
  }
  return std::nullopt;
}

std::optional<NetCounters> read_net_counters(const std::string& root, int pid, const util::FileReader& read) {
  std::string net = root + "/proc/" + std::to_string(pid) + "/net/";
  std::string netstat = read(net + "netstat"), snmp = read(net + "snmp"), sockstat = read(net + "sockstat");
  if (netstat.empty() && snmp.empty() && sockstat.empty()) return std::nullopt;
  NetCounters c;
  auto set = [](uint64_t& field, std::optional<uint64_t> v) {
    if (v) field = *v;
  };
  set(c.listen_overflows, parse_proc_net_pairs(netstat, "TcpExt", "ListenOverflows"));
  set(c.listen_drops, parse_proc_net_pairs(netstat, "TcpExt", "ListenDrops"));
  set(c.tcp_timewait, parse_sockstat_tcp(sockstat, "tw"));
  set(c.retrans_segs, parse_proc_net_pairs(snmp, "Tcp", "RetransSegs"));
  set(c.active_opens, parse_proc_net_pairs(snmp, "Tcp", "ActiveOpens"));
  set(c.passive_opens, parse_proc_net_pairs(snmp, "Tcp", "PassiveOpens"));
  return c;
}

std::string net_namespace_of(const std::string& root, int pid) {
  char buf[64];
  std::string path = root + "/proc/" + std::to_string(pid) + "/ns/net";
  ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : "";
}

}  // namespace ld::host
