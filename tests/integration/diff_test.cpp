// `diff` on two real runs of the sample server: with an fsync fault, then without it. The
// verdict must say the fix worked in every format, and the reverse diff must fail the gate.
#include <gtest/gtest.h>

#include "agent_util.hpp"

using namespace ld::test::agent;

namespace {

// Records one run under load into `trace`.
void record_run(const std::vector<std::string>& server_args, const std::string& trace) {
  Server server(server_args);
  ASSERT_GT(server.port, 0);
  auto agent = start_attach(server.proc->pid(), {"--duration", "60s", "--record", trace, "--format", "json", "-o",
                                                 trace + ".json", "--quiet"});
  drive(server, 8, 2, 30);
  agent->signal(SIGINT);
  ASSERT_EQ(agent->wait(30s).value_or(-1), 0) << agent->err();
}

}  // namespace

TEST(Diff, OfTheFsyncFaultAndItsFixSaysTheFixWorked) {
  REQUIRE_BPF();
  Dir dir("diff");
  const std::string before = dir / "before.ldtrace", after = dir / "after.ldtrace";
  record_run({"--fault", "disk_io", "--fault-every", "10", "--fault-ms", "300", "--fault-file", dir / "fault.log"},
             before);
  record_run({}, after);

  Child text({kAgent, "diff", before, after});
  ASSERT_EQ(text.wait(60s).value_or(-1), 0) << text.err();
  std::cout << text.out();
  // The verdict rests on the p99 that changed most (TTFT or TPOT: the fault may land on a first token).
  EXPECT_TRUE(
      std::regex_search(text.out(), std::regex(R"((TTFT|TPOT) p99 -\d+%.*disk_io \d+% -> 0% .*the fix worked)")))
      << text.out();

  // The JSON reports diff as the traces do.
  Child json_diff({kAgent, "diff", before + ".json", after + ".json", "--format", "json"});
  ASSERT_EQ(json_diff.wait(60s).value_or(-1), 0) << json_diff.err();
  const json d = json::parse(json_diff.out(), nullptr, false);
  ASSERT_TRUE(d.is_object()) << json_diff.out();
  EXPECT_EQ(d["verdict"].value("outcome", ""), "better") << d["verdict"].dump();
  EXPECT_TRUE(d["verdict"].value("fix_worked", false)) << d["verdict"].dump();

  for (const char* format : {"markdown", "html"}) {
    Child out({kAgent, "diff", before, after, "--format", format});
    ASSERT_EQ(out.wait(60s).value_or(-1), 0) << format << ": " << out.err();
    EXPECT_NE(out.out().find("the fix worked"), std::string::npos) << format;
    if (std::string(format) == "html") {
      EXPECT_NE(out.out().find("<svg"), std::string::npos) << "the histograms";
    }
  }

  // The other way round the change is for the worse: the gate fails.
  Child gate({kAgent, "diff", after, before, "--fail-on", "worse"});
  EXPECT_EQ(gate.wait(60s).value_or(-1), 3) << gate.out() << gate.err();
}
