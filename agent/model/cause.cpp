#include "model/cause.hpp"

namespace ld::model {

namespace {

// kCauses' index of each enumerator, built once from the table so the two cannot disagree.
constexpr std::array<uint8_t, kCauseCount> rank_by_cause() {
  std::array<uint8_t, kCauseCount> ranks{};
  for (size_t i = 0; i < kCauses.size(); ++i) ranks[static_cast<size_t>(kCauses[i].cause)] = static_cast<uint8_t>(i);
  return ranks;
}
constexpr std::array<uint8_t, kCauseCount> kRankByCause = rank_by_cause();

constexpr bool every_cause_once() {
  std::array<bool, kCauseCount> seen{};
  for (const auto& info : kCauses) {
    const auto i = static_cast<size_t>(info.cause);
    if (i >= kCauseCount || seen[i]) return false;
    seen[i] = true;
  }
  return true;
}
static_assert(every_cause_once(), "kCauses must name every Cause exactly once");

int hex_digit(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

}  // namespace

const CauseInfo& cause_info(Cause cause) {
  const auto i = static_cast<size_t>(cause);
  return kCauses[kRankByCause[i < kCauseCount ? i : static_cast<size_t>(Cause::kUnknown)]];
}

std::string_view cause_id(Cause cause) { return cause_info(cause).id; }

size_t cause_rank(Cause cause) { return &cause_info(cause) - kCauses.data(); }

std::optional<Cause> parse_cause(std::string_view id) {
  for (const auto& info : kCauses)
    if (info.id == id) return info.cause;
  return std::nullopt;
}

bool cause_color_is_light(Cause cause) {
  const std::string_view hex = cause_info(cause).color;
  const auto channel = [&](size_t at) { return (hex_digit(hex[at]) * 16 + hex_digit(hex[at + 1])) / 255.0; };
  // Relative luminance (sRGB weights, without gamma: close enough to choose a text colour).
  return 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5) > 0.55;
}

}  // namespace ld::model
