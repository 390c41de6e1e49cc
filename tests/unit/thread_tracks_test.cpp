#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/event_analyzer.hpp"
#include "analysis/thread_tracks.hpp"
#include "events.h"
#include "model/syscalls.hpp"

namespace {

using ld::analysis::ThreadTrackBuilder;
using ld::model::ThreadSlice;
using ld::model::ThreadState;
using ld::model::ThreadTracks;

constexpr uint64_t kMs = 1'000'000;
constexpr uint32_t kTgid = 100;

ld_hdr header(uint16_t type, uint16_t size, uint32_t tid, uint64_t ts) {
  ld_hdr h{};
  h.type = type;
  h.size = size;
  h.tgid = kTgid;
  h.tid = tid;
  h.ts_ns = ts;
  return h;
}

ld_offcpu blocked(uint32_t tid, uint64_t off_ms, uint64_t wake_ms, uint64_t on_ms, uint32_t syscall_nr, uint32_t waker,
                  const char* waker_comm) {
  ld_offcpu ev{};
  ev.hdr = header(LD_EV_OFFCPU, sizeof ev, tid, on_ms * kMs);
  ev.off_ns = off_ms * kMs;
  ev.wake_ns = wake_ms * kMs;
  ev.on_ns = on_ms * kMs;
  ev.kind = LD_OFF_BLOCKED;
  ev.syscall_nr = syscall_nr;
  ev.waker_tid = waker;
  ev.waker_tgid = kTgid;
  std::strncpy(ev.waker_comm, waker_comm, LD_COMM_LEN);
  ev.holder_tid = 0;
  return ev;
}

ld_offcpu preempted(uint32_t tid, uint64_t off_ms, uint64_t on_ms, uint32_t by, const char* by_comm) {
  ld_offcpu ev{};
  ev.hdr = header(LD_EV_OFFCPU, sizeof ev, tid, on_ms * kMs);
  ev.off_ns = off_ms * kMs;
  ev.on_ns = on_ms * kMs;
  ev.kind = LD_OFF_PREEMPTED;
  ev.syscall_nr = ~0u;
  ev.waker_tid = by;
  std::strncpy(ev.waker_comm, by_comm, LD_COMM_LEN);
  return ev;
}

// A disk syscall record with its path after the fixed part, as the disk probe writes it.
struct SyscallWithPath {
  ld_syscall ev;
  char path[64];
};

SyscallWithPath fsync_record(uint32_t tid, uint64_t start_ms, uint64_t end_ms, const std::string& path) {
  SyscallWithPath r{};
  r.ev.hdr = header(LD_EV_SYSCALL, sizeof r, tid, end_ms * kMs);
  r.ev.start_ns = start_ms * kMs;
  r.ev.dur_ns = (end_ms - start_ms) * kMs;
  r.ev.kind = LD_SYS_FSYNC;
  r.ev.path_len = static_cast<uint16_t>(path.size());
  std::memcpy(r.path, path.data(), path.size());
  return r;
}

template <typename T>
void feed(ThreadTrackBuilder& b, const T& rec) {
  b.on_record(reinterpret_cast<const ld_hdr&>(rec), sizeof rec);
}

void expect_slice(const ThreadSlice& s, uint64_t start_ms, uint64_t end_ms, ThreadState state,
                  const std::string& detail) {
  EXPECT_EQ(s.start_ns, start_ms * kMs);
  EXPECT_EQ(s.end_ns, end_ms * kMs);
  EXPECT_EQ(s.state, state) << ld::model::thread_state_name(s.state);
  EXPECT_EQ(s.detail, detail);
}

TEST(ThreadTracks, OffCpuIntervalsBecomeBlockedRunnableAndRunningSlices) {
  ThreadTrackBuilder b;
  // Fed out of order: the builder sorts a thread's intervals.
  feed(b, preempted(101, 200, 230, 812, "cc1"));
  feed(b, blocked(101, 100, 150, 160, 202, 102, "worker"));
  ld_task_exit exit{};
  exit.hdr = header(LD_EV_TASK_EXIT, sizeof exit, 101, 300 * kMs);
  feed(b, exit);

  const ThreadTracks tracks = b.finish();
  ASSERT_EQ(tracks.threads.size(), 1u);
  const auto& t = tracks.threads[0];
  EXPECT_EQ(t.tid, 101u);
  EXPECT_EQ(t.tgid, kTgid);
  EXPECT_FALSE(t.truncated);
  ASSERT_EQ(t.slices.size(), 5u);
  expect_slice(t.slices[0], 100, 150, ThreadState::kBlocked, "blocked in futex; woken by worker (102)");
  expect_slice(t.slices[1], 150, 160, ThreadState::kRunnable, "woken, waiting to be switched in");
  expect_slice(t.slices[2], 160, 200, ThreadState::kRunning, "");
  expect_slice(t.slices[3], 200, 230, ThreadState::kRunnable, "preempted by cc1 (812)");
  expect_slice(t.slices[4], 230, 300, ThreadState::kRunning, "");  // until the thread exited
  EXPECT_TRUE(tracks.warnings.empty());
}

TEST(ThreadTracks, ThreadNamesComeFromRecordsThatNameThem) {
  ThreadTrackBuilder b;
  feed(b, blocked(101, 10, 20, 21, 202, 102, "engine"));
  feed(b, blocked(102, 30, 40, 41, 202, 101, "api"));
  const ThreadTracks tracks = b.finish();
  ASSERT_EQ(tracks.threads.size(), 2u);
  EXPECT_EQ(tracks.threads[0].name, "api");     // tid 101, named when it woke 102
  EXPECT_EQ(tracks.threads[1].name, "engine");  // tid 102
}

TEST(ThreadTracks, DiskAndGilRecordsNameWhatABlockedThreadWaitedFor) {
  ThreadTrackBuilder b;
  feed(b, blocked(101, 100, 140, 141, 74, 0, ""));
  feed(b, fsync_record(101, 99, 140, "/var/log/app.log"));
  feed(b, blocked(101, 200, 260, 261, 202, 103, "holder"));
  ld_syscall futex{};
  futex.hdr = header(LD_EV_SYSCALL, sizeof futex, 101, 260 * kMs);
  futex.dur_ns = 60 * kMs;
  futex.kind = LD_SYS_FUTEX_WAIT;
  futex.arg0 = 0x7f00;
  feed(b, futex);
  ld_gil_wait gil{};
  gil.hdr = header(LD_EV_GIL_WAIT, sizeof gil, 101, 250 * kMs);
  gil.start_ns = 205 * kMs;  // overlaps less than the futex wait, but says more
  gil.dur_ns = 45 * kMs;
  gil.kind = LD_GIL_WAIT_ONE;
  feed(b, gil);

  const ThreadTracks tracks = b.finish();
  ASSERT_EQ(tracks.threads.size(), 1u);
  std::vector<std::string> blocked_details;
  for (const auto& s : tracks.threads[0].slices)
    if (s.state == ThreadState::kBlocked) blocked_details.push_back(s.detail);
  ASSERT_EQ(blocked_details.size(), 2u);
  EXPECT_EQ(blocked_details[0], "fsync /var/log/app.log; woken by an interrupt or timer");
  EXPECT_EQ(blocked_details[1], "waiting for the GIL; woken by holder (103)");
}

TEST(ThreadTracks, PathNeverReadsPastTheRecord) {
  ThreadTrackBuilder b;
  feed(b, blocked(101, 100, 140, 141, 74, 0, ""));
  SyscallWithPath r = fsync_record(101, 100, 140, "/var/log/app.log");
  r.ev.path_len = 60000;  // lies about its length
  feed(b, r);
  const ThreadTracks tracks = b.finish();
  ASSERT_EQ(tracks.threads.size(), 1u);
  EXPECT_EQ(tracks.threads[0].slices[0].detail, "fsync /var/log/app.log; woken by an interrupt or timer");
}

TEST(ThreadTracks, CapsIntervalsPerThreadWithAWarning) {
  ThreadTrackBuilder b(/*max_intervals_per_thread=*/2, /*max_waits_per_thread=*/2);
  for (uint64_t i = 0; i < 5; ++i) feed(b, preempted(101, 100 * i + 10, 100 * i + 20, 0, ""));
  const ThreadTracks tracks = b.finish();
  ASSERT_EQ(tracks.threads.size(), 1u);
  EXPECT_TRUE(tracks.threads[0].truncated);
  size_t runnable = 0;
  for (const auto& s : tracks.threads[0].slices) runnable += s.state == ThreadState::kRunnable;
  EXPECT_EQ(runnable, 2u);
  ASSERT_EQ(tracks.warnings.size(), 1u);
  EXPECT_NE(tracks.warnings[0].find("3 scheduler/syscall record(s)"), std::string::npos) << tracks.warnings[0];
}

TEST(ThreadTracks, BadRecordsAreIgnored) {
  ThreadTrackBuilder b;
  ld_offcpu backwards = blocked(101, 100, 90, 80, 0, 0, "");  // on before off
  feed(b, backwards);
  ld_offcpu good = blocked(101, 200, 210, 220, 0, 0, "");
  b.on_record(good.hdr, 20);  // shorter than its type
  ld_offcpu overlapping = blocked(101, 300, 310, 320, 0, 0, "");
  feed(b, overlapping);
  feed(b, blocked(101, 305, 315, 325, 0, 0, ""));  // overlaps the previous interval
  const ThreadTracks tracks = b.finish();
  ASSERT_EQ(tracks.threads.size(), 1u);
  for (const auto& s : tracks.threads[0].slices) {
    EXPECT_GE(s.start_ns, 300 * kMs);
    EXPECT_LT(s.start_ns, s.end_ns);
  }
}

TEST(ThreadTracks, SyscallNamesUseTheTracedMachinesTable) {
  EXPECT_EQ(ld::model::syscall_name(202), "futex");
  EXPECT_EQ(ld::model::syscall_name(74), "fsync");
  EXPECT_EQ(ld::model::syscall_name(232), "epoll_wait");
  EXPECT_EQ(ld::model::syscall_name(9999), "syscall 9999");
  EXPECT_EQ(ld::model::syscall_name(202, "aarch64"), "syscall 202");  // another table: do not guess
}

TEST(ThreadTracks, EventAnalyzerKeepsTracksOnlyWhenAsked) {
  const ld_offcpu ev = blocked(101, 100, 150, 160, 202, 0, "");
  const nlohmann::json header = {{"clock", {{"start_mono_ns", 0}}}, {"host", {{"machine", "x86_64"}}}};
  const nlohmann::json trailer = {{"end_mono_ns", 400 * kMs}};

  ld::analysis::EventAnalyzer plain;
  plain.on_record(ev.hdr, sizeof ev);
  EXPECT_EQ(plain.finish(header, trailer, "sse", {}).tracks, nullptr);

  ld::analysis::EventAnalyzer with_tracks;
  with_tracks.keep_thread_tracks();
  with_tracks.on_record(ev.hdr, sizeof ev);
  const auto report = with_tracks.finish(header, trailer, "sse", {});
  ASSERT_NE(report.tracks, nullptr);
  ASSERT_EQ(report.tracks->threads.size(), 1u);
  EXPECT_EQ(report.tracks->threads[0].slices.front().detail, "blocked in futex; woken by an interrupt or timer");
}

}  // namespace
