#include "events.h"
#include "probes/probe.hpp"

namespace ld::probes {

// Defined in NAME_probe.cpp, one file per probe.
std::unique_ptr<Probe> make_sock_probe();
std::unique_ptr<Probe> make_sched_probe();
std::unique_ptr<Probe> make_perf_probe();
std::unique_ptr<Probe> make_memory_probe();
std::unique_ptr<Probe> make_disk_probe();
std::unique_ptr<Probe> make_gil_probe();
std::unique_ptr<Probe> make_futex_probe();
std::unique_ptr<Probe> make_tcp_probe();
std::unique_ptr<Probe> make_cgroup_probe();
std::unique_ptr<Probe> make_reclaim_probe();
std::unique_ptr<Probe> make_cpufreq_probe();
std::unique_ptr<Probe> make_cuda_probe();
std::unique_ptr<Probe> make_nvml_probe();
std::unique_ptr<Probe> make_tls_probe();

const std::vector<ProbeInfo>& probe_registry() {
  static const std::vector<ProbeInfo> registry{
      {"sock", LD_PROBE_SOCK, "socket sends/receives: the token timeline", true, make_sock_probe},
      {"sched", LD_PROBE_SCHED, "scheduler: off-CPU, run-queue waits, wakers, migrations", true, make_sched_probe},
      {"perf", LD_PROBE_PERF,
       "on-CPU samples (99 Hz per busy CPU by default, at the scheduler tick) with kernel stacks", true,
       make_perf_probe},
      {"memory", LD_PROBE_MEMORY, "mmap/munmap/brk/mremap/madvise times, user page faults", true, make_memory_probe},
      {"disk", LD_PROBE_DISK, "fsync family times with the file, block request latency", true, make_disk_probe},
      {"gil", LD_PROBE_GIL, "Python GIL waits (futex on the GIL's address)", true, make_gil_probe},
      {"futex", LD_PROBE_FUTEX, "futex wait times with the address (lock contention)", true, make_futex_probe},
      {"tcp", LD_PROBE_TCP, "TIME_WAIT churn, retransmits, listen overflows", true, make_tcp_probe},
      {"cgroup", LD_PROBE_CGROUP, "CFS throttling and memory limits of the target's cgroup", true, make_cgroup_probe},
      {"reclaim", LD_PROBE_RECLAIM, "direct reclaim and compaction stalls", true, make_reclaim_probe},
      {"cpufreq", LD_PROBE_CPUFREQ, "CPU frequency (power:cpu_frequency or sysfs)", true, make_cpufreq_probe},
      // In the default set: on a target without CUDA it attaches nothing and costs nothing.
      {"cuda", LD_PROBE_CUDA,
       "CUDA launches (summed per burst), GPU syncs, copies, allocations (uprobes on libcuda/libcudart)", true,
       make_cuda_probe},
      // In the default set: unavailable without the NVIDIA driver; samples only for CUDA targets.
      {"nvml", LD_PROBE_NVML,
       "each GPU's utilisation, SM clock, throttle reasons, memory, temperature, power (NVML, 200 ms)", true,
       make_nvml_probe},
      // In the default set: on a target without OpenSSL it attaches nothing and costs nothing.
      {"tls", LD_PROBE_TLS,
       "TLS plaintext classes (uprobes on OpenSSL's SSL_write/SSL_read): tokens of a server that terminates TLS", true,
       make_tls_probe},
  };
  return registry;
}

}  // namespace ld::probes
