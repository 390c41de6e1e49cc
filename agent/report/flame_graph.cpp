#include "report/flame_graph.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "report/svg.hpp"

namespace ld::report {
namespace {

constexpr double kRowHeight = 18;
constexpr double kCharWidth = 6.6;  // a generous mean advance of the 11 px sans-serif labels
constexpr const char* kRootLabel = "all samples of the slow tokens";

// The call tree: the stacks' common prefixes merged (a Python and a native frame of the same
// label stay apart).
struct Node {
  std::string label;
  bool python = false;
  uint64_t samples = 0;
  std::map<std::pair<bool, std::string>, size_t> children;  // -> Tree::nodes
};

struct Tree {
  std::vector<Node> nodes;  // nodes[0]: the root

  explicit Tree(const model::FlameProfile& flame) {
    nodes.push_back({kRootLabel, false, 0, {}});
    for (const model::FlameStack& s : flame.stacks) add(s);
  }

  void add(const model::FlameStack& s) {
    size_t at = 0;
    nodes[at].samples += s.samples;
    for (const std::string& label : s.frames) {
      const auto [it, added] = nodes[at].children.try_emplace({s.python, label}, nodes.size());
      const size_t child = it->second;  // read before push_back moves the maps
      if (added) nodes.push_back({label, s.python, 0, {}});
      at = child;
      nodes[at].samples += s.samples;
    }
  }

  size_t subtree_size(size_t n) const {
    size_t count = 1;
    for (const auto& [key, child] : nodes[n].children) count += subtree_size(child);
    return count;
  }

  // Children by samples, most first, then by label: a fixed order for a given profile.
  std::vector<size_t> sorted_children(size_t n) const {
    std::vector<size_t> out;
    for (const auto& [key, child] : nodes[n].children) out.push_back(child);
    std::stable_sort(out.begin(), out.end(), [&](size_t a, size_t b) { return nodes[a].samples > nodes[b].samples; });
    return out;
  }
};

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// The function of a label, without the " (file:line)" or " (lib.so)" that frame_label adds:
// one colour per function wherever and at whatever line it ran.
std::string_view function_of(std::string_view label) {
  if (label.empty() || label.back() != ')') return label;
  const size_t open = label.rfind(" (");
  return open == std::string_view::npos ? label : label.substr(0, open);
}

std::string fill_of(const Node& n, bool root) {
  if (root) return "#d0d4d9";
  const std::string_view fn = function_of(n.label);
  if (fn == model::kOtherStacks) return "#a9afb6";
  if (fn == model::kUnknownFrame) return "#c9c9c9";
  const uint64_t h = fnv1a(fn);
  const auto part = [&](int shift) { return static_cast<double>((h >> shift) & 0xff) / 255.0; };
  int r, g, b;
  if (n.python) {  // blues
    r = 95 + static_cast<int>(55 * part(16));
    g = 160 + static_cast<int>(60 * part(8));
    b = 215 + static_cast<int>(40 * part(0));
  } else {  // the classic warm palette: reds to yellows
    r = 205 + static_cast<int>(50 * part(16));
    g = 60 + static_cast<int>(170 * part(8));
    b = static_cast<int>(55 * part(0));
  }
  return fmt::format("#{:02x}{:02x}{:02x}", r, g, b);
}

// A box to draw: node `node` at [x, x + w) of row `depth`.
struct Box {
  size_t node = 0, depth = 0;
  double x = 0, w = 0;
};

// The boxes of node n and of what it called, depth first; the narrow ones left out (and
// counted) with everything under them.
void lay_out(const Tree& tree, const Box& box, double min_width, std::vector<Box>& boxes, size_t& dropped) {
  boxes.push_back(box);
  const Node& node = tree.nodes[box.node];
  double at = box.x;
  for (size_t child : tree.sorted_children(box.node)) {
    const double w = box.w * static_cast<double>(tree.nodes[child].samples) / static_cast<double>(node.samples);
    if (w < min_width) dropped += tree.subtree_size(child);
    else lay_out(tree, {child, box.depth + 1, at, w}, min_width, boxes, dropped);
    at += w;
  }
}

void draw(Svg& svg, const Tree& tree, const Box& box) {
  const Node& node = tree.nodes[box.node];
  const double y = static_cast<double>(box.depth) * kRowHeight;
  const double pct = 100.0 * static_cast<double>(node.samples) / static_cast<double>(tree.nodes[0].samples);
  svg.begin_group(fmt::format("{} — {} samples ({:.1f}%)", node.label, node.samples, pct));
  // 1 px less than the share: a gap between neighbours without a stroke.
  svg.rect(box.x, y, std::max(box.w - 1, 0.5), kRowHeight - 1, fill_of(node, box.node == 0));
  const auto chars = static_cast<size_t>(std::max(box.w - 6, 0.0) / kCharWidth);
  if (const std::string label = fit_text(node.label, chars); !label.empty()) svg.text(box.x + 3, y + 12.5, label);
  svg.end_group();
}

}  // namespace

FlameGraph flame_graph(const model::FlameProfile& flame, int width) {
  FlameGraph out;
  const Tree tree(flame);
  if (tree.nodes[0].samples == 0) return out;
  std::vector<Box> boxes;
  lay_out(tree, {0, 0, 0, static_cast<double>(width)}, kMinBoxShare * width, boxes, out.dropped);
  for (const Box& b : boxes) out.depth = std::max(out.depth, b.depth);
  out.boxes = boxes.size();
  Svg svg(width, static_cast<int>(static_cast<double>(out.depth + 1) * kRowHeight),
          "Flame graph of the slow tokens' on-CPU samples, root at the top");
  for (const Box& b : boxes) draw(svg, tree, b);
  out.svg = svg.str();
  return out;
}

}  // namespace ld::report
