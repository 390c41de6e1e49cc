#include "model/frames.hpp"

#include <algorithm>
#include <cctype>
#include <map>

namespace ld::model {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool has(const std::string& s, const char* word) { return s.find(word) != std::string::npos; }

}  // namespace

std::string frame_kind(const FrameShare& f) {
  const std::string fn = lower(f.function), where = lower(f.where);
  // The file first: a function of the json or logging package is theirs whatever its name.
  if (has(where, "json") || has(fn, "json") || has(fn, "dumps") || has(fn, "serializ") || has(fn, "serialis"))
    return "json";
  if (has(where, "logging/") || has(where, "logging.") || has(fn, "spdlog") || has(fn, "log_message") ||
      fn.rfind("log", 0) == 0 || has(fn, ".log") || has(fn, "_log") || has(fn, "::log"))
    return "logging";
  if (fn == "collect" || has(fn, "gc_collect") || has(fn, "gc.collect") || has(fn, "_pygc_") ||
      has(fn, "gc_collect_main"))
    return "gc";
  if (has(fn, "token") || has(where, "token")) return "tokenizer";
  return "code";
}

std::string frame_label(const FrameShare& f) {
  return f.where.empty() ? f.function : f.function + " (" + f.where + ")";
}

FramesSummary summarize_frames(const Report& report) {
  FramesSummary out;
  std::map<std::pair<bool, std::string>, size_t> index;  // (python, function) -> out.top
  for (const Outlier& o : report.outliers) {
    if (o.frames.empty()) continue;
    out.outliers_with_frames++;
    const FrameShare& f = o.frames.front();
    auto [it, added] = index.try_emplace({f.python, f.function}, out.top.size());
    if (added) out.top.push_back({f, 0, 0, 0, 0, frame_kind(f)});
    TopFrame& t = out.top[it->second];
    t.mean_share += f.share;
    t.outliers++;
    t.samples += f.samples;
    t.window_samples += o.frame_samples;
  }
  for (TopFrame& t : out.top) {
    t.mean_share /= static_cast<double>(t.outliers);
    t.frame.share = t.mean_share;
  }
  std::stable_sort(out.top.begin(), out.top.end(), [](const TopFrame& a, const TopFrame& b) {
    return a.outliers != b.outliers ? a.outliers > b.outliers : a.mean_share > b.mean_share;
  });
  return out;
}

}  // namespace ld::model
