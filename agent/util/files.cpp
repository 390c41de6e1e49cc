#include "util/files.hpp"

#include <fstream>
#include <sstream>

namespace ld::util {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ld::util
