// Report facts: a Report (with its attribution) flattened into the named values that rule
// conditions read. Units as in rules/facts.hpp: ms, bytes, kHz, shares 0..1, counts.
//
// Names (C = every cause id of the vocabulary, compute and unknown included):
//   summary.requests  summary.tokens  summary.duration_ms  summary.ttft_p50_ms
//   summary.ttft_p90_ms  summary.ttft_p99_ms  summary.tpot_p50_ms  summary.tpot_p99_ms
//   summary.tpot_mean_ms  summary.tpot_stddev_ms  summary.short_response_share (< 64 tokens)
//   outliers.count  outliers.ttft  outliers.tpot  outliers.explained_share (mean, non-unknown)
//   cause.C.outliers   outliers whose largest cause is C
//   cause.C.material   outliers where C took at least a fifth of the window, or a tenth where it
//                      does so in half of the outliers or more (three at least)
//   cause.C.slow_tokens  outliers where C is the largest cause or material
//   cause.C.ms         C's ms summed over all outliers       cause.C.max_ms  largest in one
//   cause.C.share      C's ms / all outlier ms
//   cause.C.<key>      evidence of the outlier where C had the most ms, e.g.
//                      cause.disk_io.syscall, cause.disk_io.path, cause.cpu_contention.culprit_comm
//   typical.C.share    C's share of the typical (non-outlier) token
//   cause.cpu_contention.own_share, typical.cpu_contention.own_share   of the run-queue time,
//                      the share behind the target's own threads; .own_threads: how many held CPUs
//   typical.C.ms_per_token
//   ttft_fit.valid  ttft_fit.a  ttft_fit.b  ttft_fit.r2  ttft_fit.n
//   ttft.outliers_long_input   TTFT outliers whose input is >= the P75 input of the trace
//   ttft.outlier_share         TTFT outliers / requests
//   ttft.first_request_outlier true when the first request of the target is a TTFT outlier
//   ttft.p90_minus_p50_ms
//   periodic.found  periodic.period_s  periodic.outliers  periodic.coincides
//   window.time_wait_max  window.time_wait_per_s  window.time_wait_projected (steady state: rate x 60 s)
//   window.listen_overflows  window.retransmits  window.connects
//   window.connects_per_request  window.cgroup_throttled_ms  window.cgroup_nr_throttled
//   window.cgroup_quota_cpus  window.cpu_khz_min  window.cpu_khz_max  window.cpu_freq_min_ratio
//   window.migrations_per_s  window.ioctl_blocked_ms
//   probes.P.attached (bool) for every probe P in the report; probes.lost (sum)
//   target.comm  target.exe  target.python (bool)
#pragma once

#include "model/report.hpp"
#include "rules/facts.hpp"

namespace ld::rules {

FactSet report_facts(const model::Report& report);

}  // namespace ld::rules
