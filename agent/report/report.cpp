#include "report/report.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace ld::report {

using namespace model;

namespace {

std::string str(const nlohmann::json& ev, const char* key) {
  auto it = ev.find(key);
  if (it == ev.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  if (it->is_number()) return fmt::format("{:.0f}", it->get<double>());
  return "";
}

double num(const nlohmann::json& ev, const char* key) {
  auto it = ev.find(key);
  return it != ev.end() && it->is_number() ? it->get<double>() : 0;
}

std::string bytes_text(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024) return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024 * 1024));
  if (bytes >= 1024.0 * 1024) return fmt::format("{:.0f} MiB", bytes / (1024.0 * 1024));
  return fmt::format("{:.0f} KiB", bytes / 1024.0);
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += ", ";
    out += p;
  }
  return out;
}

}  // namespace

std::string evidence_phrase(const model::CauseTime& c) {
  using model::Cause;
  const nlohmann::json& ev = c.evidence;
  if (!ev.is_object() || ev.empty()) return "";
  auto who = [&](const char* comm, const char* pid) {
    const std::string name = str(ev, comm), id = str(ev, pid);
    if (name.empty() && id.empty()) return std::string();
    return id.empty() ? name : fmt::format("{} (pid {})", name, id);
  };
  switch (c.cause) {
    case Cause::kDiskIo: return join({str(ev, "syscall") + (ev.contains("path") ? " " + str(ev, "path") : "")});
    case Cause::kKvAlloc: {
      std::vector<std::string> parts{str(ev, "syscall"), str(ev, "api")};  // api: a CUDA allocation
      if (num(ev, "bytes") > 0) parts.push_back(bytes_text(num(ev, "bytes")) + " on the GPU");
      if (num(ev, "mmap_bytes") > 0) parts.push_back(bytes_text(num(ev, "mmap_bytes")) + " mapped");
      if (num(ev, "faults") > 0) parts.push_back(fmt::format("{:.0f} page faults", num(ev, "faults")));
      return join(parts);
    }
    case Cause::kCpuContention: {
      const std::string culprit = who("culprit_comm", "culprit_pid");
      return culprit.empty() ? "waiting for a CPU" : "behind " + culprit;
    }
    case Cause::kLockContention: {
      std::string holder = who("holder_comm", "holder_pid");
      if (!holder.empty() && !str(ev, "holder_tid").empty() && str(ev, "holder_tid") != str(ev, "holder_pid"))
        holder.insert(holder.size() - 1, ", thread " + str(ev, "holder_tid"));  // threads share the comm
      return join(
          {holder.empty() ? "" : "lock held by " + holder, ev.contains("uaddr") ? "futex " + str(ev, "uaddr") : ""});
    }
    case Cause::kGil: {
      const std::string holder = str(ev, "holder_comm");
      return join({fmt::format("{:.0f} GIL waits", num(ev, "waits")), holder.empty() ? "" : "woken by " + holder,
                   str(ev, "method").empty() ? "" : "via " + str(ev, "method")});
    }
    case Cause::kCgroupThrottle: return fmt::format("throttled {:.0f} ms by the CPU quota", num(ev, "throttled_ms"));
    case Cause::kTimeWait:
      return fmt::format("{:.0f} ms before the server read the request{}", num(ev, "before_server_ms"),
                         ev.value("new_connection", false) ? " (new connection)" : "");
    case Cause::kAppWait: return str(ev, "syscall");
    case Cause::kSwapReclaim: return str(ev, "kind");
    case Cause::kColdStart: return "first request after start";
    case Cause::kBatchInterference: {
      if (str(ev, "request").empty()) return "";
      const double others = num(ev, "requests") - 1;
      const std::string size = ev.contains("input_tokens") ? fmt::format("{:.0f} input tokens", num(ev, "input_tokens"))
                               : num(ev, "input_bytes") < 10240
                                   ? fmt::format("{:.0f} input bytes", num(ev, "input_bytes"))
                                   : bytes_text(num(ev, "input_bytes")) + " input";
      return fmt::format("prefill of {} ({}) for {:.0f} ms{}", str(ev, "request"), size, num(ev, "overlap_ms"),
                         others > 0 ? fmt::format(", {:.0f} more", others) : "");
    }
    case Cause::kGpuBusy: {
      const double syncs = num(ev, "syncs"), launches = num(ev, "launches");
      return join({syncs > 1 ? fmt::format("{:.0f} CUDA waits", syncs) : "",
                   str(ev, "api").empty() ? "" : "in " + str(ev, "api"),
                   str(ev, "thread").empty() ? "" : "on " + str(ev, "thread"),
                   launches > 0 ? fmt::format("{:.0f} launches", launches) : ""});
    }
    case Cause::kUnknown: return str(ev, "woken_by").empty() ? "" : "woken by " + str(ev, "woken_by");
    default: return str(ev, "syscall");
  }
}

}  // namespace ld::report
