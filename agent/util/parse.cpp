#include "util/parse.hpp"

#include <cctype>
#include <utility>

#include "util/time.hpp"

namespace ld::util {

namespace {

// "30s" -> {30, "s"}; nullopt without leading digits or with more than 12 of them.
std::optional<std::pair<uint64_t, std::string>> split_number_unit(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) digits++;
  if (digits == 0 || digits > 12) return std::nullopt;
  return std::make_pair(std::stoull(text.substr(0, digits)), text.substr(digits));
}

}  // namespace

std::optional<uint64_t> parse_duration_ms(const std::string& text) {
  auto parsed = split_number_unit(text);
  if (!parsed) return std::nullopt;
  auto [value, unit] = *parsed;
  uint64_t scale = 0;
  if (unit == "ms") scale = 1;
  else if (unit == "s" || unit.empty()) scale = kMsPerSec;  // a bare number is seconds
  else if (unit == "m") scale = 60 * kMsPerSec;
  else if (unit == "h") scale = 3600 * kMsPerSec;
  if (scale == 0 || value == 0) return std::nullopt;
  return value * scale;
}

std::optional<uint64_t> parse_size(const std::string& text) {
  auto parsed = split_number_unit(text);
  if (!parsed) return std::nullopt;
  auto [value, unit] = *parsed;
  if (unit.empty()) return value;
  if (unit == "K" || unit == "k" || unit == "KiB") return value << 10;
  if (unit == "M" || unit == "m" || unit == "MiB") return value << 20;
  if (unit == "G" || unit == "g" || unit == "GiB") return value << 30;
  return std::nullopt;
}

std::optional<std::string> parse_token_source(const std::string& text) {
  if (text == "sse") return text;
  if (text.rfind("jsonl:", 0) == 0 && text.size() > 6) return text;
  return std::nullopt;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace ld::util
