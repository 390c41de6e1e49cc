// Small libbpf helpers shared by the probe loaders: RAII deleters and error translation.
#pragma once

#include <bpf/bpf.h>

#include <string>

#include "probes/probe_session.hpp"

struct ring_buffer;

namespace ld::probes {

// Deleter for a bpftool-generated skeleton: `SkelPtr<sock_bpf, sock_bpf__destroy>`.
template <typename Skel, void (*Destroy)(Skel*)>
struct SkelDeleter {
  void operator()(Skel* skel) const { Destroy(skel); }
};
template <typename Skel, void (*Destroy)(Skel*)>
using SkelPtr = std::unique_ptr<Skel, SkelDeleter<Skel, Destroy>>;

// Calls fn(key) for each key of the map `fd`, in the map's order. fn may look entries up, not
// delete them (the walk would restart).
template <typename Key, typename Fn>
void for_each_map_key(int fd, Fn&& fn) {
  Key key{}, next{};
  Key* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    key = next;
    prev = &key;
    fn(static_cast<const Key&>(key));
  }
}

// Turns a libbpf error into ProbeError (permission: the whole session fails, with the fix)
// or ProbeUnavailable (this probe cannot run here). `step` is "loading", "attaching", ...
[[noreturn]] void throw_libbpf_error(const std::string& probe, const char* step, int err);

// Does tracefs list events/CATEGORY/NAME? Probes leave out the programs of tracepoints a
// kernel lacks (config or architecture) instead of failing to load.
bool tracepoint_exists(const std::string& category, const std::string& name);

// The last warning libbpf printed on this thread (its log is quiet unless --verbose). The
// print callback is thread-safe: probes may be loaded on several threads at once.
std::string libbpf_last_error();
void set_libbpf_verbose(bool verbose);

}  // namespace ld::probes
