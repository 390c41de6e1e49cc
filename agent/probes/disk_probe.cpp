// disk: fsync-family times with the file, block request latency, dirty throttling and long
// writes to regular files of the targets (bpf/disk.bpf.c).
#include <unistd.h>

#include <bpf/libbpf.h>

#include <string>
#include <vector>

#include "disk.skel.h"
#include "events.h"
#include "probes/libbpf_util.hpp"
#include "probes/probe.hpp"

namespace ld::probes {
namespace {

class DiskProbe : public Probe {
 public:
  const void* bpf_object_elf(size_t* size) const override { return disk_bpf__elf_bytes(size); }

  void start(ProbeContext& ctx) override {
    skel_.reset(disk_bpf__open_opts(ctx.open_opts));
    if (!skel_) throw_libbpf_error("disk", "opening", errno);
    use_shared_maps(skel_->obj, ctx.shared);
    auto& p = skel_->progs;
    // Parts whose tracepoints this kernel may lack (config or architecture) are left out
    // and named in detail().
    struct Optional {
      std::vector<bpf_program*> progs;
      const char* category;
      const char* name;
      const char* what;
    };
    const Optional optional[] = {
        {{p.ld_enter_sync_file_range, p.ld_exit_sync_file_range},
         "syscalls",
         "sys_enter_sync_file_range",
         "sync_file_range"},
        {{p.ld_enter_syncfs, p.ld_exit_syncfs}, "syscalls", "sys_enter_syncfs", "syncfs"},
        {{p.ld_bio_queue}, "block", "block_bio_queue", "bio owners"},
        {{p.ld_rq_issue, p.ld_rq_complete}, "block", "block_rq_issue", "block requests"},
        {{p.ld_dirty_throttle}, "writeback", "balance_dirty_pages", "dirty throttling"},
    };
    for (const auto& o : optional) {
      if (tracepoint_exists(o.category, o.name)) continue;
      for (auto* prog : o.progs) bpf_program__set_autoload(prog, false);
      missing_ += std::string(missing_.empty() ? "" : ", ") + o.what;
    }
    if (int err = disk_bpf__load(skel_.get())) throw_libbpf_error("disk", "loading", err);
    if (int err = disk_bpf__attach(skel_.get())) throw_libbpf_error("disk", "attaching", err);
  }

  std::string detail() const override {
    std::string d =
        "fsync/fdatasync/sync_file_range/msync/sync/syncfs syscall tracepoints with "
        "the file's path (dentry names), block_rq_issue/complete of requests issued "
        "or queued by the targets, writeback/balance_dirty_pages pauses, writes to regular files "
        "(write/pwrite64/writev/pwritev/pwritev2) of 100 us or more with the file";
    if (!missing_.empty()) d += "; not on this kernel: " + missing_;
    return d;
  }

 private:
  SkelPtr<disk_bpf, disk_bpf__destroy> skel_;
  std::string missing_;
};

}  // namespace

std::unique_ptr<Probe> make_disk_probe() { return std::make_unique<DiskProbe>(); }

}  // namespace ld::probes
