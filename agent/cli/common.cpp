#include "cli/common.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ld::cli {

std::optional<uint64_t> parse_duration_ms(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) digits++;
  if (digits == 0 || digits > 12) return std::nullopt;
  uint64_t value = std::stoull(text.substr(0, digits));
  std::string unit = text.substr(digits);
  uint64_t scale = 0;
  if (unit == "ms") scale = 1;
  else if (unit == "s" || unit.empty()) scale = 1000;  // a bare number is seconds
  else if (unit == "m") scale = 60 * 1000;
  else if (unit == "h") scale = 3600 * 1000;
  if (scale == 0 || value == 0) return std::nullopt;
  return value * scale;
}

std::optional<uint64_t> parse_size(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) digits++;
  if (digits == 0 || digits > 12) return std::nullopt;
  uint64_t value = std::stoull(text.substr(0, digits));
  std::string unit = text.substr(digits);
  if (unit.empty()) return value;
  if (unit == "K" || unit == "k" || unit == "KiB") return value << 10;
  if (unit == "M" || unit == "m" || unit == "MiB") return value << 20;
  if (unit == "G" || unit == "g" || unit == "GiB") return value << 30;
  return std::nullopt;
}

std::optional<std::string> parse_token_source(const std::string& text) {
  if (text == "sse") return text;
  if (text.rfind("jsonl:", 0) == 0 && text.size() > 6) return text;
  return std::nullopt;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

std::unique_ptr<Output> Output::open(const std::string& path) {
  if (path.empty() || path == "-") return std::unique_ptr<Output>(new Output(STDOUT_FILENO, "stdout"));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  fchmod(fd, 0600);  // reports name the target's threads and files: keep them private
  return std::unique_ptr<Output>(new Output(fd, path));
}

void Output::write(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(fmt::format("cannot write {}: {}", path_, std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
}

Output::~Output() {
  if (fd_ != STDOUT_FILENO && fd_ >= 0) ::close(fd_);
}

std::string render(const report::Report& report, const std::string& format) {
  if (format == "json") return report::render_json(report);
  if (format == "text") return report::render_text(report);
  throw std::invalid_argument(fmt::format("--format {}: this build renders text or json", format));
}

void print_error(const std::string& command, const std::string& what) {
  fmt::print(stderr, "latency-doctor {}: error: {}\n", command, what);
}

void print_warnings(const std::vector<std::string>& warnings) {
  for (const auto& w : warnings) fmt::print(stderr, "warning: {}\n", w);
}

}  // namespace ld::cli

#include <CLI/CLI.hpp>

#include "probes/probe_session.hpp"
#include "probes/recorder.hpp"

namespace ld::cli {

void add_record_flags(CLI::App* sub, RecordFlags& flags, const std::string& default_duration) {
  flags.duration = default_duration;
  sub->add_option("-p,--pid", flags.pids, "Process to trace (repeat for several)")->required();
  sub->add_flag("--children", flags.children,
                "Also trace the target's child processes, and those it forks while tracing "
                "(multi-process servers: API process + engine)");
  sub->add_option("-d,--duration", flags.duration,
                  "How long to trace: 500ms, 30s, 5m (Ctrl-C or the target's exit stops earlier)")
      ->capture_default_str();
  sub->add_option("--probes", flags.probes, "Probes to attach: all, or a comma list of: sock")
      ->capture_default_str();
  sub->add_option("--ringbuf-size", flags.ringbuf,
                  "Kernel ring buffer size (power of two: 4M, 16M, 64M); raise it when the "
                  "report shows lost events")
      ->capture_default_str();
  sub->add_flag("-q,--quiet", flags.quiet, "No progress line on stderr");
  sub->add_flag("-v,--verbose", flags.verbose, "Show libbpf's log (why a probe failed to load)");
}

probes::RecordOptions to_record_options(const RecordFlags& flags) {
  probes::RecordOptions options;
  options.pids = flags.pids;
  options.children = flags.children;
  auto duration = parse_duration_ms(flags.duration);
  if (!duration)
    throw std::invalid_argument(fmt::format(
        "--duration {}: expected a positive number with a unit, e.g. 500ms, 30s, 5m", flags.duration));
  options.duration_ms = *duration;
  auto ringbuf = parse_size(flags.ringbuf);
  if (!ringbuf || *ringbuf < 4096 || *ringbuf > (1ULL << 30) || (*ringbuf & (*ringbuf - 1)))
    throw std::invalid_argument(fmt::format(
        "--ringbuf-size {}: expected a power of two between 4K and 1G, e.g. 16M", flags.ringbuf));
  options.ringbuf_bytes = static_cast<uint32_t>(*ringbuf);
  auto known = probes::ProbeSession::known_probes();
  for (const auto& name : split_list(flags.probes)) {
    if (name != "all" && std::find(known.begin(), known.end(), name) == known.end())
      throw std::invalid_argument(fmt::format("--probes: unknown probe '{}' (known: all, {})", name,
                                              fmt::join(known, ", ")));
    if (name != "all") options.probes.push_back(name);
  }
  options.quiet = flags.quiet;
  options.verbose = flags.verbose;
  return options;
}

}  // namespace ld::cli
