#include "host/cpufreq.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>

namespace ld::host {
namespace {

std::string_view kCpuDir = "/sys/devices/system/cpu";

// First line of a sysfs file as a number; 0 when missing or malformed.
uint32_t read_u32(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return 0;
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
  return ec == std::errc() ? v : 0;
}

}  // namespace

bool has_cpufreq(const std::string& root) {
  return access((root + std::string(kCpuDir) + "/cpu0/cpufreq").c_str(), F_OK) == 0;
}

std::vector<CpuFreqReading> read_cpu_freqs(const std::string& root) {
  std::vector<CpuFreqReading> out;
  std::string base = root + std::string(kCpuDir);
  DIR* dir = opendir(base.c_str());
  if (!dir) return out;
  while (dirent* e = readdir(dir)) {
    std::string_view name = e->d_name;
    if (name.size() < 4 || name.substr(0, 3) != "cpu") continue;
    uint32_t cpu = 0;
    auto [p, ec] = std::from_chars(name.data() + 3, name.data() + name.size(), cpu);
    if (ec != std::errc() || p != name.data() + name.size()) continue;  // cpufreq, cpuidle
    std::string freq = base + "/" + std::string(name) + "/cpufreq/";
    uint32_t khz = read_u32(freq + "scaling_cur_freq");
    if (khz == 0) continue;
    out.push_back({cpu, khz, read_u32(freq + "cpuinfo_max_freq")});
  }
  closedir(dir);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.cpu < b.cpu; });
  return out;
}

}  // namespace ld::host
