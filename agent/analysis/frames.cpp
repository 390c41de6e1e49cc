// Frames of slow tokens against the typical token's (frames.hpp).
#include "analysis/frames.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "model/frames.hpp"

namespace ld::analysis {
namespace {

// A function as the report names it: Python (function, file) or native (function, file).
struct FuncKey {
  bool python = false;
  std::string func, file;
  bool operator<(const FuncKey& o) const { return std::tie(python, func, file) < std::tie(o.python, o.func, o.file); }
};

// One sample's functions, each once (recursion counts once), with the depth of its innermost
// occurrence and its line (Python).
struct SampleFuncs {
  struct Item {
    size_t func = 0;  // index into Frames::funcs
    int32_t line = -1;
    uint32_t depth = 0;
  };
  std::vector<Item> items;
  size_t self = SIZE_MAX;  // the innermost Python frame, else the innermost named native frame
};

struct Tally {
  uint64_t samples = 0;  // with frames
  struct Func {
    uint64_t count = 0, self = 0, depth_sum = 0;
    std::map<int32_t, uint64_t> lines;
  };
  std::unordered_map<size_t, Func> funcs;
  bool python = false;  // some sample had Python frames
};

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Calls fn(sample) for each on-CPU sample of thread `tid` in [a, b).
template <class Fn>
void for_each_sample(const EvidenceStore& store, uint32_t tid, uint64_t a, uint64_t b, Fn fn) {
  const ThreadEvidence* t = store.thread(tid);
  if (!t || a >= b) return;
  const auto& samples = t->samples;
  auto it =
      std::lower_bound(samples.begin(), samples.end(), a, [](const CpuSample& s, uint64_t ts) { return s.ts_ns < ts; });
  for (; it != samples.end() && it->ts_ns < b; ++it) fn(*it);
}

class Frames {
 public:
  explicit Frames(const EvidenceStore& store) : store_(store) {}

  // Samples of thread `tid` in [a, b) into `tally`.
  void add_window(Tally& tally, uint32_t tid, uint64_t a, uint64_t b) {
    for_each_sample(store_, tid, a, b, [&](const CpuSample& sample) {
      const SampleFuncs* f = of(sample.frames);
      if (!f || f->items.empty()) return;
      tally.samples++;
      for (const auto& item : f->items) {
        Tally::Func& fn = tally.funcs[item.func];
        fn.count++;
        fn.depth_sum += item.depth;
        if (item.func == f->self) fn.self++;
        if (funcs_[item.func].python) {
          fn.lines[item.line]++;
          tally.python = true;
        }
      }
    });
  }

  model::FrameShare share_of(size_t func, const Tally::Func& fn, const Tally& tally, bool self) const {
    const FuncKey& k = funcs_[func];
    model::FrameShare s;
    s.python = k.python;
    s.function = k.func;
    s.where = k.python ? base_name(k.file) : k.file;
    if (k.python && !fn.lines.empty()) {
      auto line = std::max_element(fn.lines.begin(), fn.lines.end(),
                                   [](const auto& x, const auto& y) { return x.second < y.second; });
      if (line->first >= 0) s.where += fmt::format(":{}", line->first);
    }
    s.samples = self ? fn.self : fn.count;
    s.share = tally.samples ? static_cast<double>(s.samples) / static_cast<double>(tally.samples) : 0.0;
    return s;
  }

 private:
  const SampleFuncs* of(uint16_t id) {
    if (id == 0) return nullptr;
    auto [it, added] = cache_.try_emplace(id);
    if (!added) return &it->second;
    const SampleFrames* key = store_.sample_frames(id);
    if (!key) return &it->second;
    SampleFuncs& out = it->second;
    std::set<size_t> seen;
    uint32_t depth = 0;
    auto add = [&](const std::vector<UserFrame>* stack) {
      if (!stack) return;
      for (const UserFrame& f : *stack) {
        const uint32_t d = depth++;
        if (f.func.empty() || f.func == "?") continue;
        const size_t idx = intern({f.python, f.func, f.where});
        if (out.self == SIZE_MAX) out.self = idx;
        if (seen.insert(idx).second) out.items.push_back({idx, f.line, d});
      }
    };
    // Python frames first: in a Python process the native stack is mostly the interpreter.
    if (key->pystack_id) add(store_.pystack(key->tgid, key->pystack_id));
    if (key->ustack_id >= 0) add(store_.ustack(key->tgid, key->ustack_id));
    return &out;
  }

  size_t intern(FuncKey k) {
    auto [it, added] = ids_.try_emplace(k, funcs_.size());
    if (added) funcs_.push_back(std::move(k));
    return it->second;
  }

  const EvidenceStore& store_;
  std::unordered_map<uint16_t, SampleFuncs> cache_;
  std::map<FuncKey, size_t> ids_;
  std::vector<FuncKey> funcs_;
};

// The outliers' samples as folded stacks (model::FlameProfile): counted per sample_frames id,
// folded once per id, then merged by label (ids of other processes can name the same stack).
class Flame {
 public:
  Flame(const EvidenceStore& store, const FrameOptions& options) : store_(store), options_(options) {}

  // The samples of thread `tid` in [a, b).
  void add_window(uint32_t tid, uint64_t a, uint64_t b) {
    for_each_sample(store_, tid, a, b, [&](const CpuSample& s) {
      if (s.frames != 0) counts_[s.frames]++;
    });
  }

  model::FlameProfile profile() const {
    std::map<std::pair<bool, std::vector<std::string>>, uint64_t> merged;
    for (const auto& [id, count] : counts_) {
      model::FlameStack stack = folded(id);
      if (!stack.frames.empty()) merged[{stack.python, std::move(stack.frames)}] += count;
    }
    model::FlameProfile out;
    for (auto& [key, count] : merged) {
      out.stacks.push_back({key.second, key.first, count});
      out.samples += count;
    }
    std::stable_sort(out.stacks.begin(), out.stacks.end(),
                     [](const model::FlameStack& x, const model::FlameStack& y) { return x.samples > y.samples; });
    if (out.stacks.size() > options_.flame_stacks) {
      model::FlameStack other{{model::kOtherStacks}, false, 0};
      for (size_t i = options_.flame_stacks; i < out.stacks.size(); ++i) other.samples += out.stacks[i].samples;
      out.stacks.resize(options_.flame_stacks);
      out.stacks.push_back(std::move(other));
    }
    return out;
  }

 private:
  // A sample's stack root first: its Python frames where it has them (its native stack is then
  // mostly the interpreter), else its native frames; the innermost flame_depth of them.
  model::FlameStack folded(uint16_t id) const {
    model::FlameStack out;
    const SampleFrames* key = store_.sample_frames(id);
    if (!key) return out;
    const std::vector<UserFrame>* stack = key->pystack_id ? store_.pystack(key->tgid, key->pystack_id) : nullptr;
    if (!stack || stack->empty()) stack = key->ustack_id >= 0 ? store_.ustack(key->tgid, key->ustack_id) : nullptr;
    if (!stack || stack->empty()) return out;
    out.python = stack->front().python;
    for (size_t i = std::min(stack->size(), options_.flame_depth); i-- > 0;) out.frames.push_back(label(stack->at(i)));
    return out;
  }

  static std::string label(const UserFrame& f) {
    model::FrameShare share;
    share.python = f.python;
    share.function = f.func.empty() || f.func == "?" ? model::kUnknownFrame : f.func;
    share.where = f.python ? base_name(f.where) : f.where;
    if (f.python && f.line >= 0) share.where += fmt::format(":{}", f.line);
    return model::frame_label(share);
  }

  const EvidenceStore& store_;
  const FrameOptions& options_;
  std::map<uint16_t, uint64_t> counts_;  // samples per EvidenceStore::sample_frames id
};

// Each outlier's window on its thread, overlapping windows of a thread merged: a sample two
// outliers share (requests batched on one thread) is one sample of the flame graph.
model::FlameProfile outlier_flame(const model::Report& report, const EvidenceStore& store,
                                  const FrameOptions& options) {
  std::map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> windows;
  for (const model::Outlier& o : report.outliers)
    if (o.tid != 0 && o.start_mono_ns < o.end_mono_ns) windows[o.tid].push_back({o.start_mono_ns, o.end_mono_ns});
  Flame flame(store, options);
  for (auto& [tid, list] : windows) {
    std::sort(list.begin(), list.end());
    uint64_t a = list.front().first, b = list.front().second;
    for (const auto& [start, end] : list) {
      if (start > b) {
        flame.add_window(tid, a, b);
        a = start;
      }
      b = std::max(b, end);
    }
    flame.add_window(tid, a, b);
  }
  return flame.profile();
}

// The typical windows: every TPOT gap that is not an outlier.
Tally typical_tally(const model::Report& report, Frames& frames) {
  std::set<std::pair<std::string, uint64_t>> outlier_gaps;
  for (const model::Outlier& o : report.outliers)
    if (o.kind == model::WindowKind::kTpot) outlier_gaps.insert({o.request, o.token_index});
  Tally typical;
  for (const model::RequestRow& row : report.request_rows) {
    if (row.token_tid.size() != row.token_mono_ns.size()) continue;
    for (size_t i = 1; i < row.token_mono_ns.size(); ++i) {
      if (outlier_gaps.count({row.id, i}) || row.token_tid[i] == 0) continue;
      frames.add_window(typical, row.token_tid[i], row.token_mono_ns[i - 1], row.token_mono_ns[i]);
    }
  }
  return typical;
}

// The typical token's hottest functions: by self share (inclusive shares are all the outermost
// frames' 100%).
std::vector<model::FrameShare> hottest(const Tally& typical, const Frames& frames, size_t max_frames) {
  std::vector<model::FrameShare> hot;
  for (const auto& [func, fn] : typical.funcs)
    if (fn.self > 0) hot.push_back(frames.share_of(func, fn, typical, /*self=*/true));
  std::sort(hot.begin(), hot.end(), [&](const model::FrameShare& x, const model::FrameShare& y) {
    if (x.python != y.python && typical.python) return x.python;
    return x.share != y.share ? x.share > y.share : x.function < y.function;
  });
  if (hot.size() > max_frames) hot.resize(max_frames);
  for (auto& h : hot) h.typical_share = h.share;
  return hot;
}

double share_in(const Tally& tally, size_t func) {
  auto it = tally.funcs.find(func);
  return it == tally.funcs.end() || tally.samples == 0
             ? 0.0
             : static_cast<double>(it->second.count) / static_cast<double>(tally.samples);
}

// An outlier's functions with more of its samples than the typical token's, most excess first.
void outlier_frames(model::Outlier& o, const Tally& typical, Frames& frames, const FrameOptions& options) {
  Tally w;
  frames.add_window(w, o.tid, o.start_mono_ns, o.end_mono_ns);
  o.frame_samples = w.samples;
  if (w.samples < options.min_samples) return;
  struct Ranked {
    model::FrameShare share;
    double excess = 0, depth = 0;
  };
  std::vector<Ranked> ranked;
  for (const auto& [func, fn] : w.funcs) {
    Ranked r{frames.share_of(func, fn, w, /*self=*/false), 0, 0};
    r.share.typical_share = share_in(typical, func);
    r.excess = r.share.share - r.share.typical_share;
    r.depth = static_cast<double>(fn.depth_sum) / static_cast<double>(fn.count);
    if (r.excess >= options.min_excess) ranked.push_back(std::move(r));
  }
  // Most excess first; a caller and its callee with the same excess: the callee (it names the
  // code, its caller only the way there).
  std::sort(ranked.begin(), ranked.end(), [&](const Ranked& x, const Ranked& y) {
    if (x.share.python != y.share.python && w.python) return x.share.python;
    const double ex = std::round(x.excess * 50), ey = std::round(y.excess * 50);  // 2% steps
    if (ex != ey) return ex > ey;
    if (x.depth != y.depth) return x.depth < y.depth;
    return x.share.function < y.share.function;
  });
  for (size_t i = 0; i < ranked.size() && o.frames.size() < options.max_frames; ++i)
    o.frames.push_back(std::move(ranked[i].share));
}

}  // namespace

void attach_frames(model::Report& report, const EvidenceStore& store, const FrameOptions& options) {
  if (!store.has_frames()) return;
  Frames frames(store);
  const Tally typical = typical_tally(report, frames);
  report.typical.frame_samples = typical.samples;
  report.typical.frames = hottest(typical, frames, options.max_frames);
  report.outlier_flame = outlier_flame(report, store, options);
  for (model::Outlier& o : report.outliers)
    if (o.tid != 0) outlier_frames(o, typical, frames, options);
}

}  // namespace ld::analysis
