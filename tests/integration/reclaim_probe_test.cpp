// Root tier: the reclaim probe. Direct reclaim cannot be forced on a big idle machine, but a
// memory cgroup with a small limit can: ld-wl-reclaim_memcg reads a 96 MiB file through the
// page cache inside a 32 MiB cgroup (v1 memory controller, or v2 memory.max), so every charge
// above the limit makes the reading thread reclaim its own cgroup's pages.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "events.h"
#include "probe_test_util.hpp"

using namespace std::chrono_literals;
using ld::test::Child;

namespace {

bool write_file(const std::string& path, const std::string& value) {
  std::ofstream f(path);
  f << value;
  f.flush();
  return static_cast<bool>(f);
}

// A memory cgroup with a 32 MiB limit; removed (once empty) on scope exit.
class SmallMemcg {
 public:
  SmallMemcg() {
    std::string name = "ld-reclaim-test-" + std::to_string(getpid());
    const std::pair<std::string, std::string> layouts[] = {
        {"/sys/fs/cgroup/memory/", "memory.limit_in_bytes"},  // v1
        {"/sys/fs/cgroup/", "memory.max"},                    // v2 (unified at the root)
    };
    for (const auto& [root, limit] : layouts) {
      if (access((root + "cgroup.procs").c_str(), F_OK) != 0) continue;
      if (access((root + (limit == "memory.max" ? "cgroup.controllers" : limit)).c_str(), F_OK)) continue;
      std::string dir = root + name;
      if (mkdir(dir.c_str(), 0755) != 0) continue;
      if (write_file(dir + "/" + limit, std::to_string(32u << 20))) {
        dir_ = dir;
        return;
      }
      rmdir(dir.c_str());
    }
  }
  ~SmallMemcg() {
    if (dir_.empty()) return;
    for (int i = 0; i < 50 && rmdir(dir_.c_str()) != 0; ++i) std::this_thread::sleep_for(20ms);
  }
  bool ok() const { return !dir_.empty(); }
  bool add(int pid) const { return write_file(dir_ + "/cgroup.procs", std::to_string(pid)); }

 private:
  std::string dir_;
};

TEST(ReclaimProbe, MemcgReclaimOfTheReadingThread) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  SmallMemcg memcg;
  Child wl({ld::test::workload_path("reclaim_memcg")});
  bool in_memcg = memcg.ok() && memcg.add(wl.pid());
  auto rec = ld::test::record_workload(wl, "reclaim", 30s);
  auto status = rec.probe("reclaim");
  ASSERT_FALSE(status.is_null()) << rec.agent_err;
  ASSERT_EQ(status["status"], "attached") << status.dump() << rec.agent_err;
  EXPECT_EQ(status["lost"], 0);
  // Without a memory cgroup nothing forces reclaim: attaching is all that can be checked.
  if (!in_memcg) GTEST_SKIP() << "could not create a memory cgroup with a limit: reclaim not forced";

  std::string out = wl.out();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(tid=(\d+) read=(\d+))"))) << out;
  uint32_t tid = std::stoul(m[1]);
  EXPECT_EQ(std::stoull(m[2]), 96ull << 20);

  uint64_t memcg_events = 0, reclaimed = 0, stalled_ns = 0;
  for (const auto& r : rec.of_type<ld_reclaim>(LD_EV_RECLAIM)) {
    EXPECT_EQ(r.hdr.tgid, static_cast<uint32_t>(wl.pid()));
    EXPECT_LE(r.start_ns, r.hdr.ts_ns);
    if (r.kind != LD_RECLAIM_MEMCG || r.hdr.tid != tid) continue;
    memcg_events++;
    reclaimed += r.nr_reclaimed;
    stalled_ns += r.hdr.ts_ns - r.start_ns;
  }
  // 96 MiB through a 32 MiB limit: at least 64 MiB (16384 pages) had to be reclaimed.
  EXPECT_GE(memcg_events, 1u);
  EXPECT_GE(reclaimed, 16384u * 9 / 10) << memcg_events << " memcg reclaims";
  std::printf("reclaim: %llu memcg reclaims, %llu pages, %.2f ms stalled\n", (unsigned long long)memcg_events,
              (unsigned long long)reclaimed, stalled_ns / 1e6);
}

}  // namespace
