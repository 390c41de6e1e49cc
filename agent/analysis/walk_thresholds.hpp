// Every number the attribution decides with, in one place: what each separates and why it sits
// where it does. docs/attribution.md lists them beside the precedence table.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ld::analysis::thresholds {

// ---------------------------------------------------------------- the hand-off model
// A waker of at least this share of a thread's typical token gaps is its producer: one wake-up
// per token is a hand-off (an event loop fed by eight engine threads gets an eighth of its
// wake-ups from each), while a lock holder that gets in the way now and then wakes it in the
// outliers, not in the typical gaps.
inline constexpr double kProducerShare = 0.05;
// ...and of at least this many wake-ups: two coincidences in a short trace are no pattern.
inline constexpr uint64_t kMinProducerWakes = 3;
// The main producer (the one a short, waker-less wait is walked on) must have ended at least
// this share of all the wake-ups the thread got from the server: with several producers and
// none with most, there is no single one to follow.
inline constexpr double kMainProducerMajority = 0.5;

// ---------------------------------------------------------------- the walk
// Wakers followed up this deep (API process -> engine process -> its worker -> ...). Real
// servers hand a token over two or three times; the cap bounds the walk, not the model.
inline constexpr int kMaxWakerDepth = 4;
// How many of a thread's later (or earlier) waits are searched for the producer that ended a
// wait that ran out: a few dozen waits of an event loop between two tokens.
inline constexpr size_t kHandoffLookAhead = 64;
// Items (calls, stalls) longer than this are not found from windows that begin after their
// first minute (a 60 s epoll_wait is classified from the scheduler's syscall number instead):
// every window of a long trace searches back this far at most.
inline constexpr uint64_t kLookBackNs = 60'000'000'000ULL;
// Fresh-page faults per ms of a span's on-CPU time above which its user-mode samples are the
// faults' cost too (~80 MB/s of new memory at 4 KiB; a server's own allocation churn stays far
// below). Where the host shadows the guest's page tables, the hypervisor's half of each fault
// is charged to the user instruction that faulted (docs/accuracy.md).
inline constexpr double kDenseFaultsPerMs = 20;
// Short runnable slices (summed per period by the sched probe) are prorated into a running
// span; at most this share of the span: the rest was on CPU, whatever the proration says.
inline constexpr double kShortRunnableMaxShare = 0.5;
// A CPU below this share of its top frequency is clocked down (the cpu_frequency rule's
// window.cpu_freq_min_ratio uses the same line): above it, the loss is within what turbo and
// the governor's ramp move anyway; below it, compute runs measurably slower.
inline constexpr double kSlowClockShare = 0.8;
// A block in futex is a GIL wait by the GIL probe's timings when they cover at least this share
// of it (a sleep or a read between two GIL waits is not one).
inline constexpr double kGilProbeCoverShare = 0.5;
// An engine thread (one that calls CUDA) holds the GIL for short GIL waits when it was busy
// (running or in a CUDA wait) for at least this share of them.
inline constexpr double kEngineBusyShare = 0.5;
// Threads named as the server's own neighbours per window: a bound far above any server's
// busy threads, so a pathological trace cannot grow a window's set without end.
inline constexpr size_t kMaxOwnCulprits = 1024;

// ---------------------------------------------------------------- naming the steps
// A step is named after a timed call that covers at least this share of it, or after the
// syscall (or kernel path) that more than this share of its samples were in.
inline constexpr double kStepNameShare = 0.5;

// ---------------------------------------------------------------- the report
// Causes under this many ns in a window are rounding dust of the walk, not a cause.
inline constexpr uint64_t kDustNs = 50'000;
// A token-log request matches the server request whose first token is this close: clocks are
// aligned to well under it.
inline constexpr uint64_t kServerMatchNs = 50'000'000;
// The first request is "first since start" when the target started at most this long before it
// (otherwise earlier requests may have warmed it before the trace began).
inline constexpr uint64_t kFreshTargetNs = 120'000'000'000ULL;
// A GPU sample older than this says nothing of a window that holds none.
inline constexpr uint64_t kGpuSampleStaleNs = 1'000'000'000;

// The token thread's steps as a person reads them (activity_of): at most this many, each at
// least this long, and told in order only when the kept ones tell this share of the time
// (else as totals by name).
inline constexpr size_t kActivitySteps = 8;
inline constexpr uint64_t kActivityMinNs = 500'000;
inline constexpr double kActivityInOrderShare = 0.6;

// Periodicity (find_period): outliers this close are one event (one scrape can hurt several
// streams); a candidate period fits when at most this share of the gaps are off its grid by
// more than this fraction of it, and the gaps span at most this many periods each on average
// (a grid so fine that most gaps span many periods explains any times).
inline constexpr uint64_t kPeriodEventNs = 500'000'000ULL;
inline constexpr double kPeriodGridTolerance = 0.1;
inline constexpr double kPeriodOffGridShare = 0.2;
inline constexpr double kPeriodMaxPeriodsPerGap = 1.5;

// The TTFT fit (fit_ttft): pairs of the Theil-Sen estimate are thinned above this many points
// (O(n^2)); inliers lie within this many robust standard deviations of the fit.
inline constexpr size_t kTheilSenPoints = 700;
inline constexpr double kFitInlierSd = 3;

}  // namespace ld::analysis::thresholds
