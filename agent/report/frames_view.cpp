#include "report/frames_view.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "model/frames.hpp"

namespace ld::report {
namespace {

std::string percent(double share) { return fmt::format("{:.0f}%", share * 100.0); }

}  // namespace

std::string frames_headline(const model::Report& r) {
  const model::FramesSummary s = model::summarize_frames(r);
  if (s.top.empty()) return "";
  const model::TopFrame& t = s.top.front();
  return fmt::format("{} in {} of {} slow tokens, {} of their samples (typical {})", model::frame_label(t.frame),
                     t.outliers, r.outliers.size(), percent(t.mean_share), percent(t.frame.typical_share));
}

CellTable outlier_frames_table(const model::Report& r, size_t max_rows) {
  CellTable t;
  t.headers = {"slow token", "ms", "samples", "ran beyond a typical token", "share", "typical"};
  t.numeric = {false, true, true, false, true, true};
  std::vector<const model::Outlier*> with;
  for (const model::Outlier& o : r.outliers)
    if (!o.frames.empty()) with.push_back(&o);
  std::stable_sort(with.begin(), with.end(),
                   [](const model::Outlier* a, const model::Outlier* b) { return a->duration_ms > b->duration_ms; });
  if (with.size() > max_rows) with.resize(max_rows);
  for (const model::Outlier* o : with) {
    // The first two frames: the function, and what else it ran or was called from.
    for (size_t i = 0; i < o->frames.size() && i < 2; ++i) {
      const model::FrameShare& f = o->frames[i];
      t.rows.push_back(
          {i == 0 ? fmt::format("{} {} token {}", model::window_kind_name(o->kind), o->request, o->token_index) : "",
           i == 0 ? fmt::format("{:.0f}", o->duration_ms) : "", i == 0 ? std::to_string(o->frame_samples) : "",
           model::frame_label(f), percent(f.share), percent(f.typical_share)});
    }
  }
  return t;
}

CellTable typical_frames_table(const model::Report& r) {
  CellTable t;
  t.headers = {"typical token ran (innermost)", "share"};
  t.numeric = {false, true};
  for (const model::FrameShare& f : r.typical.frames) t.rows.push_back({model::frame_label(f), percent(f.share)});
  return t;
}

}  // namespace ld::report
