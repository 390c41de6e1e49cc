// TCP facts of a process's network namespace, read from /proc/PID/net/... (so a target in a
// container is seen in ITS namespace) and /proc/PID/fd. Pure parsing plus file reading under
// a root prefix ("" on a live host, a fixture directory in tests); tolerant of missing files.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "util/files.hpp"

namespace ld::host {

// One line of /proc/net/tcp or tcp6.
struct TcpSocketLine {
  uint16_t local_port = 0;
  uint16_t remote_port = 0;
  uint8_t state = 0;  // TCP_* (0x0A = LISTEN)
  uint64_t inode = 0;
};
std::vector<TcpSocketLine> parse_proc_net_tcp(std::string_view text);

// "socket:[12345]" (readlink of /proc/PID/fd/N) -> 12345.
std::optional<uint64_t> parse_socket_link(std::string_view link);

// Listening TCP ports (v4 and v6) whose socket is an open fd of `pid`.
std::set<uint16_t> listening_ports_of(const std::string& root, int pid);

// Value of `key` in the "Prefix: k1 k2 ...\nPrefix: v1 v2 ..." pairs of /proc/net/netstat
// and /proc/net/snmp; nullopt when absent.
std::optional<uint64_t> parse_proc_net_pairs(std::string_view text, std::string_view prefix, std::string_view key);
// Value after `key` on the "TCP:" line of /proc/net/sockstat ("TCP: inuse 5 orphan 0 tw 3 ...").
std::optional<uint64_t> parse_sockstat_tcp(std::string_view text, std::string_view key);

// Cumulative counters (and the TIME_WAIT count now) of one network namespace; ~0 = unknown.
struct NetCounters {
  uint64_t listen_overflows = ~0ULL;  // TcpExt ListenOverflows
  uint64_t listen_drops = ~0ULL;      // TcpExt ListenDrops
  uint64_t tcp_timewait = ~0ULL;      // sockstat TCP tw
  uint64_t retrans_segs = ~0ULL;      // Tcp RetransSegs
  uint64_t active_opens = ~0ULL;      // Tcp ActiveOpens
  uint64_t passive_opens = ~0ULL;     // Tcp PassiveOpens
};
// Reads root/proc/PID/net/{netstat,sockstat,snmp} with `read`; nullopt when none of them is
// readable.
std::optional<NetCounters> read_net_counters(const std::string& root, int pid,
                                             const util::FileReader& read = util::read_file);

// Identity of the network namespace of `pid` ("net:[4026531840]"), "" when unknown.
std::string net_namespace_of(const std::string& root, int pid);

}  // namespace ld::host
