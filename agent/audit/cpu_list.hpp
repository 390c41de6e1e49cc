// Kernel CPU/node lists: "0-3,8,10-11" (cpuset.cpus, /sys/.../online, Cpus_allowed_list).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace ld::audit {

// The listed numbers, ascending; nullopt when malformed; "" is an empty list.
std::optional<std::vector<int>> parse_cpu_list(std::string_view text);

}  // namespace ld::audit
