// Shared by the probes that attach uprobes per process to the exported functions of a library
// the process maps (cuda, tls): the per-process state, attaching an entry point's pair of
// probes, detaching, and the per-process part of their detail().
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "probes/process_search.hpp"

struct bpf_link;
struct bpf_program;

namespace ld::probes {

// A library a process maps, and what of it is attached.
struct UprobeLibrary {
  std::string path;  // as in /proc/PID/maps
  size_t attached = 0;
  std::string error;
};

// A traced process: when it is looked at again (process_search.hpp), its libraries and links.
struct UprobeProc {
  uint32_t tgid = 0;
  uint64_t added_ns = 0, next_search_ns = 0;
  uint32_t searches = 0;
  bool searching = true, gone = false;
  std::vector<UprobeLibrary> libs;
  std::vector<bpf_link*> links;
};

// The symbols of a table of entry points (structs with a `symbol`), as a set for
// find_dynamic_symbols.
template <typename EntryPoints>
std::set<std::string> entry_point_symbols(const EntryPoints& table) {
  std::set<std::string> out;
  for (const auto& ep : table) out.insert(ep.symbol);
  return out;
}

// Attaches `entry` at `offset` of `file` in process `p`, and first `ret` as its return probe
// when not null (a thread entering the function between the two attaches must not leave a call
// open that no return ends), both with `cookie`. 0, or the -errno of the failed attach with
// nothing of this entry point left attached.
int attach_entry_point(UprobeProc& p, const std::string& file, uint64_t offset, uint64_t cookie, bpf_program* entry,
                       bpf_program* ret);

void detach(UprobeProc& p);

// The process's /proc/PID/maps (process_search.hpp); "" when it is gone, then marked so.
std::string maps_or_gone(UprobeProc& p, uint64_t now);

// No process of `procs` (a map by tgid; at least one) has a library found, and each has run past
// the window in which servers load them (process_search.hpp): the probe has nothing to do.
template <typename Procs>
bool nothing_found_for_good(const Procs& procs, uint64_t now) {
  if (procs.empty()) return false;
  for (const auto& [tgid, p] : procs)
    if (!p.libs.empty() || !past_search_window(tgid, now)) return false;
  return true;
}

// Whether any process of `procs` is still looked at again.
template <typename Procs>
bool any_searching(const Procs& procs) {
  for (const auto& [tgid, p] : procs)
    if (p.searching) return true;
  return false;
}

// Whether any process of `procs` (a map by tgid) has a library found.
template <typename Procs>
bool any_library_found(const Procs& procs) {
  for (const auto& [tgid, p] : procs)
    if (!p.libs.empty()) return true;
  return false;
}

// Detaches a process that has exited; marks it gone.
void forget_if_exited(UprobeProc& p);

// The reason when libraries were found but no entry point of any could be attached (no uprobe
// support): the probe cannot work here. `procs`: a map by tgid of UprobeProc (or derived).
template <typename Procs>
std::optional<std::string> every_attach_failed(const Procs& procs) {
  std::optional<std::string> why;
  for (const auto& [tgid, p] : procs)
    for (const UprobeLibrary& l : p.libs) {
      if (l.attached) return std::nullopt;
      if (!why) why = l.path + ": " + l.error;
    }
  return why;
}

// "PATH (N entry points), PATH (N entry points; ERROR)"; "" when none was found.
std::string describe_libraries(const UprobeProc& p);

}  // namespace ld::probes
