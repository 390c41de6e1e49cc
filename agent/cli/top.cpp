// latency-doctor top: a server's slow tokens with their causes, live. The model and the
// screen's text are live/top_model.hpp and live/top_screen.hpp; this file owns the terminal
// (raw keys, the alternate screen, restored on every way out) and the flight recorder that
// `s` saves from.
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/common.hpp"
#include "host/host_facts.hpp"
#include "live/top_model.hpp"
#include "live/top_screen.hpp"
#include "probes/probe_session.hpp"
#include "probes/recorder.hpp"
#include "rules/engine.hpp"
#include "serve/flight_recorder.hpp"
#include "trace/trace_header.hpp"
#include "util/time.hpp"

namespace ld::cli {
namespace {

struct TopFlags {
  RecordFlags record;
  std::vector<std::string> rules;
  std::string save_dir = ".";
  bool lines = false;
};

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the terminal is gone: nothing to draw on
    done += static_cast<size_t>(n);
  }
}

// The terminal in raw mode on the alternate screen for as long as this lives. The destructor
// gives it back as it was on every way out: q, Ctrl-C (SIGINT ends the recording, ISIG stays
// on), the target's exit, an error.
class Terminal {
 public:
  Terminal() {
    if (tcgetattr(STDIN_FILENO, &saved_) != 0)
      throw std::runtime_error(fmt::format("cannot read the terminal's settings: {}", std::strerror(errno)));
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);  // a key at a time, not echoed
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw);
    write_all(STDOUT_FILENO, "\033[?1049h\033[?25l\033[H\033[2J");  // alternate screen, no cursor
  }
  ~Terminal() {
    write_all(STDOUT_FILENO, "\033[?25h\033[?1049l");
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_);
  }
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;

  std::pair<int, int> size() const {
    winsize ws{};
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) return {ws.ws_col, ws.ws_row};
    return {80, 24};
  }
  void draw(const std::vector<std::string>& lines) const {
    std::string out = "\033[H";
    for (size_t i = 0; i < lines.size(); ++i) out += lines[i] + (i + 1 < lines.size() ? "\033[K\r\n" : "\033[K");
    write_all(STDOUT_FILENO, out + "\033[J");
  }
  // The keys typed since the last call; nullopt once the terminal hung up (ssh went away).
  static std::optional<std::string> keys() {
    pollfd p{STDIN_FILENO, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return std::string();
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return std::nullopt;
    char buf[64];
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n > 0) return std::string(buf, static_cast<size_t>(n));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return std::string();
    return std::nullopt;
  }

 private:
  termios saved_{};
};

// A private directory for the flight recorder, gone at exit: what `s` saves from.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = fmt::format("{}/latency-doctor-top-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(pattern.data()))
      throw std::runtime_error(
          fmt::format("cannot create a directory in {}: {}", tmp && *tmp ? tmp : "/tmp", std::strerror(errno)));
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

std::string target_text(const trace::TraceHeader& header) {
  const auto& t = header.target;
  if (t.pids.empty()) return "no target";
  std::string text = fmt::format("pid {} ({})", t.pids.front(), t.comm);
  if (t.pids.size() > 1) text += fmt::format(" +{} process(es)", t.pids.size() - 1);
  return text;
}

// What the keys and the wake-ups change.
struct TopState {
  live::ScreenInfo info;
  uint64_t started_ns = 0;
  uint64_t last_status_ns = 0;
  int64_t realtime_minus_monotonic_ns = 0;
  bool quit_by_key = false;
};

std::string save_trace(serve::FlightRecorder& flight, const std::string& dir, const nlohmann::json& trailer,
                       uint64_t now_ns) {
  const std::time_t t = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&t));
  const std::string path = fmt::format("{}/latency-doctor-top-{}.ldtrace", dir, stamp);
  try {
    flight.flush();
    const auto stats = flight.dump(path, 0, now_ns, trailer);
    return fmt::format("saved {} records to {} (latency-doctor report {})", stats.records, path, path);
  } catch (const std::exception& e) {
    return fmt::format("could not save the trace: {}", e.what());
  }
}

int run_top(const TopFlags& o) {
  RecordFlags flags = o.record;
  const bool forever = flags.duration.empty();
  if (forever) flags.duration = "1s";  // replaced below: until q or Ctrl-C
  probes::RecordOptions options = to_record_options(flags, 1000);
  if (forever) options.duration_ms = 0;
  auto rules = std::make_shared<const rules::RuleSet>(rules::load_rules(o.rules));
  if (!std::filesystem::is_directory(o.save_dir))
    throw std::invalid_argument(fmt::format("--save-dir {}: no such directory", o.save_dir));
  const bool screen = !o.lines && isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
  options.quiet = screen || options.quiet;  // the screen shows what the progress line would

  ScratchDir scratch;
  serve::FlightOptions flight_options;
  flight_options.dir = scratch.path;
  serve::FlightRecorder flight(flight_options);
  live::TopModel model({}, rules);
  TopState state;
  std::optional<Terminal> terminal;
  if (screen) {
    terminal.emplace();
    state.info.target = fmt::format("pid {}", fmt::join(options.pids, ","));
    state.info.message = "attaching the probes (a few seconds)...";
    const auto [width, height] = terminal->size();
    terminal->draw(live::render_screen(model.view(), state.info, width, height));
  }
  probes::install_stop_signals();
  options.on_start = [&](const trace::TraceHeader& header) {
    model.on_start(header);
    flight.start(trace::to_json(header), header.start_mono_ns.value_or(host::monotonic_now_ns()));
    state.info.target = target_text(header);
    state.realtime_minus_monotonic_ns = header.realtime_minus_monotonic_ns;
  };
  options.on_wake = [&](probes::ProbeSession& session, uint64_t now) {
    if (!state.started_ns) {
      state.started_ns = now;
      state.info.message.clear();
    }
    state.info.probes = session.status();
    state.info.elapsed_s = util::ns_to_s(now - state.started_ns);
    state.info.now_unix_ns = model::mono_to_unix_ns(now, state.realtime_minus_monotonic_ns);
    if (auto problem = flight.tick(now, serve::segment_trailer(state.info.probes, now)); !problem.empty())
      state.info.message = problem;
    if (terminal) {
      const auto keys = Terminal::keys();
      if (!keys) probes::request_stop();  // the terminal hung up
      for (char key : keys.value_or("")) {
        if (key == 'q' || key == 'Q') {
          state.quit_by_key = true;
          probes::request_stop();
        }
        if (key == 'p' || key == 'P') state.info.paused = !state.info.paused;
        if (key == 'f' || key == 'F') model.set_frozen(!model.view().frozen);
        if (key == 's' || key == 'S')
          state.info.message = save_trace(flight, o.save_dir, serve::segment_trailer(state.info.probes, now), now);
      }
      session.wake_when_readable(STDIN_FILENO);  // the next key wakes the loop at once
    }
    const auto explained = model.tick(now, state.info.probes);
    if (terminal) {
      if (state.info.paused) return;
      const auto [width, height] = terminal->size();
      terminal->draw(live::render_screen(model.view(), state.info, width, height));
      return;
    }
    for (const auto& token : explained) fmt::print("{}\n", live::slow_token_line(token));
    if (now - state.last_status_ns >= 10 * util::kNsPerSec) {
      state.last_status_ns = now;
      fmt::print("{}\n", live::status_line(model.view(), state.info));
    }
    std::fflush(stdout);
  };
  auto result = probes::record(options, [&](const ld_hdr& rec, size_t size) {
    model.on_record(rec, size);
    flight.append(rec, size);
  });
  terminal.reset();  // the screen goes before anything is printed
  // The last findings stay on the terminal after the screen is gone.
  const auto& findings = model.view().findings;
  const auto& view = model.view();
  fmt::print(stderr,
             "latency-doctor top: stopped ({}) after {:.0f} s; {} slow token(s) seen; the agent's CPU {:.0f} ms, "
             "{:.0f} ms of it in {} attribution(s){}\n",
             state.quit_by_key ? "q" : trace::stop_reason_name(result.stop_reason), state.info.elapsed_s,
             view.slow_seen, probes::own_usage().cpu_ms, view.analysis_ms, view.analyses,
             findings.empty() ? "" : fmt::format("; {} finding(s):", findings.size()));
  for (const auto& seen : findings)
    fmt::print(stderr, "  {} {}: {} (last {})\n", seen.finding.severity, seen.finding.rule, seen.finding.title,
               live::clock_text(seen.last_unix_ns));
  print_warnings(result.warnings);
  result.session.reset();  // detach before the exit code: nothing stays attached
  return kExitOk;
}

}  // namespace

void register_top(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<TopFlags>();
  auto* sub = app.add_subcommand("top", "Watch a server's slow tokens and their causes live (full screen)");
  sub->footer(
      "Refreshes every second: TTFT and TPOT of the last 10 s and 60 s (count, p50, p99), the\n"
      "TPOT p99 of each of the last 60 seconds, the slow tokens' time by cause, each slow token\n"
      "(a first token over 800 ms, a gap over 150 ms, or an outlier of the attribution) with its\n"
      "cause and culprit within a second or two, the findings so far, the probes and lost events.\n"
      "Token times come from the target's SSE sends (as attach --tokens sse).\n\n"
      "Keys: q quit, p pause the screen, f freeze the list, s save the trace so far (the last\n"
      "15 minutes at most, mode 0600, in --save-dir; read it with `latency-doctor report`).\n"
      "Runs until q, Ctrl-C, --duration or the target's exit; nothing stays attached after.\n"
      "When stdout is not a terminal (or with --lines) it prints a line per slow token with its\n"
      "cause, and a status line every 10 s.\n\n"
      "Examples:\n"
      "  latency-doctor top --pid 4242\n"
      "  latency-doctor top --pid 4242 --duration 5m --lines | tee slow-tokens.log");
  add_record_flags(sub, opts->record, "");
  add_rules_option(sub, opts->rules);
  sub->add_option("--save-dir", opts->save_dir, "Where s saves the trace")->capture_default_str();
  sub->add_flag("--lines", opts->lines, "Line output even on a terminal");
  sub->callback([opts, &exit_code] { exit_code = run_command("top", [&] { return run_top(*opts); }); });
}

}  // namespace ld::cli
