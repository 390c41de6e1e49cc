// Names of a token thread's steps, as the report's activity lists them ("fsync /var/log/x",
// "GIL wait", "getrandom", "run queue"): what a person reads, not what the walk charges.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "analysis/walk.hpp"
#include "model/syscalls.hpp"

namespace ld::analysis {

namespace {

bool most_of(uint64_t part, uint64_t whole) {
  return static_cast<double>(part) >= thresholds::kStepNameShare * static_cast<double>(whole);
}
bool more_than_most(uint64_t part, uint64_t whole) {
  return static_cast<double>(part) > thresholds::kStepNameShare * static_cast<double>(whole);
}

// The timed call that covers most of [a, b] (with its file), or "".
std::string covering_call(const EvidenceStore& store, const ThreadEvidence& t, uint64_t a, uint64_t b) {
  const Syscall* call = nullptr;
  uint64_t best = 0;
  const uint64_t look_back = std::min(thresholds::kLookBackNs, t.longest.syscalls);
  auto it = std::partition_point(t.syscalls.begin(), t.syscalls.end(),
                                 [&](const Syscall& s) { return s.start_ns + look_back < a; });
  for (; it != t.syscalls.end() && it->start_ns < b; ++it)
    if (const uint64_t o = util::overlap_ns(a, b, it->start_ns, it->end_ns); o > best) {
      best = o;
      call = &*it;
    }
  if (!call || !most_of(best, b - a)) return "";
  if (is_futex_kind(call->kind) && store.is_gil_address(t.tgid, call->arg0)) return "GIL wait";
  std::string what = syscall_kind_name(call->kind);
  if (!call->path.empty()) what += " " + call->path;
  return what;
}

}  // namespace

std::string running_step(const EvidenceStore& store, const ThreadEvidence* t, uint64_t a, uint64_t b) {
  // On CPU: inside a timed call that covers most of it (an fsync copying pages), else the
  // syscall most of its samples were inside, when most were ("getrandom"), else its own code.
  if (!t) return "running";
  if (std::string call = covering_call(store, *t, a, b); !call.empty()) return call;
  std::map<std::string, uint32_t> in_syscall;
  std::array<uint32_t, kCauseCount> by_cause{};
  uint32_t samples = 0;
  auto it = std::partition_point(t->samples.begin(), t->samples.end(), [&](const CpuSample& s) { return s.ts_ns < a; });
  for (; it != t->samples.end() && it->ts_ns < b; ++it) {
    ++samples;
    ++by_cause[static_cast<size_t>(it->cause)];
    if (const std::string& sc = store.sample_syscall(*it); !sc.empty()) ++in_syscall[sc];
  }
  for (const auto& [name, n] : in_syscall)
    if (more_than_most(n, samples)) return name;
  // Kernel stacks cut before the syscall entry still show what the kernel was doing.
  for (size_t c = 0; c < kCauseCount; ++c)
    if (c != static_cast<size_t>(Cause::kCompute) && more_than_most(by_cause[c], samples))
      return fmt::format("running ({})", model::cause_id(static_cast<Cause>(c)));
  return "running";
}

std::string blocked_step(const EvidenceStore& store, const ThreadEvidence& t, const OffCpu& off, uint64_t a,
                         uint64_t b) {
  // The timed call that covers most of the block, else the syscall it blocked in.
  if (std::string call = covering_call(store, t, a, b); !call.empty()) return call;
  return off.syscall_nr != ~0u ? model::syscall_name(off.syscall_nr) : "blocked";
}

}  // namespace ld::analysis
