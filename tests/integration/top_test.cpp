// `top` as a user runs it: in a terminal (tmux: send-keys, capture-pane) on the sample server
// with an fsync fault. The screen must show the fault's cause within 3 s of the slow token,
// `s` save a trace `report` reads, and `q` leave the terminal as it was and nothing loaded.
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <optional>
#include <sstream>

#include <gtest/gtest.h>

#include "agent_util.hpp"

using namespace ld::test::agent;
using ld::test::read_file;

namespace {

std::string run_output(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

// A tmux server of our own (-L): the test's panes, none of the user's.
struct Tmux {
  std::string socket = "ld-top-test-" + std::to_string(getpid());
  explicit Tmux(const std::string& command) {
    system(("tmux -L " + socket + " new-session -d -x 160 -y 48 " + quoted(command)).c_str());
  }
  ~Tmux() { system(("tmux -L " + socket + " kill-server >/dev/null 2>&1").c_str()); }
  std::string screen() const { return run_output("tmux -L " + socket + " capture-pane -p -t 0 2>/dev/null"); }
  void keys(const std::string& k) const { system(("tmux -L " + socket + " send-keys -t 0 " + k).c_str()); }
  static std::string quoted(const std::string& s) { return "'" + s + "'"; }
};

// Milliseconds since local midnight, now and of an "HH:MM:SS.mmm" the screen shows.
int64_t local_ms_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  std::tm tm{};
  localtime_r(&ts.tv_sec, &tm);
  return ((tm.tm_hour * 60 + tm.tm_min) * 60 + tm.tm_sec) * 1000LL + ts.tv_nsec / 1'000'000;
}

// The first row of the slow-token list naming `cause`: (its token's time, the line).
std::optional<std::pair<int64_t, std::string>> slow_row(const std::string& screen, const std::string& cause) {
  static const std::regex row(
      R"(^\s+(\d\d):(\d\d):(\d\d)\.(\d\d\d)\s+(gap|first)\s+\S+\s+#\d+\s+[\d.]+ m?s\s+(\S+) [\d.]+ m?s)");
  std::istringstream in(screen);
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, row) && m[6] == cause)
      return std::pair{((std::stoll(m[1]) * 60 + std::stoll(m[2])) * 60 + std::stoll(m[3])) * 1000 + std::stoll(m[4]),
                       line};
  return std::nullopt;
}

}  // namespace

TEST(Top, ShowsTheCauseWithinThreeSecondsSavesAndQuitsClean) {
  REQUIRE_BPF();
  if (system("command -v tmux >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "needs tmux (Debian package tmux; scripts/setup.sh installs it)";
  Dir dir("top");
  Server server({"--fault", "disk_io", "--fault-every", "10", "--fault-ms", "300", "--fault-file", dir / "fault.log"});
  ASSERT_GT(server.port, 0);
  // The terminal's settings before and after, and the exit code, as the shell in the pane sees them.
  std::ofstream(dir / "run.sh") << "stty -a > " << dir / "stty.before"
                                << "\n"
                                << kAgent << " top --pid " << server.proc->pid() << " --save-dir " << dir.path.string()
                                << " 2> " << dir / "top.err"
                                << "\n"
                                << "echo $? > " << dir / "rc"
                                << "\nstty -a > " << dir / "stty.after"
                                << "\necho top-has-exited\nsleep 60\n";
  Tmux tmux("bash " + dir / "run.sh");

  // "probes: none attached" is on the first screen, drawn while the probes load.
  auto until = std::chrono::steady_clock::now() + 30s;
  while (tmux.screen().find("probes: sock") == std::string::npos && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(100ms);
  ASSERT_NE(tmux.screen().find("probes: sock"), std::string::npos) << tmux.screen() << read_file(dir / "top.err");
  // [l]: the pattern must not match the shell popen runs it in.
  const int top_pid = std::stoi(
      "0" + run_output("pgrep -n -f '[l]atency-doctor top --pid " + std::to_string(server.proc->pid()) + "'"));
  ASSERT_GT(top_pid, 0);
  const BpfIds held = bpf_ids_of(top_pid);
  EXPECT_FALSE(held.progs.empty());

  std::thread load([&] { drive(server, 6, 2, 40); });
  std::optional<std::pair<int64_t, std::string>> row;
  int64_t seen_at = 0;
  until = std::chrono::steady_clock::now() + 40s;
  while (!row && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(100ms);
    row = slow_row(tmux.screen(), "disk_io");
    seen_at = local_ms_now();
  }
  const std::string screen = tmux.screen();
  ASSERT_TRUE(row) << screen;
  int64_t delay_ms = seen_at - row->first;
  if (delay_ms < -12 * 3600 * 1000LL) delay_ms += 24 * 3600 * 1000LL;  // midnight between
  RecordProperty("cause_shown_after_ms", std::to_string(delay_ms));
  std::cout << "[ top ] the first disk_io row was on screen " << delay_ms << " ms after its token: " << row->second
            << "\n";
  EXPECT_LE(delay_ms, 3000) << screen;
  EXPECT_GE(delay_ms, 0) << screen;
  EXPECT_NE(screen.find("disk-io-on-token-path"), std::string::npos) << screen;
  load.join();

  // s: the trace so far, 0600, readable by `report`.
  tmux.keys("s");
  std::smatch saved;
  until = std::chrono::steady_clock::now() + 10s;
  std::string after_save = tmux.screen();
  while (!std::regex_search(after_save, saved, std::regex(R"(saved \d+ records to (\S+\.ldtrace))")) &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(100ms);
    after_save = tmux.screen();
  }
  ASSERT_FALSE(saved.empty()) << after_save;
  const std::string trace = saved[1];
  struct stat st {};
  ASSERT_EQ(stat(trace.c_str(), &st), 0) << trace;
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Child report({kAgent, "report", trace, "--format", "json"});
  ASSERT_EQ(report.wait(60s).value_or(-1), 0) << report.err();
  const json r = json::parse(report.out(), nullptr, false);
  // Every request is in it; the last ones may lack their end (the connection's close comes later).
  EXPECT_GE(r["summary"].value("requests", 0) + r["summary"].value("partial_requests", 0), 6)
      << report.out().substr(0, 2000);

  // q: gone within a second or two, the terminal as it was, nothing left loaded.
  tmux.keys("q");
  until = std::chrono::steady_clock::now() + 15s;
  while (access((dir / "stty.after").c_str(), R_OK) != 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(50ms);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(read_file(dir / "rc"), "0\n") << read_file(dir / "top.err");
  EXPECT_EQ(read_file(dir / "stty.after"), read_file(dir / "stty.before"));
  const std::string after = tmux.screen();
  EXPECT_NE(after.find("top-has-exited"), std::string::npos) << after;
  EXPECT_EQ(after.find("Slow tokens, newest first"), std::string::npos) << "the alternate screen was not left:\n"
                                                                        << after;
  EXPECT_EQ(still_loaded_settled(held), 0);
  EXPECT_NE(read_file(dir / "top.err").find("disk-io-on-token-path"), std::string::npos) << read_file(dir / "top.err");
}

// Not a terminal: a line per slow token with its cause, and a status line.
TEST(Top, LineModeWhenStdoutIsNotATerminal) {
  REQUIRE_BPF();
  Dir dir("top-lines");
  Server server({"--fault", "disk_io", "--fault-every", "10", "--fault-ms", "300", "--fault-file", dir / "fault.log"});
  ASSERT_GT(server.port, 0);
  Child top({kAgent, "top", "--pid", std::to_string(server.proc->pid()), "--duration", "14s"});
  ASSERT_TRUE(top.wait_for_output("TTFT", 30s)) << top.err();
  drive(server, 6, 2, 40);
  ASSERT_EQ(top.wait(40s).value_or(-1), 0) << top.err();
  EXPECT_TRUE(std::regex_search(top.out(), std::regex(R"(slow gap \d+ ms .*: disk_io \d+ ms)"))) << top.out();
  EXPECT_EQ(top.out().find("\033["), std::string::npos) << "escape codes in line mode";
}

// attach --live runs the same engine: each slow gap on stderr with its cause, then the report.
TEST(Top, AttachLiveNamesTheCause) {
  REQUIRE_BPF();
  Dir dir("attach-live");
  Server server({"--fault", "disk_io", "--fault-every", "10", "--fault-ms", "300", "--fault-file", dir / "fault.log"});
  ASSERT_GT(server.port, 0);
  auto agent = start_attach(server.proc->pid(), {"--live", "--duration", "60s", "-o", dir / "report.txt"});
  drive(server, 6, 2, 40);
  std::this_thread::sleep_for(1500ms);  // the last slow gap's wake-up
  agent->signal(SIGINT);
  ASSERT_EQ(agent->wait(30s).value_or(-1), 0) << agent->err();
  EXPECT_TRUE(std::regex_search(agent->err(), std::regex(R"(live: \S+ slow gap \d+ ms .*: disk_io \d+ ms)")))
      << agent->err();
  EXPECT_NE(read_file(dir / "report.txt").find("blocked on disk IO"), std::string::npos)
      << read_file(dir / "report.txt");
}
