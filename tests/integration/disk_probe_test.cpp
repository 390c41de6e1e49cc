// Root tier: the disk probe against ld-wl-disk_fsync (8 MiB written then fsync'd, 5 times).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "events.h"
#include "probe_test_util.hpp"

using namespace std::chrono_literals;
using ld::test::Child;

namespace {

struct SyscallWithPath {
  ld_syscall fixed;
  std::string path;
};

std::vector<SyscallWithPath> syscalls_with_paths(const ld::test::Recorded& rec) {
  std::vector<SyscallWithPath> out;
  for (const auto& r : rec.records) {
    const auto* h = reinterpret_cast<const ld_hdr*>(r.data());
    if (h->type != LD_EV_SYSCALL || h->size < sizeof(ld_syscall)) continue;
    SyscallWithPath s;
    std::memcpy(&s.fixed, r.data(), sizeof(ld_syscall));
    size_t tail = h->size - sizeof(ld_syscall);
    EXPECT_LE(s.fixed.path_len, tail) << "path_len beyond the record";
    EXPECT_EQ(tail % 8, 0u);
    const char* p = reinterpret_cast<const char*>(r.data()) + sizeof(ld_syscall);
    s.path.assign(p, std::min<size_t>(s.fixed.path_len, tail));
    out.push_back(std::move(s));
  }
  return out;
}

TEST(DiskProbe, FsyncTimesAndPathOnTheRightThread) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  Child wl({ld::test::workload_path("disk_fsync")});
  auto rec = ld::test::record_workload(wl, "disk", 30s);
  auto status = rec.probe("disk");
  ASSERT_FALSE(status.is_null()) << rec.agent_err;
  ASSERT_EQ(status["status"], "attached") << status.dump() << rec.agent_err;
  EXPECT_EQ(status["lost"], 0);

  std::string out = wl.out();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(tid=(\d+) fd=(\d+) path=(\S+))"))) << out;
  uint32_t tid = std::stoul(m[1]);
  uint64_t fd = std::stoull(m[2]);
  std::string path = m[3];
  std::vector<uint64_t> own_ns;
  const std::regex re(R"(dur_ns=(\d+))");
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it)
    own_ns.push_back(std::stoull((*it)[1]));
  ASSERT_EQ(own_ns.size(), 5u) << out;

  std::vector<SyscallWithPath> fsyncs;
  for (auto& s : syscalls_with_paths(rec))
    if (s.fixed.kind == LD_SYS_FSYNC && s.fixed.hdr.tid == tid) fsyncs.push_back(s);
  ASSERT_EQ(fsyncs.size(), 5u);
  for (size_t i = 0; i < fsyncs.size(); ++i) {
    const auto& f = fsyncs[i];
    EXPECT_EQ(f.fixed.hdr.tgid, static_cast<uint32_t>(wl.pid()));
    EXPECT_EQ(f.fixed.arg0, fd);
    EXPECT_EQ(f.fixed.ret, 0);
    EXPECT_EQ(f.path, path) << "fsync " << i;  // the whole path: 4 names reach the root
    double ours = f.fixed.dur_ns, theirs = own_ns[i];
    std::printf("disk: fsync %zu probe %.3f ms workload %.3f ms %s\n", i, ours / 1e6, theirs / 1e6, f.path.c_str());
    EXPECT_LE(std::abs(ours - theirs), std::max(0.2 * theirs, 2e6))
        << "fsync " << i << ": probe " << ours / 1e6 << " ms, workload " << theirs / 1e6 << " ms";
  }

  // A path deeper than LD_PATH_DEPTH names keeps the last ones; mount points are crossed.
  bool deep = false, range = false, shm = false;
  std::string shm_path = std::regex_search(out, m, std::regex(R"(shm=(\S+))")) ? m[1].str() : "";
  for (auto& s : syscalls_with_paths(rec)) {
    if (s.fixed.hdr.tid != tid) continue;
    if (s.fixed.kind == LD_SYS_FDATASYNC && s.path.find("deep.log") != std::string::npos) {
      deep = true;
      EXPECT_EQ(s.path, ".../b/c/d/e/deep.log");
    }
    if (s.fixed.kind == LD_SYS_SYNC_FILE_RANGE) {
      range = true;
      EXPECT_EQ(s.path, ".../b/c/d/e/deep.log");
      EXPECT_EQ(s.fixed.arg1, 4096u);
    }
    if (s.fixed.kind == LD_SYS_FDATASYNC && s.path.find(".shm") != std::string::npos) {
      shm = true;
      EXPECT_EQ(s.path, shm_path);
    }
  }
  EXPECT_TRUE(deep) << "no fdatasync of deep.log";
  EXPECT_TRUE(range) << "no sync_file_range";
  if (!shm_path.empty()) {
    EXPECT_TRUE(shm) << "no fdatasync of " << shm_path;
  }

  // The 8 MiB written back by each fsync are block requests of that process (queued in its
  // thread, whoever issued them), all completed after the first fsync began.
  uint64_t bytes = 0;
  for (const auto& b : rec.of_type<ld_block_rq>(LD_EV_BLOCK_RQ)) {
    if (b.hdr.tgid != static_cast<uint32_t>(wl.pid())) continue;
    EXPECT_GE(b.hdr.ts_ns, b.issue_ns);
    if (b.rwbs & LD_RWBS_WRITE) bytes += b.bytes;
  }
  std::printf("disk: %llu bytes of write requests attributed\n", (unsigned long long)bytes);
  EXPECT_GE(bytes, 5u * (8u << 20) / 2) << "write requests attributed to the workload";
}

}  // namespace
