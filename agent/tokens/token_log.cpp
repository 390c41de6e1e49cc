#include "tokens/token_log.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <sys/stat.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ld::tokens {
namespace {

using nlohmann::json;

enum class EventKind { kStart, kToken, kEnd };

struct LineEvent {
  std::string request;
  EventKind kind = EventKind::kToken;
  uint64_t mono_ns = 0;
  int64_t input_tokens = -1;
  uint16_t local_port = 0;
};

// Either the event of a good line or why the line is bad.
struct LineOutcome {
  std::optional<LineEvent> event;
  std::string error;
};

struct Stamp {
  uint64_t ns = 0;
  uint64_t line = 0;
};

// Everything the log said about one request, gathered before it is judged.
struct RequestEvents {
  std::string id;
  std::optional<Stamp> start;
  std::optional<Stamp> end;
  int64_t input_tokens = -1;
  uint16_t local_port = 0;
  std::vector<Stamp> tokens;
};

// Warnings with a cap: a log of a million bad lines must not become a million-line report.
class Warnings {
 public:
  explicit Warnings(std::vector<std::string>& out) : out_(out) {}
  void add(std::string text) {
    if (out_.size() < kMaxLineWarnings) {
      out_.push_back(std::move(text));
    } else {
      ++suppressed_;
    }
  }
  void flush(const std::string& name) {
    if (suppressed_ > 0) out_.push_back(fmt::format("{}: {} more warnings not shown", name, suppressed_));
  }

 private:
  std::vector<std::string>& out_;
  uint64_t suppressed_ = 0;
};

// Reads one line (without its '\n') into `line`. A line longer than kMaxLineBytes is consumed
// but not stored, and `too_long` is set. Returns false at the end of input with nothing read.
bool read_line(std::streambuf& sb, std::string& line, bool& too_long) {
  line.clear();
  too_long = false;
  bool any = false;
  for (;;) {
    const int c = sb.sbumpc();
    if (c == std::char_traits<char>::eof()) return any;
    any = true;
    if (c == '\n') return true;
    if (line.size() < kMaxLineBytes) {
      line.push_back(static_cast<char>(c));
    } else {
      too_long = true;
    }
  }
}

bool is_blank(const std::string& line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; });
}

// A JSON number that is a non-negative integer: an integer literal, or a float such as 1.7e18
// (some loggers write every number as a double) with no fractional part that fits in uint64.
std::optional<uint64_t> as_non_negative_integer(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < 0) return std::nullopt;
    return static_cast<uint64_t>(i);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // 2^64 is exactly representable; anything at or above it does not fit.
    if (!std::isfinite(d) || d < 0 || d != std::floor(d) || d >= 18446744073709551616.0) {
      return std::nullopt;
    }
    return static_cast<uint64_t>(d);
  }
  return std::nullopt;
}

std::optional<std::string> request_id_of(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_float()) return v.dump();
  return std::nullopt;
}

std::optional<EventKind> event_kind_of(const json& v) {
  if (!v.is_string()) return std::nullopt;
  const auto& s = v.get_ref<const std::string&>();
  if (s == "start") return EventKind::kStart;
  if (s == "token") return EventKind::kToken;
  if (s == "end") return EventKind::kEnd;
  return std::nullopt;
}

// mono = t - offset for realtime stamps; nullopt when the result is outside uint64.
std::optional<uint64_t> to_monotonic(uint64_t t, bool realtime, int64_t realtime_minus_monotonic_ns) {
  if (!realtime) return t;
  const __int128 mono = static_cast<__int128>(t) - static_cast<__int128>(realtime_minus_monotonic_ns);
  if (mono < 0 || mono > static_cast<__int128>(UINT64_MAX)) return std::nullopt;
  return static_cast<uint64_t>(mono);
}

LineOutcome fail(std::string reason) { return LineOutcome{std::nullopt, std::move(reason)}; }

LineOutcome parse_line(const std::string& text, int64_t realtime_minus_monotonic_ns) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    return fail(fmt::format("not valid JSON (at byte {})", e.byte));
  }
  if (!doc.is_object()) return fail("not a JSON object");

  LineEvent ev;
  auto it = doc.find("request");
  if (it == doc.end()) return fail("missing \"request\"");
  auto id = request_id_of(*it);
  if (!id) return fail("\"request\" must be a string or a number");
  if (id->empty()) return fail("\"request\" is empty");
  ev.request = std::move(*id);

  it = doc.find("event");
  if (it == doc.end()) return fail("missing \"event\"");
  auto kind = event_kind_of(*it);
  if (!kind) return fail("\"event\" must be \"start\", \"token\" or \"end\"");
  ev.kind = *kind;

  bool realtime = true;
  it = doc.find("clock");
  if (it != doc.end()) {
    if (*it == "monotonic") {
      realtime = false;
    } else if (*it != "realtime") {
      return fail("\"clock\" must be \"realtime\" or \"monotonic\"");
    }
  }

  it = doc.find("t_ns");
  if (it == doc.end()) return fail("missing \"t_ns\"");
  auto t = as_non_negative_integer(*it);
  if (!t) return fail("\"t_ns\" must be a non-negative integer");
  auto mono = to_monotonic(*t, realtime, realtime_minus_monotonic_ns);
  if (!mono) return fail("\"t_ns\" is before the monotonic clock's zero (realtime stamp before boot?)");
  ev.mono_ns = *mono;

  it = doc.find("input_tokens");
  if (ev.kind == EventKind::kStart && it != doc.end()) {
    auto n = as_non_negative_integer(*it);
    if (!n || *n > static_cast<uint64_t>(INT64_MAX)) {
      return fail("\"input_tokens\" must be a non-negative integer");
    }
    ev.input_tokens = static_cast<int64_t>(*n);
  }
  it = doc.find("local_port");
  if (ev.kind == EventKind::kStart && it != doc.end()) {
    auto n = as_non_negative_integer(*it);
    if (!n || *n > 65535) return fail("\"local_port\" must be a TCP port (0-65535)");
    ev.local_port = static_cast<uint16_t>(*n);
  }
  return LineOutcome{std::move(ev), {}};
}

// A request id as it appears in a warning: quoted, escaped, cut to a readable length on a
// UTF-8 character boundary (ids come from the log and may be anything).
std::string shown_id(const std::string& id) {
  constexpr size_t kMaxShown = 64;
  std::string shown = id;
  if (shown.size() > kMaxShown) {
    size_t cut = kMaxShown;
    while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80) --cut;
    shown.resize(cut);
    shown += "...";
  }
  return json(shown).dump(-1, ' ', false, json::error_handler_t::replace);
}

class TokenLogParser {
 public:
  TokenLogParser(std::string name, int64_t offset)
      : name_(std::move(name)), offset_(offset), warnings_(result_.warnings) {}

  void consume(std::istream& in) {
    std::streambuf* sb = in.rdbuf();
    if (sb == nullptr) return;
    std::string line;
    bool too_long = false;
    while (read_line(*sb, line, too_long)) {
      ++result_.lines;
      if (result_.lines == 1) strip_utf8_bom(line);
      consume_line(line, too_long);
    }
  }

  TokenLogResult finish() {
    build_requests();
    warnings_.flush(name_);
    return std::move(result_);
  }

  void warn_read_error() {
    warnings_.add(fmt::format("{}: read error after line {}; the rest is ignored", name_, result_.lines));
  }

 private:
  static void strip_utf8_bom(std::string& line) {
    if (line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
  }

  void consume_line(const std::string& line, bool too_long) {
    if (too_long) {
      skip_line(result_.lines, fmt::format("line longer than {} bytes", kMaxLineBytes));
      return;
    }
    if (is_blank(line)) return;
    LineOutcome outcome = parse_line(line, offset_);
    if (!outcome.event) {
      skip_line(result_.lines, outcome.error);
      return;
    }
    record(*outcome.event, result_.lines);
  }

  void skip_line(uint64_t line_no, const std::string& reason) {
    ++result_.bad_lines;
    warnings_.add(fmt::format("{}:{}: {}; line skipped", name_, line_no, reason));
  }

  RequestEvents& events_of(const std::string& id) {
    auto [it, inserted] = index_.try_emplace(id, requests_.size());
    if (inserted) {
      requests_.emplace_back();
      requests_.back().id = id;
    }
    return requests_[it->second];
  }

  void record(const LineEvent& ev, uint64_t line_no) {
    RequestEvents& req = events_of(ev.request);
    const Stamp stamp{ev.mono_ns, line_no};
    switch (ev.kind) {
      case EventKind::kStart:
        if (req.start) {
          skip_line(line_no,
                    fmt::format("second start for request {} (first on line {})", shown_id(req.id), req.start->line));
          return;
        }
        req.start = stamp;
        req.input_tokens = ev.input_tokens;
        req.local_port = ev.local_port;
        return;
      case EventKind::kEnd:
        if (req.end) {
          skip_line(line_no,
                    fmt::format("second end for request {} (first on line {})", shown_id(req.id), req.end->line));
          return;
        }
        req.end = stamp;
        return;
      case EventKind::kToken: req.tokens.push_back(stamp); return;
    }
  }

  void build_requests() {
    model::Timeline& timeline = result_.timeline;
    for (RequestEvents& req : requests_) {
      if (!req.start) {
        warnings_.add(fmt::format("{}: request {} has no start event; skipped", name_, shown_id(req.id)));
        ++result_.skipped_requests;
        continue;
      }
      drop_stamps_before_start(req);
      model::Request out = to_request(req);
      if (!out.token_ns.empty()) {
        timeline.requests.push_back(std::move(out));
      } else if (req.end) {
        ++timeline.non_streaming_requests;
      } else {
        ++timeline.in_flight_requests;
      }
    }
    std::sort(timeline.requests.begin(), timeline.requests.end(), [](const model::Request& a, const model::Request& b) {
      return std::tie(a.start_ns, a.id) < std::tie(b.start_ns, b.id);
    });
  }

  // A token or end before the start is a clock mix-up in the writer; keeping it would give a
  // negative TTFT.
  void drop_stamps_before_start(RequestEvents& req) {
    const Stamp start = *req.start;
    std::vector<Stamp> kept;
    kept.reserve(req.tokens.size());
    for (const Stamp& s : req.tokens) {
      if (s.ns < start.ns) {
        skip_line(s.line,
                  fmt::format("token of request {} is earlier than its start (line {})", shown_id(req.id), start.line));
      } else {
        kept.push_back(s);
      }
    }
    req.tokens = std::move(kept);
    if (req.end && req.end->ns < start.ns) {
      skip_line(req.end->line,
                fmt::format("end of request {} is earlier than its start (line {})", shown_id(req.id), start.line));
      req.end.reset();
    }
  }

  static model::Request to_request(RequestEvents& req) {
    std::stable_sort(req.tokens.begin(), req.tokens.end(), [](const Stamp& a, const Stamp& b) { return a.ns < b.ns; });
    model::Request out;
    out.id = req.id;
    out.start_ns = req.start->ns;
    out.end_ns = req.end ? req.end->ns : 0;
    out.complete = req.end.has_value();
    out.input_tokens = req.input_tokens;
    out.client_port = req.local_port;
    out.token_ns.reserve(req.tokens.size());
    for (const Stamp& s : req.tokens) out.token_ns.push_back(s.ns);
    out.token_tid.assign(out.token_ns.size(), 0);
    return out;
  }

  std::string name_;
  int64_t offset_;
  TokenLogResult result_;
  Warnings warnings_;
  std::vector<RequestEvents> requests_;  // in order of first appearance
  std::map<std::string, size_t> index_;  // id -> position in requests_
};

}  // namespace

TokenLogResult parse_token_log(std::istream& in, const std::string& name, int64_t realtime_minus_monotonic_ns) {
  TokenLogParser parser(name, realtime_minus_monotonic_ns);
  try {
    parser.consume(in);
  } catch (const std::exception&) {
    // A throwing stream (exceptions() set by the caller) or memory exhaustion: keep what was
    // read, say where it stopped.
    parser.warn_read_error();
  }
  if (in.bad()) parser.warn_read_error();
  try {
    return parser.finish();
  } catch (const std::exception& e) {
    TokenLogResult failed;
    failed.warnings.push_back(fmt::format("{}: cannot analyse the token log: {}", name, e.what()));
    return failed;
  }
}

TokenLogResult read_token_log(const std::string& path, int64_t realtime_minus_monotonic_ns) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw std::runtime_error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) throw std::runtime_error(fmt::format("cannot read {}: is a directory", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  return parse_token_log(in, path, realtime_minus_monotonic_ns);
}

}  // namespace ld::tokens
