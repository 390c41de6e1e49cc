// Root tier: the tcp probe against tests/workloads/tcp_churn.cpp (a loopback server that
// closes 200 one-request connections first, so each lands in TIME_WAIT on its port).
#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "events.h"
#include "probe_test_util.hpp"

using namespace std::chrono_literals;
using ld::test::Child;

namespace {

constexpr int kConnections = 200;

int port_of(const Child& wl) {
  std::smatch m;
  std::string out = wl.out();
  return std::regex_search(out, m, std::regex(R"(port (\d+))")) ? std::stoi(m[1]) : -1;
}

struct Counts {
  int time_wait = 0, setup = 0, close = 0;
  int setup_via_port_map = 0;  // SYN_RECV -> ESTABLISHED matched by the listening-port map
  int setup_foreign_task = 0;  // ... seen in a task that is not the target (softirq, client)
};

Counts count_server_port(const ld::test::Recorded& rec, int port, int target) {
  Counts c;
  for (const auto& s : rec.of_type<ld_tcp_state>(LD_EV_TCP_STATE)) {
    if (s.lport != port) continue;
    if (s.newstate == LD_TCP_TIME_WAIT) {
      EXPECT_TRUE(s.flags & LD_TCP_F_TW_INFERRED);
      EXPECT_TRUE(s.oldstate == LD_TCP_FIN_WAIT2 || s.oldstate == LD_TCP_CLOSING) << s.oldstate;
      c.time_wait++;
    } else if (s.newstate == LD_TCP_ESTABLISHED && s.oldstate == LD_TCP_SYN_RECV) {
      c.setup++;
      if (s.flags & LD_TCP_F_LISTEN_PORT) c.setup_via_port_map++;
      if (int(s.hdr.tgid) != target) c.setup_foreign_task++;
    } else if (s.newstate == LD_TCP_CLOSE) {
      c.close++;
    }
  }
  return c;
}

double rate(size_t n, const ld::test::Recorded& rec) {
  auto samples = rec.of_type<ld_net_sample>(LD_EV_NET_SAMPLE);
  if (samples.size() < 2) return 0;
  double secs = (samples.back().hdr.ts_ns - samples.front().hdr.ts_ns) / 1e9;
  return secs > 0 ? n / secs : 0;
}

}  // namespace

// Client thread in the target: TIME_WAIT records on the server's port, and the namespace's
// TIME_WAIT count (sockstat) grows in the net samples.
TEST(TcpProbe, ServerClosesFirstTimeWaitOnServerPort) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Child wl({ld::test::workload_path("tcp_churn"), "--count", std::to_string(kConnections)});
  auto rec = ld::test::record_workload(wl, "tcp", 20s);
  ASSERT_EQ(rec.agent_exit, 0) << rec.agent_err;
  ASSERT_EQ(rec.probe("tcp").value("status", ""), "attached") << rec.probe("tcp").dump();
  ASSERT_NE(wl.out().find("done 200"), std::string::npos) << wl.out();
  int port = port_of(wl);
  ASSERT_GT(port, 0);

  Counts c = count_server_port(rec, port, wl.pid());
  EXPECT_GE(c.time_wait, kConnections - 10);
  EXPECT_LE(c.time_wait, kConnections);
  EXPECT_GE(c.setup, kConnections - 10);
  // One TIME_WAIT per connection, each with its own client port. (Not distinct sock_ids: the
  // struct sock is freed at TIME_WAIT and the next connection often reuses its memory.)
  std::set<uint16_t> peers;
  for (const auto& s : rec.of_type<ld_tcp_state>(LD_EV_TCP_STATE))
    if (s.lport == port && s.newstate == LD_TCP_TIME_WAIT) {
      peers.insert(s.rport);
      EXPECT_EQ(s.family, 2);  // AF_INET
    }
  EXPECT_EQ(peers.size(), size_t(c.time_wait));

  auto samples = rec.of_type<ld_net_sample>(LD_EV_NET_SAMPLE);
  // At least the baseline at attach and the sample at the end (one a second in between).
  ASSERT_GE(samples.size(), 2u);
  uint64_t first = samples.front().tcp_timewait, peak = 0;
  for (const auto& s : samples) {
    EXPECT_EQ(s.hdr.tgid, uint32_t(wl.pid()));
    peak = std::max(peak, s.tcp_timewait);
  }
  // Other tests' TIME_WAIT sockets expire meanwhile; ours (60 s) do not.
  EXPECT_GE(peak, first + kConnections / 2) << "first " << first << " peak " << peak;
  EXPECT_GE(samples.back().passive_opens, samples.front().passive_opens + kConnections);
  size_t tcp_records = rec.of_type<ld_tcp_state>(LD_EV_TCP_STATE).size();
  std::cout << "[ metrics  ] tcp_state records " << tcp_records << " (" << rate(tcp_records, rec) << "/s), net samples "
            << samples.size() << " (" << rate(samples.size(), rec) << "/s), server port TIME_WAIT " << c.time_wait
            << ", set-up " << c.setup << "\n";
}

// A listener that predates the recording and a client in ANOTHER process (not a target): the
// handshake completes in the client's context, so only the listening-port map found in
// /proc/PID/net/tcp + /proc/PID/fd can attribute it to the target.
TEST(TcpProbe, PreexistingListenerFoundInProcMatchesForeignClients) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Child wl({ld::test::workload_path("tcp_churn"), "--count", std::to_string(kConnections), "--listen-early",
            "--client-process"});
  ASSERT_TRUE(wl.wait_for_output("port ", 5s));
  auto rec = ld::test::record_workload(wl, "tcp", 20s);
  ASSERT_EQ(rec.agent_exit, 0) << rec.agent_err;
  std::string detail = rec.probe("tcp").value("reason", "");
  EXPECT_NE(detail.find("(1 found at start)"), std::string::npos) << detail;
  int port = port_of(wl);
  Counts c = count_server_port(rec, port, wl.pid());
  EXPECT_GE(c.setup_via_port_map, kConnections - 10);
  EXPECT_GE(c.setup_foreign_task, kConnections - 10);
  EXPECT_GE(c.time_wait, kConnections - 10);
  // The client child's own sockets are not the target's: nothing on its ephemeral ports.
  for (const auto& s : rec.of_type<ld_tcp_state>(LD_EV_TCP_STATE))
    EXPECT_EQ(s.lport, port) << "a record for a non-target socket " << s.lport << "->" << s.rport;
}

// The tcp probe at idle (a target that only sleeps): only the 4/s counter samples.
TEST(TcpProbe, IdleCost) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Child wl({ld::test::workload_path("tcp_churn"), "--idle-ms", "2000"});
  auto started = std::chrono::steady_clock::now();
  auto rec = ld::test::record_workload(wl, "tcp", 10s);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_EQ(rec.agent_exit, 0) << rec.agent_err;
  size_t states = rec.of_type<ld_tcp_state>(LD_EV_TCP_STATE).size();
  size_t samples = rec.of_type<ld_net_sample>(LD_EV_NET_SAMPLE).size();
  EXPECT_EQ(states, 0u);
  EXPECT_LE(samples / secs, 6.0);
  std::cout << "[ metrics  ] idle: " << states << " tcp_state, " << samples << " net samples in " << secs << " s\n";
}
