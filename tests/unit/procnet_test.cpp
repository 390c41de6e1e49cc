// /proc/net parsing on a fixture tree (tests/data/procnet): listening ports owned by a pid's
// fds, netstat/snmp/sockstat counters.
#include <gtest/gtest.h>

#include "host/cpufreq.hpp"
#include "host/procnet.hpp"

using namespace ld::host;

namespace {
const std::string kRoot = std::string(LD_TEST_DATA_DIR) + "/procnet";
}

TEST(ProcNetParse, TcpLines) {
  auto lines = parse_proc_net_tcp(
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5555 1 0 100 0 0 10 "
      "0\n"
      "   1: 0100007F:1F90 0100007F:C351 06 00000000:00000000 03:00001717 00000000     0        0 0 3 0\n");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].local_port, 8080);
  EXPECT_EQ(lines[0].state, 0x0A);
  EXPECT_EQ(lines[0].inode, 5555u);
  EXPECT_EQ(lines[1].remote_port, 0xC351);
  EXPECT_EQ(lines[1].state, 6);  // TIME_WAIT
}

TEST(ProcNetParse, SocketLink) {
  EXPECT_EQ(parse_socket_link("socket:[12345]"), 12345u);
  EXPECT_FALSE(parse_socket_link("pipe:[12345]"));
  EXPECT_FALSE(parse_socket_link("socket:[]"));
  EXPECT_FALSE(parse_socket_link("/dev/null"));
}

TEST(ProcNetParse, ListeningPortsOwnedByThePid) {
  // 8080 (v4, fd 3) and 8888 (v6, fd 5) listen and are ours; 22 listens but is not our fd;
  // inode 7777 is ours but established, not listening.
  EXPECT_EQ(listening_ports_of(kRoot, 100), (std::set<uint16_t>{8080, 8888}));
  EXPECT_TRUE(listening_ports_of(kRoot, 101).empty());
}

TEST(ProcNetParse, Counters) {
  auto c = read_net_counters(kRoot, 100);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->listen_overflows, 17u);  // TcpExt, not MPTcpExt's column of the same name
  EXPECT_EQ(c->listen_drops, 19u);
  EXPECT_EQ(c->tcp_timewait, 30u);
  EXPECT_EQ(c->retrans_segs, 11u);
  EXPECT_EQ(c->active_opens, 805u);
  EXPECT_EQ(c->passive_opens, 780u);
  EXPECT_FALSE(read_net_counters(kRoot, 101));
}

TEST(ProcNetParse, PairsAndSockstatEdgeCases) {
  EXPECT_FALSE(parse_proc_net_pairs("Tcp: A B\nTcp: 1\n", "Tcp", "B"));
  EXPECT_EQ(parse_proc_net_pairs("Tcp: A B\nTcp: 1 2\n", "Tcp", "B"), 2u);
  EXPECT_FALSE(parse_proc_net_pairs("Tcp: A B\nUdp: 1 2\n", "Tcp", "A"));
  EXPECT_EQ(parse_sockstat_tcp("TCP: inuse 1 tw 9\n", "tw"), 9u);
  EXPECT_FALSE(parse_sockstat_tcp("TCP6: inuse 1 tw 9\n", "tw"));
}

// The sysfs cpufreq sampler (the path used where power:cpu_frequency is silent, e.g. HWP).
TEST(CpuFreqSysfs, ReadsEveryCpuWithCpufreq) {
  std::string root = std::string(LD_TEST_DATA_DIR) + "/cpufreq";
  ASSERT_TRUE(has_cpufreq(root));
  auto r = read_cpu_freqs(root);
  ASSERT_EQ(r.size(), 2u);  // cpu2 has no cpufreq dir; "cpufreq"/"cpuidle" are not CPUs
  EXPECT_EQ(r[0].cpu, 0u);
  EXPECT_EQ(r[0].khz, 2400000u);
  EXPECT_EQ(r[0].max_khz, 3500000u);
  EXPECT_EQ(r[1].cpu, 1u);
  EXPECT_EQ(r[1].khz, 1200000u);
}

TEST(CpuFreqSysfs, NoCpufreqDirectory) {
  std::string root = std::string(LD_TEST_DATA_DIR) + "/procnet";
  EXPECT_FALSE(has_cpufreq(root));
  EXPECT_TRUE(read_cpu_freqs(root).empty());
}
