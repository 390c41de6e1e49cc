// Whole-file reads for /proc, /sys and cgroup files.
#pragma once

#include <string>

namespace ld::util {

// The file's contents, or "" when it cannot be read.
std::string read_file(const std::string& path);

}  // namespace ld::util
