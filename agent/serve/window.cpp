#include "serve/window.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "analysis/event_analyzer.hpp"
#include "events.h"
#include "rules/engine.hpp"
#include "util/time.hpp"

namespace ld::serve {

void RecordBuffer::append(const ld_hdr& rec, size_t size) {
  const size_t padded = (size + 7) & ~size_t{7};
  if (!open_ || open_->used_bytes + padded > open_->words.size() * 8) {
    if (open_) seal();
    open_ = std::make_shared<RecordBlock>();
    open_->words.resize(std::max(block_bytes_, padded) / 8);
  }
  auto* dst = reinterpret_cast<unsigned char*>(open_->words.data()) + open_->used_bytes;
  std::memcpy(dst, &rec, size);
  if (padded > size) std::memset(dst + size, 0, padded - size);
  open_->used_bytes += padded;
  open_->records++;
  open_->min_ts = std::min<uint64_t>(open_->min_ts, rec.ts_ns);
  open_->max_ts = std::max<uint64_t>(open_->max_ts, rec.ts_ns);
  bytes_ += padded;
  // The memory cap: the oldest sealed blocks go first (the look-back shrinks, counted).
  while (bytes_ > max_bytes_ && !sealed_.empty()) {
    bytes_ -= sealed_.front()->used_bytes;
    dropped_ += sealed_.front()->records;
    sealed_.pop_front();
  }
}

void RecordBuffer::seal() {
  if (!open_ || open_->records == 0) return;
  open_->words.resize((open_->used_bytes + 7) / 8);
  open_->words.shrink_to_fit();
  sealed_.push_back(std::move(open_));
  open_.reset();
}

std::vector<std::shared_ptr<const RecordBlock>> RecordBuffer::snapshot() {
  seal();
  return {sealed_.begin(), sealed_.end()};
}

void RecordBuffer::drop_before(uint64_t ts) {
  while (!sealed_.empty() && sealed_.front()->max_ts < ts) {
    bytes_ -= sealed_.front()->used_bytes;
    sealed_.pop_front();
  }
}

uint64_t RecordBuffer::records() const {
  uint64_t n = open_ ? open_->records : 0;
  for (const auto& b : sealed_) n += b->records;
  return n;
}

double p99(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t rank = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(values.size())));
  return values[std::max<size_t>(rank, 1) - 1];
}

void count_window(const model::Report& report, uint64_t from_ns, uint64_t to_ns, WindowResult& out) {
  auto in = [&](uint64_t t) { return t >= from_ns && t < to_ns; };
  for (const auto& r : report.request_rows) {
    const auto& tokens = r.token_mono_ns;
    if (tokens.empty()) continue;
    if (in(tokens.front()) && std::isfinite(r.ttft_ms) && r.ttft_ms >= 0)
      out.observed.ttft_s.push_back(util::ms_to_s(r.ttft_ms));
    for (size_t i = 1; i < tokens.size(); ++i)
      if (in(tokens[i]) && tokens[i] >= tokens[i - 1])
        out.observed.gap_s.push_back(util::ns_to_s(tokens[i] - tokens[i - 1]));
  }
  for (size_t i = 0; i < report.outliers.size(); ++i) {
    const auto& o = report.outliers[i];
    if (!in(o.end_mono_ns)) continue;
    out.outliers.push_back(i);
    out.observed.outliers[std::string(model::window_kind_name(o.kind))]++;
    double explained = 0;
    for (const auto& c : o.causes) {
      out.observed.outlier_seconds[std::string(model::cause_id(c.cause))] += util::ms_to_s(c.ms);
      explained += c.ms;
    }
    // What no cause explains is `unknown`: the counter adds up to the outliers' whole time.
    if (o.duration_ms - explained > 1e-6)
      out.observed.outlier_seconds[std::string(model::cause_id(model::Cause::kUnknown))] +=
          util::ms_to_s(o.duration_ms - explained);
  }
  for (const auto& f : report.findings) {
    auto& severity = out.observed.findings[f.rule];
    // One rule, several findings: the most severe one.
    auto rank = [](const std::string& s) { return s == "crit" ? 3 : s == "warn" ? 2 : s == "info" ? 1 : 0; };
    if (rank(f.severity) > rank(severity)) severity = f.severity;
  }
  out.ttft_p99_s = p99(out.observed.ttft_s);
}

WindowResult analyze_window(const WindowInput& input, const rules::RuleSet& rules) {
  const auto wall0 = std::chrono::steady_clock::now();
  WindowResult result;
  analysis::EventAnalyzer analyzer;
  uint64_t first_ts = UINT64_MAX;
  for (const auto& block : input.blocks) {
    first_ts = std::min(first_ts, block->min_ts);
    block->for_each([&](const ld_hdr& rec, size_t size) { analyzer.on_record(rec, size); });
  }
  result.records = analyzer.records();
  trace::TraceMeta meta;
  meta.header = input.header;
  meta.header.start_mono_ns = first_ts == UINT64_MAX ? input.count_from_ns : first_ts;
  meta.header.duration_requested_ms = 0;
  meta.trailer.present = true;
  meta.trailer.end_mono_ns = input.end_ns;
  meta.trailer.stop_reason = trace::StopReason::kWindow;
  meta.trailer.probes = input.probes;
  result.report = analyzer.finish(meta, "sse", {});
  rules::apply_rules(result.report, rules, rules::host_facts_of(result.report));
  count_window(result.report, input.count_from_ns, input.count_to_ns, result);
  result.analysis_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return result;
}

}  // namespace ld::serve
