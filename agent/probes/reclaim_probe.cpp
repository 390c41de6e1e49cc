// reclaim: direct reclaim, memcg reclaim, node reclaim, compaction and reclaim throttling
// stalls of the targets (bpf/reclaim.bpf.c).
#include <unistd.h>

#include <bpf/libbpf.h>

#include <string>
#include <vector>

#include "events.h"
#include "probes/libbpf_util.hpp"
#include "probes/probe.hpp"
#include "reclaim.skel.h"

namespace ld::probes {
namespace {

class ReclaimProbe : public Probe {
 public:
  const void* bpf_object_elf(size_t* size) const override { return reclaim_bpf__elf_bytes(size); }

  void start(ProbeContext& ctx) override {
    skel_.reset(reclaim_bpf__open_opts(ctx.open_opts));
    if (!skel_) throw_libbpf_error("reclaim", "opening", errno);
    use_shared_maps(skel_->obj, ctx.shared);
    auto& p = skel_->progs;
    struct Part {
      std::vector<bpf_program*> progs;
      const char* category;
      const char* name;  // the begin tracepoint (its end comes with it)
      const char* what;
    };
    const Part parts[] = {
        {{p.ld_direct_begin, p.ld_direct_end}, "vmscan", "mm_vmscan_direct_reclaim_begin", "direct"},
        {{p.ld_memcg_begin, p.ld_memcg_end}, "vmscan", "mm_vmscan_memcg_reclaim_begin", "memcg"},
        {{p.ld_node_begin, p.ld_node_end}, "vmscan", "mm_vmscan_node_reclaim_begin", "node"},
        {{p.ld_compact_begin, p.ld_compact_end}, "compaction", "mm_compaction_begin", "compaction"},
        {{p.ld_throttled}, "vmscan", "mm_vmscan_throttled", "reclaim throttling"},
    };
    for (const auto& part : parts) {
      bool have = tracepoint_exists(part.category, part.name);
      for (auto* prog : part.progs) bpf_program__set_autoload(prog, have);
      (have ? present_ : missing_) += std::string(", ") + part.what;
    }
    if (present_.empty()) throw ProbeUnavailable("no vmscan/compaction tracepoints on this kernel");
    if (int err = reclaim_bpf__load(skel_.get())) throw_libbpf_error("reclaim", "loading", err);
    if (int err = reclaim_bpf__attach(skel_.get())) throw_libbpf_error("reclaim", "attaching", err);
  }

  std::string detail() const override {
    std::string d = "vmscan/compaction tracepoints in the targets' context: " + present_.substr(2);
    if (!missing_.empty()) d += "; not on this kernel: " + missing_.substr(2);
    // Mainline has no swap-in tracepoint (swap events show as page faults, memory probe).
    d += "; swap-ins: no tracepoint on this kernel";
    return d;
  }

 private:
  SkelPtr<reclaim_bpf, reclaim_bpf__destroy> skel_;
  std::string present_, missing_;
};

}  // namespace

std::unique_ptr<Probe> make_reclaim_probe() { return std::make_unique<ReclaimProbe>(); }

}  // namespace ld::probes
