// Facts about the host and the target processes, read from /proc and /sys.
// Pure reading, no BPF; every function tolerates missing files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/files.hpp"

namespace ld::host {

struct ProcessInfo {
  int pid = 0;
  std::string comm;            // /proc/PID/comm
  std::string exe;             // readlink /proc/PID/exe ("" when not permitted)
  uint64_t start_mono_ns = 0;  // when it started, CLOCK_MONOTONIC (0 = unknown)
};

// nullopt when the process does not exist (or is a zombie).
std::optional<ProcessInfo> read_process(int pid);
// Whether the process exists and is not a zombie, from /proc/PID/stat alone (read_process
// also reads comm, the exe link and the start time: too much for a check made every read interval).
bool process_alive(int pid, const util::FileReader& read);
// Every live descendant process of `pid` (children, grandchildren, ...).
std::vector<int> descendants(int pid);

uint64_t monotonic_now_ns();  // CLOCK_MONOTONIC: the BPF clock (bpf_ktime_get_ns)
uint64_t realtime_now_ns();
// CLOCK_REALTIME - CLOCK_MONOTONIC, sampled with the tightest of several reads.
int64_t sample_realtime_minus_monotonic_ns();

// kernel release, CPU model, CPU count, BTF presence: written into trace headers.
std::string kernel_release();  // uname -r
nlohmann::json host_facts_json();

}  // namespace ld::host
