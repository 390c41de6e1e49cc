#include "probes/process_search.hpp"

#include <map>
#include <mutex>

#include <fmt/format.h>

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

}  // namespace ld::probes
