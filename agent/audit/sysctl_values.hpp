// sysctl keys, paths and values as the audit reads and writes them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ld::audit {

// "net.core.somaxconn" -> "/proc/sys/net/core/somaxconn"
std::string sysctl_path(std::string_view key);

struct SysctlValue {
  std::string text;             // fields joined by one space: "32768 60999"
  std::vector<double> numbers;  // every field as a number; empty when any field is not one
};
SysctlValue parse_sysctl_value(std::string_view text);

}  // namespace ld::audit
