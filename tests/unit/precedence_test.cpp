// The precedence table (analysis/precedence.hpp) decides both sides of the walk: a running span
// and a blocked span covered by several kinds of timed evidence go to the same row, the first
// in the table. Walks every row against every row below it.
#include <cstring>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "analysis/attribution.hpp"
#include "analysis/precedence.hpp"
#include "events.h"
#include "synthetic_record.hpp"

using ld::analysis::Attributor;
using ld::analysis::EvidenceStore;
using ld::analysis::kPrecedence;
using ld::analysis::kTimedKinds;
using ld::analysis::Timed;
using ld::analysis::WindowAccount;
using ld::model::Cause;

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint32_t kPid = 100;
constexpr uint64_t kGilWord = 0x5000;
constexpr uint32_t kFutexNr = 202;  // x86-64: the thread blocked in futex

template <class T>
T record(uint16_t type, uint32_t tid, uint64_t ts) {
  return synthetic_record<T>(type, kPid, tid, ts);
}

void add_call(EvidenceStore& store, uint32_t kind, uint64_t a, uint64_t b, uint64_t arg0 = 0) {
  auto r = record<ld_syscall>(LD_EV_SYSCALL, kPid, b);
  r.start_ns = a;
  r.dur_ns = b - a;
  r.kind = kind;
  r.arg0 = arg0;
  ASSERT_TRUE(store.add(r.hdr, sizeof(r)));
}

// Timed evidence of `kind` over [a, b] on the thread.
void add_evidence(EvidenceStore& store, Timed kind, uint64_t a, uint64_t b) {
  switch (kind) {
    case Timed::kReclaim: {
      auto r = record<ld_reclaim>(LD_EV_RECLAIM, kPid, b);
      r.start_ns = a;
      r.kind = LD_RECLAIM_DIRECT;
      ASSERT_TRUE(store.add(r.hdr, sizeof(r)));
      break;
    }
    case Timed::kGilWait: add_call(store, LD_SYS_FUTEX_WAIT, a, b, kGilWord); break;
    case Timed::kSyncCall: add_call(store, LD_SYS_FSYNC, a, b, 3); break;
    case Timed::kMemoryCall: add_call(store, LD_SYS_MMAP, a, b, 1 << 20); break;
    case Timed::kLockWait: add_call(store, LD_SYS_FUTEX_WAIT, a, b, 0x9000); break;
    case Timed::kCount: break;
  }
}

EvidenceStore store_with_gil_word() {
  EvidenceStore store;
  auto addr = record<ld_gil_addr>(LD_EV_GIL_ADDR, 0, 1);
  addr.uaddr_lo = kGilWord;
  addr.uaddr_hi = kGilWord + 8;
  addr.method = LD_GIL_TAKE_GIL;
  EXPECT_TRUE(store.add(addr.hdr, sizeof(addr)));
  return store;
}

// The thread blocked in futex over [a, b]; a process outside the server woke it (no hand-off to
// follow, so the block keeps what its own evidence says).
void add_block(EvidenceStore& store, uint64_t a, uint64_t b) {
  auto r = record<ld_offcpu>(LD_EV_OFFCPU, kPid, b);
  r.off_ns = a;
  r.wake_ns = b;
  r.on_ns = b;
  r.kind = LD_OFF_BLOCKED;
  r.kstack_id = -1;
  r.syscall_nr = kFutexNr;
  r.waker_tid = 999;
  r.waker_tgid = 999;
  std::strncpy(r.waker_comm, "outsider", LD_COMM_LEN - 1);
  ASSERT_TRUE(store.add(r.hdr, sizeof(r)));
}

double ms_of(const WindowAccount& acc, Cause c) { return static_cast<double>(acc.ns_of(c)) / kMs; }

std::string name_of(size_t row) { return std::string(kPrecedence[row].name); }

}  // namespace

TEST(Precedence, EveryTimedKindHasExactlyOneRow) {
  for (size_t kind = 0; kind < kTimedKinds; ++kind) {
    size_t rows = 0;
    for (const auto& row : kPrecedence) rows += static_cast<size_t>(row.evidence) == kind;
    EXPECT_EQ(rows, 1u) << "timed kind " << kind;
  }
}

TEST(Precedence, ARunningSpanGoesToTheFirstRowOfItsEvidence) {
  // [10, 60] ms on CPU, covered by the row's evidence and every row's below it: all of it is the
  // row's cause.
  for (size_t i = 0; i < kPrecedence.size(); ++i) {
    EvidenceStore store = store_with_gil_word();
    for (size_t j = i; j < kPrecedence.size(); ++j) add_evidence(store, kPrecedence[j].evidence, 10 * kMs, 60 * kMs);
    store.finish();
    const WindowAccount acc = Attributor(store, {kPid}).account(kPid, 0, 100 * kMs);
    EXPECT_DOUBLE_EQ(ms_of(acc, kPrecedence[i].cause), 50) << "row " << name_of(i);
    EXPECT_EQ(acc.total_ns(), 100 * kMs);
  }
}

TEST(Precedence, ABlockedSpanGoesToItsRow) {
  for (size_t i = 0; i < kPrecedence.size(); ++i) {
    EvidenceStore store = store_with_gil_word();
    add_block(store, 10 * kMs, 60 * kMs);
    add_evidence(store, kPrecedence[i].evidence, 10 * kMs, 60 * kMs);
    store.finish();
    const WindowAccount acc = Attributor(store, {kPid}).account(kPid, 0, 100 * kMs);
    EXPECT_DOUBLE_EQ(ms_of(acc, kPrecedence[i].cause), 50) << "row " << name_of(i);
  }
}

TEST(Precedence, ABlockedSpanGoesToTheFirstRowOfItsEvidence) {
  // A block is one call (the one that covers most of it), so two calls cannot both explain it;
  // what can be present together is a reclaim with any call, and the GIL probe's waits with a
  // call that is not a futex wait. The row above wins on every such pair.
  auto block_with = [](Timed upper, Timed lower) {
    EvidenceStore store = store_with_gil_word();
    add_block(store, 10 * kMs, 60 * kMs);
    add_evidence(store, lower, 10 * kMs, 60 * kMs);
    if (upper == Timed::kGilWait) {
      auto g = record<ld_gil_wait>(LD_EV_GIL_WAIT, kPid, 60 * kMs);
      g.start_ns = 10 * kMs;
      g.dur_ns = 50 * kMs;
      g.count = 1;
      EXPECT_TRUE(store.add(g.hdr, sizeof(g)));
    } else {
      add_evidence(store, upper, 10 * kMs, 60 * kMs);
    }
    store.finish();
    return Attributor(store, {kPid}).account(kPid, 0, 100 * kMs);
  };
  for (size_t i = 0; i < kPrecedence.size(); ++i)
    for (size_t j = i + 1; j < kPrecedence.size(); ++j) {
      const Timed upper = kPrecedence[i].evidence, lower = kPrecedence[j].evidence;
      const bool together = upper == Timed::kReclaim ||
                            (upper == Timed::kGilWait && (lower == Timed::kSyncCall || lower == Timed::kMemoryCall));
      if (!together) continue;
      EXPECT_DOUBLE_EQ(ms_of(block_with(upper, lower), kPrecedence[i].cause), 50)
          << name_of(i) << " over " << name_of(j);
    }
}

TEST(Precedence, TheDocsShowTheTableAsTheCodeHasIt) {
  std::ifstream in(std::string(LD_TEST_DATA_DIR) + "/../../docs/attribution.md");
  ASSERT_TRUE(in.is_open());
  std::string line;
  size_t row = 0;
  while (std::getline(in, line) && row < kPrecedence.size()) {
    const std::string expect = "| " + std::to_string(row + 1) + " | " + name_of(row) + " | `" +
                               std::string(ld::model::cause_id(kPrecedence[row].cause)) + "` |";
    if (line.rfind(expect, 0) == 0) ++row;
  }
  EXPECT_EQ(row, kPrecedence.size()) << "docs/attribution.md's precedence table differs from kPrecedence at row "
                                     << row + 1;
}
