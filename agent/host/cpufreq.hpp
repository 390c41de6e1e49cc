// CPU frequency from sysfs (/sys/devices/system/cpu/cpuN/cpufreq), under a root prefix ("" on
// a live host, a fixture directory in tests). A VM without a cpufreq driver has no such
// directory: then the frequency cannot be observed at all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ld::host {

struct CpuFreqReading {
  uint32_t cpu = 0;
  uint32_t khz = 0;      // scaling_cur_freq
  uint32_t max_khz = 0;  // cpuinfo_max_freq, 0 = unknown
};

// root/sys/devices/system/cpu/cpu0/cpufreq exists.
bool has_cpufreq(const std::string& root);
// Every cpuN that has a readable scaling_cur_freq, ordered by N.
std::vector<CpuFreqReading> read_cpu_freqs(const std::string& root);

}  // namespace ld::host
