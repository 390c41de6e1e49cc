#include "rules/report_facts.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "model/frames.hpp"
#include "model/stats.hpp"
#include "rules/rule.hpp"

namespace ld::rules {
namespace {

void set_finite(FactSet& facts, const std::string& name, double value) {
  if (std::isfinite(value)) facts.set(name, value);
}

// A JSON scalar as a fact; objects and arrays are not facts.
void set_json(FactSet& facts, const std::string& name, const nlohmann::json& value) {
  if (value.is_boolean()) facts.set(name, value.get<bool>());
  else if (value.is_number()) set_finite(facts, name, value.get<double>());
  else if (value.is_string()) facts.set(name, value.get<std::string>());
}

void summary_facts(const model::Report& r, FactSet& facts) {
  facts.set("summary.requests", r.requests);
  facts.set("summary.tokens", r.tokens);
  facts.set("summary.duration_ms", r.duration_ms);
  set_finite(facts, "summary.ttft_p50_ms", r.ttft_ms.p50);
  set_finite(facts, "summary.ttft_p90_ms", r.ttft_ms.p90);
  set_finite(facts, "summary.ttft_p99_ms", r.ttft_ms.p99);
  set_finite(facts, "summary.tpot_p50_ms", r.tpot_ms.p50);
  set_finite(facts, "summary.tpot_p99_ms", r.tpot_ms.p99);
  set_finite(facts, "summary.tpot_mean_ms", r.tpot_ms.mean);
  set_finite(facts, "summary.tpot_stddev_ms", r.tpot_ms.stddev);
  set_finite(facts, "ttft.p90_minus_p50_ms", r.ttft_ms.p90 - r.ttft_ms.p50);
  if (!r.request_rows.empty()) {
    const auto short_ones = std::count_if(r.request_rows.begin(), r.request_rows.end(),
                                          [](const model::RequestRow& row) { return row.tokens < 64; });
    facts.set("summary.short_response_share",
              static_cast<double>(short_ones) / static_cast<double>(r.request_rows.size()));
  }
}

// A cause that takes this share of a slow token's window counts for it (cause.C.material), even
// when another cause took more: a finding for every cause that matters, not only the largest.
constexpr double kMaterialShare = 0.2;
// A cause that recurs, taking this share of at least half of the slow tokens (and of three or
// more), matters as much: 40 ms of page faults in each of twelve 240 ms stalls is one remedy an
// SRE would want, though it never reaches a fifth of one.
constexpr double kRecurringShare = 0.1;
constexpr uint64_t kRecurringMin = 3;

// A GPU engine's slow tokens (facts from note_gpu_queue, note_gpu_state and the GIL walk,
// window_facts.cpp): those whose time went to the host side while the GPU sat idle for most of the
// window, those that ran on a throttled GPU, and the GIL waits an engine thread ended.
struct GpuFacts {
  static constexpr double kIdleShare = 0.5;
  uint64_t host_side = 0, throttled = 0, gil_engine = 0;  // gil_engine: slow tokens it mattered in
  double idle_ms = 0, max_idle_ms = 0, gil_engine_ms = 0, throttled_sm_min = 0;
  std::string throttle;  // the limits named, the first throttled outlier's
  bool seen = false;

  static double number(const model::Outlier& o, const char* key) {
    auto it = o.facts.find(key);
    return it != o.facts.end() && it->is_number() ? it->get<double>() : 0.0;
  }
  void add(const model::Outlier& o) {
    const double engine_ms = number(o, "gil_engine_ms");
    gil_engine_ms += engine_ms;
    if (engine_ms > 0 && engine_ms >= kMaterialShare * o.duration_ms) ++gil_engine;
    if (auto it = o.facts.find("gpu_throttled"); it != o.facts.end() && it->is_boolean() && it->get<bool>()) {
      const double sm = number(o, "gpu_sm_mhz");
      throttled_sm_min = throttled++ == 0 ? sm : std::min(throttled_sm_min, sm);
      if (throttle.empty()) throttle = o.facts.value("gpu_throttle", "");
    }
    if (!o.facts.contains("gpu_idle_ms")) return;
    seen = true;
    const double idle = number(o, "gpu_idle_ms");
    const bool gpu_on_top = !o.causes.empty() && o.causes.front().cause == model::Cause::kGpuBusy;
    if (gpu_on_top || idle < kIdleShare * o.duration_ms) return;
    ++host_side;
    idle_ms += idle;
    max_idle_ms = std::max(max_idle_ms, idle);
  }
  void set(FactSet& facts) const {
    if (gil_engine_ms > 0) {
      facts.set("outliers.gil_engine_ms", gil_engine_ms);
      facts.set("outliers.gil_engine", gil_engine);
    }
    if (throttled) {
      facts.set("outliers.gpu_throttled", throttled);
      facts.set("outliers.gpu_throttled_sm_mhz", throttled_sm_min);
      facts.set("outliers.gpu_throttle", throttle);
    }
    if (!seen) return;
    facts.set("outliers.gpu_idle", host_side);
    facts.set("outliers.gpu_idle_ms", idle_ms);
    facts.set("outliers.gpu_idle_max_ms", max_idle_ms);
  }
};

void outlier_facts(const model::Report& r, FactSet& facts) {
  uint64_t ttft = 0;
  double explained = 0;
  using model::Cause;
  std::array<double, model::kCauseCount> ms{}, max_ms{};
  std::array<uint64_t, model::kCauseCount> top{}, material{}, recurring{}, slow_tokens{};
  std::array<const model::CauseTime*, model::kCauseCount> strongest{};  // the outlier where C had most ms
  double total_ms = 0, own_ms = 0, own_threads = 0;
  GpuFacts gpu;
  for (const model::Outlier& o : r.outliers) {
    if (o.kind == model::WindowKind::kTtft) ++ttft;
    gpu.add(o);
    if (auto own = o.facts.find("own_contention_ms"); own != o.facts.end() && own->is_number())
      own_ms += own->get<double>();
    if (auto n = o.facts.find("own_busy_threads"); n != o.facts.end() && n->is_number())
      own_threads = std::max(own_threads, n->get<double>());
    total_ms += o.duration_ms;
    double known = 0;
    for (const model::CauseTime& c : o.causes) {
      const auto i = static_cast<size_t>(c.cause);
      ms[i] += c.ms;
      if (c.cause != Cause::kUnknown) known += c.share;
      if (c.share >= kMaterialShare) ++material[i];
      if (c.share >= kRecurringShare) ++recurring[i];
      if (c.ms > max_ms[i]) {
        max_ms[i] = c.ms;
        strongest[i] = &c;
      }
    }
    if (!o.causes.empty()) ++top[static_cast<size_t>(o.causes.front().cause)];
    explained += std::min(known, 1.0);
  }
  std::array<double, model::kCauseCount> material_share;
  for (size_t i = 0; i < model::kCauseCount; ++i) {
    const bool recurs = recurring[i] >= kRecurringMin && 2 * recurring[i] >= r.outliers.size();
    material_share[i] = recurs ? kRecurringShare : kMaterialShare;
    if (recurs) material[i] = recurring[i];
  }
  // slow_tokens: those where C is the largest cause or material.
  for (const model::Outlier& o : r.outliers)
    for (const model::CauseTime& c : o.causes) {
      const auto i = static_cast<size_t>(c.cause);
      if (c.share >= material_share[i] || &c == &o.causes.front()) ++slow_tokens[i];
    }
  if (const double contention = ms[static_cast<size_t>(Cause::kCpuContention)]; contention > 0) {
    facts.set("cause.cpu_contention.own_share", own_ms / contention);
    facts.set("cause.cpu_contention.own_threads", own_threads);
  }
  gpu.set(facts);
  facts.set("outliers.count", r.outliers.size());
  facts.set("outliers.ttft", ttft);
  facts.set("outliers.tpot", r.outliers.size() - ttft);
  if (!r.outliers.empty()) facts.set("outliers.explained_share", explained / static_cast<double>(r.outliers.size()));
  for (const model::CauseInfo& cause : model::kCauses) {
    const auto i = static_cast<size_t>(cause.cause);
    const std::string prefix = fmt::format("cause.{}.", cause.id);
    facts.set(prefix + "outliers", top[i]);
    facts.set(prefix + "material", material[i]);
    facts.set(prefix + "slow_tokens", slow_tokens[i]);
    facts.set(prefix + "ms", ms[i]);
    facts.set(prefix + "max_ms", max_ms[i]);
    facts.set(prefix + "share", total_ms > 0 ? ms[i] / total_ms : 0.0);
    if (strongest[i] && strongest[i]->evidence.is_object()) {
      for (const auto& [key, value] : strongest[i]->evidence.items()) set_json(facts, prefix + key, value);
    }
  }
}

void typical_facts(const model::Report& r, FactSet& facts) {
  facts.set("typical.windows", r.typical.windows);
  if (r.typical.windows == 0) return;
  if (r.typical.total_ms > 0) {
    double contention = 0;
    for (const model::CauseTime& c : r.typical.causes)
      if (c.cause == model::Cause::kCpuContention) contention = c.ms;
    if (contention > 0) facts.set("typical.cpu_contention.own_share", r.typical.own_contention_ms / contention);
    facts.set("typical.cpu_contention.own_threads", r.typical.own_busy_threads);
    facts.set("typical.gil.engine_share", r.typical.gil_engine_ms / r.typical.total_ms);
  }
  for (const model::CauseTime& c : r.typical.causes) {
    const std::string prefix = fmt::format("typical.{}.", model::cause_id(c.cause));
    facts.set(prefix + "share", c.share);
    facts.set(prefix + "ms_per_token", c.ms / static_cast<double>(r.typical.windows));
  }
}

void ttft_facts(const model::Report& r, FactSet& facts) {
  facts.set("ttft_fit.valid", r.ttft_fit.valid);
  if (r.ttft_fit.valid) {
    facts.set("ttft_fit.a", r.ttft_fit.a);
    facts.set("ttft_fit.b", r.ttft_fit.b);
    facts.set("ttft_fit.r2", r.ttft_fit.r2);
    facts.set("ttft_fit.n", r.ttft_fit.n);
  }
  if (r.request_rows.empty()) return;
  std::vector<double> inputs;
  for (const auto& row : r.request_rows) inputs.push_back(static_cast<double>(row.input_bytes));
  const double p75 = model::percentile(inputs, 75);
  uint64_t long_input = 0, ttft = 0;
  bool first = false;
  const std::string& first_id = r.request_rows.front().id;
  for (const model::Outlier& o : r.outliers) {
    if (o.kind != model::WindowKind::kTtft) continue;
    ++ttft;
    if (o.request == first_id) first = true;
    for (const auto& row : r.request_rows)
      if (row.id == o.request && static_cast<double>(row.input_bytes) >= p75 && row.input_bytes > 0) ++long_input;
  }
  facts.set("ttft.outliers_long_input", long_input);
  facts.set("ttft.outlier_share", static_cast<double>(ttft) / static_cast<double>(r.request_rows.size()));
  facts.set("ttft.first_request_outlier", first);
}

// A client's token log joined to the server's requests: what the client waited for outside the
// server (model/client_join.hpp). Only when a log was joined.
// How the token sends left their TCP sockets (model::TcpSends): Nagle's algorithm on, and sends
// it held for an ACK.
void tcp_facts(const model::Report& r, FactSet& facts) {
  const model::TcpSends& t = r.tcp_sends;
  facts.set("tcp.token_sends", t.token_sends);
  if (t.token_sends == 0) return;
  facts.set("tcp.nagle_sends", t.nagle);
  facts.set("tcp.held_sends", t.held);
  facts.set("tcp.corked_sends", t.corked);
  facts.set("tcp.nagle_share", static_cast<double>(t.nagle) / static_cast<double>(t.token_sends));
  facts.set("tcp.held_share", static_cast<double>(t.held) / static_cast<double>(t.token_sends));
  facts.set("tcp.requests", t.requests);
  facts.set("tcp.nagle_requests", t.nagle_requests);
}

void client_facts(const model::Report& r, FactSet& facts) {
  const model::ClientJoin& j = r.client_join;
  if (!j.present) return;
  facts.set("client.requests", j.client_requests);
  facts.set("client.matched", j.matched);
  if (j.matched == 0) return;
  set_finite(facts, "client.ttft_p50_ms", j.client_ttft_ms.p50);
  set_finite(facts, "client.server_ttft_p50_ms", j.server_ttft_ms.p50);
  set_finite(facts, "client.before_server_p50_ms", j.before_server_ms.p50);
  set_finite(facts, "client.after_server_p50_ms", j.after_server_ms.p50);
  set_finite(facts, "client.outside_ttft_p50_ms", j.outside_ttft_ms.p50);
  set_finite(facts, "client.outside_ttft_share", j.outside_ttft_share);
  facts.set("client.gaps", j.gaps);
  facts.set("client.bunched_tokens", j.bunched_tokens);
  facts.set("client.bunched_share", j.bunched_share);
  set_finite(facts, "client.lag_p50_ms", j.lag_ms.p50);
  set_finite(facts, "client.lag_max_ms", j.lag_ms.max);
  set_finite(facts, "client.gap_p50_ms", j.client_gap_ms.p50);
  if (j.held_lag_ms.count > 0) {
    facts.set("client.held_tokens", j.held_lag_ms.count);
    set_finite(facts, "client.held_lag_p50_ms", j.held_lag_ms.p50);
    set_finite(facts, "client.held_lag_max_ms", j.held_lag_ms.max);
  }
  if (j.other_lag_ms.count > 0) set_finite(facts, "client.other_lag_p50_ms", j.other_lag_ms.p50);
  set_finite(facts, "client.server_gap_p50_ms", j.server_gap_ms.p50);
}

// What the slow tokens ran beyond a typical token (model/frames.hpp): the function at the head
// of most outliers' frames. frames.KIND (json, logging, gc, tokenizer) names it only when it is
// that kind of code, so a rule's remedy can speak of it in an optional part.
void frames_facts(const model::Report& r, FactSet& facts) {
  const model::FramesSummary s = model::summarize_frames(r);
  facts.set("frames.outliers", s.outliers_with_frames);
  if (s.top.empty()) return;
  const model::TopFrame& top = s.top.front();
  facts.set("frames.top", top.frame.function);
  facts.set("frames.top_where", top.frame.where);
  facts.set("frames.top_python", top.frame.python);
  facts.set("frames.top_outliers", top.outliers);
  facts.set("frames.top_share", top.mean_share);
  facts.set("frames.top_typical_share", top.frame.typical_share);
  facts.set("frames.top_kind", top.kind);
  // How sure the comparison is: the top frame's pooled samples in the slow tokens against the
  // typical token's, by Fisher's exact test and a Wilson interval (docs/attribution.md).
  const uint64_t typical_samples = r.typical.frame_samples;
  const auto typical_in_frame =
      static_cast<uint64_t>(std::llround(top.frame.typical_share * static_cast<double>(typical_samples)));
  facts.set("frames.top_samples", top.samples);
  facts.set("frames.top_window_samples", top.window_samples);
  facts.set("frames.typical_samples", typical_samples);
  facts.set("frames.top_p",
            model::fisher_greater_p(top.samples, top.window_samples, typical_in_frame, typical_samples));
  const model::Interval ci = model::wilson_interval(top.samples, top.window_samples);
  facts.set("frames.top_share_low", ci.low);
  facts.set("frames.top_share_high", ci.high);
  if (top.kind != "code") facts.set("frames." + top.kind, top.frame.function);
  if (s.top.size() > 1) {
    facts.set("frames.second", s.top[1].frame.function);
    facts.set("frames.second_outliers", s.top[1].outliers);
  }
}

}  // namespace

FactSet report_facts(const model::Report& r) {
  FactSet facts;
  summary_facts(r, facts);
  outlier_facts(r, facts);
  typical_facts(r, facts);
  ttft_facts(r, facts);
  client_facts(r, facts);
  tcp_facts(r, facts);
  frames_facts(r, facts);
  facts.set("periodic.found", r.periodicity.found);
  if (r.periodicity.found) {
    facts.set("periodic.period_s", r.periodicity.period_s);
    facts.set("periodic.outliers", r.periodicity.outliers);
    facts.set("periodic.coincides", r.periodicity.coincides);
  }
  if (r.window_facts.is_object())
    for (const auto& [key, value] : r.window_facts.items()) set_json(facts, "window." + key, value);
  uint64_t lost = 0;
  for (const model::ProbeStatus& p : r.probes) {
    facts.set("probes." + p.name + ".attached", p.status == model::ProbeState::kAttached);
    lost += p.lost;
  }
  facts.set("probes.lost", lost);
  facts.set("target.comm", r.target.comm);
  facts.set("target.exe", r.target.exe);
  facts.set("target.python",
            r.target.exe.find("python") != std::string::npos || r.target.comm.find("python") != std::string::npos);
  return facts;
}

}  // namespace ld::rules
