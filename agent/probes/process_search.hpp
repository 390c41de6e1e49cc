// Shared by the probes that attach per process to a library found in /proc/PID/maps (gil, cuda,
// tls): when to look at a process's maps again, and the per-process part of their detail().
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "util/time.hpp"

namespace ld::probes {

// A process is looked at again for a library it may load later (a launcher that execs python,
// a server that dlopen()s CUDA): at the first ticks 1, 3, 7, 15... s after it is first seen
// (twice as long between looks each time), the last at the window's end. Each look reads its /proc/PID/maps (~0.1 ms of
// agent CPU) in the read interval's wake-up, which a server thread waits out anyway.
constexpr uint64_t kFirstLookAgainNs = util::kNsPerSec;
// Through this long after a process is first seen: servers load Python's runtime or CUDA within
// seconds of starting.
constexpr uint64_t kSearchForNs = 10 * kFirstLookAgainNs;

// /proc/PID/maps, read once for every probe that looks at the process within kMapsFreshNs of
// that read (the gil and cuda probes look at the same ticks: one read serves both); "" when
// the process is gone. Thread-safe: probes start in parallel.
constexpr uint64_t kMapsFreshNs = 50 * util::kNsPerMs;
std::string read_process_maps(uint32_t tgid, uint64_t now);
// How many times read_process_maps read the file: for the tests.
uint64_t process_maps_reads();

// The CUDA driver (libcuda.so*) and runtime (libcudart.so*), by file name in any directory
// (pip wheels put them in site-packages/nvidia/...): the ones a maps text names, each once, in
// the order mapped (deleted files left out).
bool is_cuda_driver(const std::string& path);
bool is_cuda_runtime(const std::string& path);
std::vector<std::string> cuda_libraries(const std::string& maps_text);

// OpenSSL's libssl.so* (any directory), and the files a maps text names that may export
// OpenSSL's functions: those, and the executable (the first file mapped: a binary with OpenSSL
// linked in, such as Node), each once, in the order mapped.
bool is_openssl_library(const std::string& path);
std::vector<std::string> openssl_candidates(const std::string& maps_text);

// Whether the process has run past the window in which servers load their libraries (started
// kSearchForNs ago or more), or is gone: a library it has not mapped by now, it will not map.
bool past_search_window(uint32_t tgid, uint64_t now);

// The next look after `looks` looks so far (which it counts), at the latest at `until`.
inline uint64_t next_look_ns(uint64_t now, uint32_t& looks, uint64_t until) {
  return std::min(now + (kFirstLookAgainNs << std::min<uint32_t>(looks++, 4)), until);
}

// The entry of a process newly seen, with its tgid and when it was first seen (`now`), in
// `procs` (a map by tgid of structs with tgid and added_ns); null when it is known already or
// the table holds `max` (a bound on what a fork bomb of targets can cost).
template <typename Procs>
typename Procs::mapped_type* add_process(Procs& procs, uint32_t tgid, uint64_t now, size_t max) {
  if (procs.count(tgid) || procs.size() >= max) return nullptr;
  auto& p = procs[tgid];
  p.tgid = tgid;
  p.added_ns = now;
  return &p;
}

// "HEAD; pid N: ...; pid M: ...; +K more": the first four processes of `procs` (a map by
// tgid) as `describe` puts them.
template <typename Procs, typename Describe>
std::string per_process_detail(std::string head, const Procs& procs, Describe&& describe) {
  size_t shown = 0;
  for (const auto& [tgid, p] : procs) {
    if (shown++ == 4) {
      head += fmt::format("; +{} more", procs.size() - 4);
      break;
    }
    head += fmt::format("; pid {}: {}", tgid, describe(p));
  }
  return head;
}

}  // namespace ld::probes
