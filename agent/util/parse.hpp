// Parsing of flag values shared by the subcommands. In ld_core so the unit tier tests it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ld::util {

// "500ms", "30s", "5m", "1h" (a bare number is seconds) -> milliseconds; nullopt when
// malformed or zero.
std::optional<uint64_t> parse_duration_ms(const std::string& text);
// "16M", "512K", "1G", "1048576" -> bytes; nullopt when malformed.
std::optional<uint64_t> parse_size(const std::string& text);
// "sse" or "jsonl:FILE"; nullopt when malformed.
std::optional<std::string> parse_token_source(const std::string& text);
// "a,b,,c" -> {"a","b","c"}
std::vector<std::string> split_list(const std::string& text);

}  // namespace ld::util
