// A fresh cgroup with a CFS quota for root tests (v1 cpu hierarchy, or v2 cpu.max).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "host/cgroup.hpp"
#include "proc_util.hpp"

namespace ld::test {

inline bool write_file(const std::string& path, const std::string& value) {
  std::ofstream out(path);
  out << value;
  out.flush();
  return static_cast<bool>(out);
}

// A cgroup with a CPU quota, removed (after its processes exited) when this goes away.
class QuotaCgroup {
 public:
  // quota/period in µs (quota 0: none, set_quota() may add one later). error() says why it
  // could not be made.
  QuotaCgroup(uint64_t quota_us, uint64_t period_us) {
    auto mounts = ld::host::parse_cgroup_mounts(ld::test::read_file("/proc/self/mountinfo"));
    std::string name = "/ld-test-" + std::to_string(getpid());
    for (const auto& m : mounts)
      if (!m.v2 && std::find(m.controllers.begin(), m.controllers.end(), "cpu") != m.controllers.end() &&
          m.root == "/") {
        dir_ = m.mount_point + name;
        v2_ = false;
        break;
      }
    if (dir_.empty())
      for (const auto& m : mounts)
        if (m.v2 && m.root == "/") {
          // The parent must hand the cpu controller down.
          write_file(m.mount_point + "/cgroup.subtree_control", "+cpu");
          dir_ = m.mount_point + name;
          v2_ = true;
          break;
        }
    if (dir_.empty()) {
      error_ = "no cgroup filesystem with the cpu controller is mounted";
      return;
    }
    if (mkdir(dir_.c_str(), 0755) != 0) {
      error_ = "mkdir " + dir_ + ": " + strerror(errno);
      dir_.clear();
      return;
    }
    // The top weight: on a loaded host (other tests, builds) the hog must still get its whole
    // quota early in each period, else it is throttled less than 80% of the time, or never.
    bool ok = v2_ ? write_file(dir_ + "/cpu.weight", "10000") : write_file(dir_ + "/cpu.shares", "262144");
    if (!ok || (quota_us && !set_quota(quota_us, period_us))) error_ = "cannot set the quota in " + dir_;
  }
  bool set_quota(uint64_t quota_us, uint64_t period_us) {
    return v2_ ? write_file(dir_ + "/cpu.max", std::to_string(quota_us) + " " + std::to_string(period_us))
               : write_file(dir_ + "/cpu.cfs_period_us", std::to_string(period_us)) &&
                     write_file(dir_ + "/cpu.cfs_quota_us", std::to_string(quota_us));
  }
  ~QuotaCgroup() {
    if (dir_.empty()) return;
    for (int i = 0; i < 50 && rmdir(dir_.c_str()) != 0 && errno == EBUSY; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  bool add(int pid) { return write_file(dir_ + "/cgroup.procs", std::to_string(pid)); }
  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_, error_;
  bool v2_ = false;
};

}  // namespace ld::test
