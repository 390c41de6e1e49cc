// cgroup parsing on fixture trees (tests/data/cgroup-v1, cgroup-v2): membership, mounts,
// cpu.stat / quota / memory files of both versions.
#include <gtest/gtest.h>

#include "host/cgroup.hpp"

using namespace ld::host;

namespace {
const std::string kV1 = std::string(LD_TEST_DATA_DIR) + "/cgroup-v1";
const std::string kV2 = std::string(LD_TEST_DATA_DIR) + "/cgroup-v2";
}  // namespace

TEST(CgroupParse, ProcCgroupLines) {
  auto m = parse_proc_cgroup("12:memory:/a/b\n5:cpu,cpuacct:/a\n1:name=systemd:/\n0::/x y\ngarbage\n");
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].hierarchy, 12);
  EXPECT_EQ(m[0].controllers, std::vector<std::string>{"memory"});
  EXPECT_EQ(m[0].path, "/a/b");
  EXPECT_EQ(m[1].controllers, (std::vector<std::string>{"cpu", "cpuacct"}));
  EXPECT_EQ(m[3].hierarchy, 0);
  EXPECT_TRUE(m[3].controllers.empty());
  EXPECT_EQ(m[3].path, "/x y");
}

TEST(CgroupParse, MountinfoCgroupMountsOnly) {
  auto mounts = parse_cgroup_mounts(
      "23 1 0:21 / /sys rw - sysfs sysfs rw\n"
      "35 31 0:32 /docker/abc /sys/fs/cgroup/cpu\\040x rw,relatime shared:14 - cgroup cgroup rw,cpu,cpuacct\n"
      "32 31 0:29 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n");
  ASSERT_EQ(mounts.size(), 2u);
  EXPECT_EQ(mounts[0].root, "/docker/abc");
  EXPECT_EQ(mounts[0].mount_point, "/sys/fs/cgroup/cpu x");
  EXPECT_FALSE(mounts[0].v2);
  EXPECT_EQ(mounts[0].controllers, (std::vector<std::string>{"cpu", "cpuacct"}));
  EXPECT_TRUE(mounts[1].v2);
}

TEST(CgroupParse, V1DirsAndFiles) {
  auto dirs = find_cgroup_dirs(kV1, 4242);
  ASSERT_TRUE(dirs);
  EXPECT_EQ(dirs->cpu, kV1 + "/sys/fs/cgroup/cpu,cpuacct/app/svc");
  EXPECT_FALSE(dirs->cpu_v2);
  EXPECT_EQ(dirs->memory, kV1 + "/sys/fs/cgroup/memory/app/svc");
  EXPECT_FALSE(dirs->memory_v2);

  auto cpu = read_cgroup_cpu(dirs->cpu, dirs->cpu_v2);
  EXPECT_EQ(cpu.nr_periods, 120u);
  EXPECT_EQ(cpu.nr_throttled, 97u);
  EXPECT_EQ(cpu.throttled_ns, 7654321000u);  // throttled_time is already ns in v1
  EXPECT_EQ(cpu.quota_us, 20000u);
  EXPECT_EQ(cpu.period_us, 100000u);

  auto mem = read_cgroup_memory(dirs->memory, dirs->memory_v2);
  EXPECT_EQ(mem.usage, 52428800u);
  EXPECT_EQ(mem.limit, 104857600u);
  EXPECT_EQ(mem.events_high, 3u);
  EXPECT_EQ(mem.events_oom, 1u);
}

TEST(CgroupParse, V1RootCgroupIsUnlimited) {
  auto dirs = find_cgroup_dirs(kV1, 4343);
  ASSERT_TRUE(dirs);
  EXPECT_EQ(dirs->cpu, kV1 + "/sys/fs/cgroup/cpu,cpuacct");
  auto cpu = read_cgroup_cpu(dirs->cpu, false);
  EXPECT_EQ(cpu.quota_us, kCgroupUnknown);  // cfs_quota_us -1
  EXPECT_EQ(cpu.period_us, 100000u);
  EXPECT_EQ(cpu.nr_throttled, 0u);
  auto mem = read_cgroup_memory(dirs->memory, false);
  EXPECT_EQ(mem.limit, kCgroupUnknown);  // PAGE_COUNTER_MAX bytes = no limit
}

TEST(CgroupParse, V2DirsAndFiles) {
  auto dirs = find_cgroup_dirs(kV2, 77);
  ASSERT_TRUE(dirs);
  EXPECT_EQ(dirs->cpu, kV2 + "/sys/fs/cgroup/kubepods/pod1/c1");
  EXPECT_TRUE(dirs->cpu_v2);
  EXPECT_EQ(dirs->memory, dirs->cpu);
  auto cpu = read_cgroup_cpu(dirs->cpu, true);
  EXPECT_EQ(cpu.nr_periods, 50u);
  EXPECT_EQ(cpu.nr_throttled, 40u);
  EXPECT_EQ(cpu.throttled_ns, 3200000000u);  // throttled_usec * 1000
  EXPECT_EQ(cpu.quota_us, 20000u);
  EXPECT_EQ(cpu.period_us, 100000u);
  auto mem = read_cgroup_memory(dirs->memory, true);
  EXPECT_EQ(mem.usage, 209715200u);
  EXPECT_EQ(mem.limit, 268435456u);
  EXPECT_EQ(mem.events_high, 12u);
  EXPECT_EQ(mem.events_oom, 1u);
}

TEST(CgroupParse, V2WithoutCpuControllerHasNoCpuDir) {
  auto dirs = find_cgroup_dirs(kV2, 78);
  ASSERT_TRUE(dirs);
  EXPECT_EQ(dirs->cpu, "");
  EXPECT_EQ(dirs->memory, kV2 + "/sys/fs/cgroup/nocpu");
  auto mem = read_cgroup_memory(dirs->memory, true);
  EXPECT_EQ(mem.usage, 4096u);
  EXPECT_EQ(mem.limit, kCgroupUnknown);  // "max"
}

TEST(CgroupParse, MissingProcessIsNullopt) { EXPECT_FALSE(find_cgroup_dirs(kV1, 999999)); }

TEST(CgroupParse, CpuMaxUnlimited) {
  CgroupCpu cpu;
  parse_cpu_max("max 100000\n", cpu);
  EXPECT_EQ(cpu.quota_us, kCgroupUnknown);
  EXPECT_EQ(cpu.period_us, 100000u);
}
