#include "probes/process_search.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "host/host_facts.hpp"
#include "probes/elf_symbols.hpp"
#include "util/files.hpp"

namespace ld::probes {
namespace {

struct MapsRead {
  uint64_t taken_ns = 0;
  std::string text;
};

std::mutex g_mu;
std::map<uint32_t, MapsRead> g_reads;  // only reads younger than kMapsFreshNs are kept
uint64_t g_files_read = 0;

}  // namespace

std::string read_process_maps(uint32_t tgid, uint64_t now) {
  std::lock_guard lock(g_mu);
  // Probes start in parallel, each with its own clock reading: `now` may be a little behind a
  // read another probe made, which is as fresh.
  std::erase_if(g_reads, [&](const auto& kv) { return kv.second.taken_ns + kMapsFreshNs < now; });
  if (auto it = g_reads.find(tgid); it != g_reads.end()) return it->second.text;
  MapsRead read{now, util::read_file(fmt::format("/proc/{}/maps", tgid))};
  g_files_read++;
  return g_reads.emplace(tgid, std::move(read)).first->second.text;
}

uint64_t process_maps_reads() {
  std::lock_guard lock(g_mu);
  return g_files_read;
}

bool past_search_window(uint32_t tgid, uint64_t now) {
  auto info = host::read_process(static_cast<int>(tgid));
  return !info || !info->start_mono_ns || now - info->start_mono_ns > kSearchForNs;
}

bool is_cuda_driver(const std::string& path) {
  return std::filesystem::path(path).filename().string().rfind("libcuda.so", 0) == 0;
}
bool is_cuda_runtime(const std::string& path) {
  return std::filesystem::path(path).filename().string().rfind("libcudart.so", 0) == 0;
}

namespace {

// The files of a maps text that `wanted` accepts (given the path and whether it is the first file
// mapped: the executable), each once, in the order mapped (deleted files left out).
template <typename Pred>
std::vector<std::string> mapped_files(const std::string& maps_text, Pred&& wanted) {
  std::vector<std::string> out;
  bool first = true;
  for (const MapsEntry& e : parse_maps(maps_text)) {
    if (e.path.empty() || e.path[0] != '/' || e.path.find(" (deleted)") != std::string::npos) continue;
    if (wanted(e.path, first) && std::find(out.begin(), out.end(), e.path) == out.end()) out.push_back(e.path);
    first = false;
  }
  return out;
}

}  // namespace

std::vector<std::string> cuda_libraries(const std::string& maps_text) {
  return mapped_files(maps_text,
                      [](const std::string& path, bool) { return is_cuda_driver(path) || is_cuda_runtime(path); });
}

bool is_openssl_library(const std::string& path) {
  return std::filesystem::path(path).filename().string().rfind("libssl.so", 0) == 0;
}

std::vector<std::string> openssl_candidates(const std::string& maps_text) {
  return mapped_files(maps_text,
                      [](const std::string& path, bool executable) { return executable || is_openssl_library(path); });
}

}  // namespace ld::probes
