#include "serve/flight_recorder.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "events.h"
#include "host/host_facts.hpp"
#include "trace/trace_file.hpp"
#include "trace/trace_header.hpp"
#include "util/files.hpp"
#include "util/time.hpp"

namespace ld::serve {

nlohmann::json segment_trailer(const std::vector<model::ProbeStatus>& probes, uint64_t end_ns) {
  trace::TraceTrailer trailer;
  trailer.present = true;
  trailer.end_mono_ns = end_ns;
  trailer.stop_reason = trace::StopReason::kSegment;
  trailer.probes = probes;
  return trace::to_json(trailer);
}
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kPrefix = "flight-";
constexpr const char* kSuffix = ".ldtrace";

bool is_segment_name(const std::string& name) {
  return name.rfind(kPrefix, 0) == 0 && name.size() > std::strlen(kPrefix) + std::strlen(kSuffix) &&
         name.compare(name.size() - std::strlen(kSuffix), std::strlen(kSuffix), kSuffix) == 0;
}

// The header object of a trace file without reading its records: "LDTRACE\0", u32 version,
// u32 length, JSON. null when it is not a readable trace.
json read_header(int fd) {
  unsigned char head[16];
  if (pread(fd, head, sizeof(head), 0) != static_cast<ssize_t>(sizeof(head))) return nullptr;
  if (std::memcmp(head, "LDTRACE\0", 8) != 0) return nullptr;
  uint32_t len = 0;
  std::memcpy(&len, head + 12, 4);
  if (len == 0 || len > (16u << 20)) return nullptr;
  std::string text(len, '\0');
  if (pread(fd, text.data(), len, 16) != static_cast<ssize_t>(len)) return nullptr;
  return json::parse(text, nullptr, false);
}

struct OpenSegment {
  std::string path;
  int fd = -1;
  uint64_t size = 0;
};

}  // namespace

std::string current_boot_id() {
  std::string id = util::read_file("/proc/sys/kernel/random/boot_id");
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

FlightRecorder::FlightRecorder(FlightOptions options) : options_(std::move(options)), boot_id_(current_boot_id()) {
  if (options_.dir.empty()) throw std::runtime_error("--flight-dir: empty path");
  std::error_code ec;
  if (!fs::exists(options_.dir, ec)) {
    fs::create_directories(options_.dir, ec);
    if (ec) throw std::runtime_error(fmt::format("--flight-dir {}: cannot create it: {}", options_.dir, ec.message()));
    chmod(options_.dir.c_str(), 0700);
  } else if (!fs::is_directory(options_.dir, ec)) {
    throw std::runtime_error(fmt::format("--flight-dir {}: not a directory", options_.dir));
  }
  if (access(options_.dir.c_str(), W_OK) != 0)
    throw std::runtime_error(fmt::format("--flight-dir {}: not writable: {}", options_.dir, std::strerror(errno)));
  for (const auto& entry : fs::directory_iterator(options_.dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".dump-", 0) == 0) fs::remove(entry.path(), ec);  // a dump cut short by a kill
  }
}

FlightRecorder::~FlightRecorder() = default;

void FlightRecorder::start(const json& header, uint64_t now_mono_ns) {
  std::lock_guard lock(mu_);
  header_ = header;
  open_segment(now_mono_ns);
  prune_locked();
}

void FlightRecorder::set_header(const json& header) {
  std::lock_guard lock(mu_);
  header_ = header;
}

void FlightRecorder::open_segment(uint64_t now_mono_ns) {
  // Named by the realtime of its start: sorted by name = sorted by time, and a person can tell.
  uint64_t unix_ns = host::realtime_now_ns();
  current_ = fmt::format("{}/{}{:020d}-{:04d}{}", options_.dir, kPrefix, unix_ns, sequence_++ % 10000, kSuffix);
  json header = header_.is_object() ? header_ : json::object();
  header["flight"] = {{"boot_id", boot_id_}, {"segment_start_mono_ns", now_mono_ns}};
  header["clock"]["start_mono_ns"] = now_mono_ns;
  writer_ = std::make_unique<trace::TraceWriter>(current_, header);
  segment_started_ns_ = now_mono_ns;
}

void FlightRecorder::append(const ld_hdr& rec, size_t size) {
  std::lock_guard lock(mu_);
  if (!writer_ || !error_.empty()) return;
  try {
    writer_->append(&rec, size);
  } catch (const std::exception& e) {
    error_ = e.what();
  }
}

void FlightRecorder::flush() {
  std::lock_guard lock(mu_);
  if (!writer_ || !error_.empty()) return;
  try {
    writer_->flush();
  } catch (const std::exception& e) {
    error_ = e.what();
  }
}

std::string FlightRecorder::tick(uint64_t now_mono_ns, const json& trailer) {
  std::lock_guard lock(mu_);
  if (!writer_) return "";
  if (!error_.empty()) {
    // The disk filled or the directory went away: try a fresh segment once a tick.
    std::string problem = error_;
    try {
      writer_.reset();
      error_.clear();
      open_segment(now_mono_ns);
      prune_locked();
    } catch (const std::exception& e) {
      error_ = e.what();
    }
    return "flight recorder: " + problem;
  }
  try {
    const bool old = now_mono_ns - segment_started_ns_ >= options_.segment_ms * util::kNsPerMs;
    const bool big = writer_->bytes_written() >= std::max<uint64_t>(options_.max_bytes / 8, 1 << 20);
    if (old || big) {
      json closing = trailer;
      closing["end_mono_ns"] = now_mono_ns;
      writer_->finish(closing);
      writer_.reset();
      open_segment(now_mono_ns);
    } else {
      writer_->flush();
    }
  } catch (const std::exception& e) {
    error_ = e.what();
  }
  prune_locked();
  return "";
}

void FlightRecorder::finish(const json& trailer) {
  std::lock_guard lock(mu_);
  if (!writer_) return;
  try {
    if (error_.empty()) writer_->finish(trailer);
  } catch (const std::exception&) {
  }
  writer_.reset();
}

std::vector<std::string> FlightRecorder::segments() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.dir, ec))
    if (entry.is_regular_file(ec) && is_segment_name(entry.path().filename().string()))
      out.push_back(entry.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string FlightRecorder::current_segment() const {
  std::lock_guard lock(mu_);
  return current_;
}

uint64_t FlightRecorder::disk_bytes() const {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& path : segments()) {
    auto size = fs::file_size(path, ec);
    if (!ec) total += size;
  }
  return total;
}

void FlightRecorder::prune_locked() {
  std::error_code ec;
  auto list = segments();
  std::vector<std::pair<std::string, uint64_t>> sized;
  uint64_t total = 0;
  for (const auto& path : list) {
    uint64_t size = fs::file_size(path, ec);
    if (ec) size = 0;
    sized.emplace_back(path, size);
    total += size;
  }
  const auto now = fs::file_time_type::clock::now();
  const auto keep = std::chrono::milliseconds(options_.keep_ms);
  for (const auto& [path, size] : sized) {
    if (path == current_) continue;
    auto written = fs::last_write_time(path, ec);
    const bool too_old = !ec && now - written > keep;
    if (total <= options_.max_bytes && !too_old) break;  // oldest first: the rest are newer
    if (fs::remove(path, ec)) total -= size;
  }
}

DumpStats FlightRecorder::dump(const std::string& out_path, uint64_t since, uint64_t until, const json& trailer) {
  DumpStats stats;
  std::vector<OpenSegment> open;
  {
    // Everything recorded so far reaches the disk first; the files are opened under the lock
    // so that a segment pruned meanwhile is still read whole.
    std::lock_guard lock(mu_);
    if (writer_ && error_.empty()) {
      try {
        writer_->flush();
      } catch (const std::exception& e) {
        error_ = e.what();
      }
    }
    for (const auto& path : segments()) {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      struct stat st {};
      fstat(fd, &st);
      open.push_back({path, fd, static_cast<uint64_t>(st.st_size)});
    }
  }
  struct Closer {
    std::vector<OpenSegment>& list;
    ~Closer() {
      for (auto& s : list)
        if (s.fd >= 0) close(s.fd);
    }
  } closer{open};

  // Pass 1: headers. Segments of another boot (their monotonic times mean nothing now) and
  // ones that ended before `since` are skipped; the latest header is the dump's.
  std::vector<size_t> wanted;
  std::set<int> pids;
  json latest;
  for (size_t i = 0; i < open.size(); ++i) {
    json h = read_header(open[i].fd);
    if (!h.is_object()) {
      stats.warnings.push_back(fmt::format("{}: not a readable trace; skipped", open[i].path));
      continue;
    }
    const json& flight = h.contains("flight") ? h["flight"] : json();
    if (!flight.is_object() || flight.value("boot_id", "") != boot_id_) continue;
    const uint64_t seg_start = flight.value("segment_start_mono_ns", uint64_t{0});
    if (seg_start > until) continue;
    // The next segment's start bounds this one's end.
    if (i + 1 < open.size()) {
      json next = read_header(open[i + 1].fd);
      if (next.is_object() && next.contains("flight") && next["flight"].is_object() &&
          next["flight"].value("boot_id", "") == boot_id_ &&
          next["flight"].value("segment_start_mono_ns", uint64_t{0}) < since)
        continue;
    }
    wanted.push_back(i);
    auto meta = trace::read_meta(h, nullptr);
    for (int pid : meta.header.target.pids) pids.insert(pid);
    latest = h;
  }
  trace::TraceHeader header;
  if (latest.is_object()) header = trace::read_meta(latest, nullptr).header;
  else if (header_.is_object()) header = trace::read_meta(header_, nullptr).header;
  header.target.pids.assign(pids.begin(), pids.end());
  header.start_mono_ns = std::max<uint64_t>(since, header.start_mono_ns.value_or(0));
  header.duration_requested_ms = 0;
  json out_header = trace::to_json(header);
  out_header["dump"] = {{"since_mono_ns", since}, {"until_mono_ns", until}, {"from", options_.dir}};

  trace::TraceWriter writer(out_path, out_header);
  for (size_t i : wanted) {
    std::string bytes(open[i].size, '\0');
    size_t got = 0;
    while (got < bytes.size()) {
      ssize_t n = pread(open[i].fd, bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    bytes.resize(got);
    uint64_t before = stats.records;
    auto summary = trace::read_trace_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), open[i].path,
                                           [&](const ld_hdr& rec) {
                                             if (rec.ts_ns != 0 && (rec.ts_ns < since || rec.ts_ns > until)) return;
                                             writer.append(&rec, rec.size);
                                             stats.records++;
                                           });
    // The segment being written ends mid-chunk: that is its normal state, not worth a word.
    if (i + 1 < open.size())
      for (auto& w : summary.warnings) stats.warnings.push_back(std::move(w));
    if (stats.records > before) stats.segments++;
  }
  json closing = trailer.is_object() ? trailer : json::object();
  closing["end_mono_ns"] = until;
  closing["stop_reason"] = std::string(trace::stop_reason_name(trace::StopReason::kDump));
  writer.finish(closing);
  return stats;
}

}  // namespace ld::serve
