// A stand-in libnvidia-ml.so.1 for the nvml probe's tests: NVML's entry points by their real
// names and C signatures (nvml.h), answering for the GPUs a state file describes, so the probe's
// loading, sampling and the rules on throttling run without a GPU. The file is named by
// LD_FAKE_NVML_STATE in the loading process's environment and read at every call, so a test
// changes the GPU's state while the agent samples it. One device per line:
//   util=95 mem_util=40 sm=1410 sm_max=1980 reasons=0x20 mem_used=70000000000
//   mem_total=80000000000 temp=87 power=690000 power_limit=700000 name=FAKE-H200
// No file, or LD_FAKE_NVML_STATE unset: nvmlInit_v2 fails with NVML_ERROR_DRIVER_NOT_LOADED.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

// nvmlReturn_t values used here.
constexpr int kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3, kDriverNotLoaded = 9;

struct Device {
  unsigned util = 0, mem_util = 0, sm = 0, sm_max = 0, temp = 0, power = 0, power_limit = 0;
  unsigned long long reasons = 0, mem_used = 0, mem_total = 0;
  std::string name = "FAKE-GPU";
};

bool read_state(std::vector<Device>& out) {
  const char* path = std::getenv("LD_FAKE_NVML_STATE");
  if (!path) return false;
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    Device d;
    std::istringstream words(line);
    std::string w;
    while (words >> w) {
      auto eq = w.find('=');
      if (eq == std::string::npos) continue;
      const std::string k = w.substr(0, eq), v = w.substr(eq + 1);
      const unsigned long long n = std::strtoull(v.c_str(), nullptr, 0);
      if (k == "util") d.util = unsigned(n);
      else if (k == "mem_util") d.mem_util = unsigned(n);
      else if (k == "sm") d.sm = unsigned(n);
      else if (k == "sm_max") d.sm_max = unsigned(n);
      else if (k == "reasons") d.reasons = n;
      else if (k == "mem_used") d.mem_used = n;
      else if (k == "mem_total") d.mem_total = n;
      else if (k == "temp") d.temp = unsigned(n);
      else if (k == "power") d.power = unsigned(n);
      else if (k == "power_limit") d.power_limit = unsigned(n);
      else if (k == "name") d.name = v;
    }
    out.push_back(d);
  }
  return true;
}

// A device handle is its index + 1 (never null).
bool device_of(void* handle, Device& d) {
  std::vector<Device> all;
  const auto i = reinterpret_cast<uintptr_t>(handle);
  if (!read_state(all) || i == 0 || i > all.size()) return false;
  d = all[i - 1];
  return true;
}

}  // namespace

extern "C" {

struct nvmlUtilization_t {
  unsigned int gpu, memory;
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};

int nvmlInit_v2() {
  std::vector<Device> all;
  return read_state(all) ? kSuccess : kDriverNotLoaded;
}
int nvmlShutdown() { return kSuccess; }
int nvmlDeviceGetCount_v2(unsigned int* count) {
  std::vector<Device> all;
  if (!count) return kInvalidArgument;
  if (!read_state(all)) return kDriverNotLoaded;
  *count = unsigned(all.size());
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  std::vector<Device> all;
  if (!device || !read_state(all) || index >= all.size()) return kInvalidArgument;
  *device = reinterpret_cast<void*>(uintptr_t(index) + 1);
  return kSuccess;
}
int nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  Device d;
  if (!device_of(device, d) || !name || length == 0) return kInvalidArgument;
  std::snprintf(name, length, "%s", d.name.c_str());
  return kSuccess;
}
int nvmlDeviceGetUtilizationRates(void* device, nvmlUtilization_t* u) {
  Device d;
  if (!device_of(device, d) || !u) return kInvalidArgument;
  u->gpu = d.util;
  u->memory = d.mem_util;
  return kSuccess;
}
// clockType 1 = NVML_CLOCK_SM.
int nvmlDeviceGetClockInfo(void* device, int type, unsigned int* mhz) {
  Device d;
  if (!device_of(device, d) || !mhz) return kInvalidArgument;
  if (type != 1) return kNotSupported;
  *mhz = d.sm;
  return kSuccess;
}
int nvmlDeviceGetMaxClockInfo(void* device, int type, unsigned int* mhz) {
  Device d;
  if (!device_of(device, d) || !mhz) return kInvalidArgument;
  if (type != 1) return kNotSupported;
  *mhz = d.sm_max;
  return kSuccess;
}
int nvmlDeviceGetCurrentClocksEventReasons(void* device, unsigned long long* reasons) {
  Device d;
  if (!device_of(device, d) || !reasons) return kInvalidArgument;
  *reasons = d.reasons;
  return kSuccess;
}
int nvmlDeviceGetMemoryInfo(void* device, nvmlMemory_t* m) {
  Device d;
  if (!device_of(device, d) || !m) return kInvalidArgument;
  m->total = d.mem_total;
  m->used = d.mem_used;
  m->free = d.mem_total > d.mem_used ? d.mem_total - d.mem_used : 0;
  return kSuccess;
}
// sensorType 0 = NVML_TEMPERATURE_GPU.
int nvmlDeviceGetTemperature(void* device, int sensor, unsigned int* c) {
  Device d;
  if (!device_of(device, d) || !c || sensor != 0) return kInvalidArgument;
  *c = d.temp;
  return kSuccess;
}
int nvmlDeviceGetPowerUsage(void* device, unsigned int* mw) {
  Device d;
  if (!device_of(device, d) || !mw) return kInvalidArgument;
  *mw = d.power;
  return kSuccess;
}
int nvmlDeviceGetEnforcedPowerLimit(void* device, unsigned int* mw) {
  Device d;
  if (!device_of(device, d) || !mw) return kInvalidArgument;
  *mw = d.power_limit;
  return kSuccess;
}

}  // extern "C"
