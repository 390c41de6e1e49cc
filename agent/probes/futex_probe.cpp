// futex: futex waits of the targets of at least 100 us, with the address (bpf/futex.bpf.c).
#include <unistd.h>

#include <bpf/libbpf.h>

#include <string>

#include "events.h"
#include "futex.skel.h"
#include "probes/libbpf_util.hpp"
#include "probes/probe.hpp"

namespace ld::probes {
namespace {

constexpr uint64_t kMinWaitNs = 100'000;  // shorter waits are uncontended noise

bool syscall_tracepoint_exists(const std::string& name) { return tracepoint_exists("syscalls", "sys_enter_" + name); }

class FutexProbe : public Probe {
 public:
  const void* bpf_object_elf(size_t* size) const override { return futex_bpf__elf_bytes(size); }

  void start(ProbeContext& ctx) override {
    skel_.reset(futex_bpf__open_opts(ctx.open_opts));
    if (!skel_) throw_libbpf_error("futex", "opening", errno);
    use_shared_maps(skel_->obj, ctx.shared);
    skel_->rodata->ld_futex_min_ns = kMinWaitNs;
    // futex2: futex_waitv since 5.16, futex_wait since 6.7.
    waitv_ = syscall_tracepoint_exists("futex_waitv");
    wait2_ = syscall_tracepoint_exists("futex_wait");
    if (!waitv_) {
      bpf_program__set_autoload(skel_->progs.ld_enter_futex_waitv, false);
      bpf_program__set_autoload(skel_->progs.ld_exit_futex_waitv, false);
    }
    if (!wait2_) {
      bpf_program__set_autoload(skel_->progs.ld_enter_futex_wait, false);
      bpf_program__set_autoload(skel_->progs.ld_exit_futex_wait, false);
    }
    if (int err = futex_bpf__load(skel_.get())) throw_libbpf_error("futex", "loading", err);
    if (int err = futex_bpf__attach(skel_.get())) throw_libbpf_error("futex", "attaching", err);
  }

  std::string detail() const override {
    std::string d =
        "futex syscall tracepoints: WAIT/WAIT_BITSET/WAIT_REQUEUE_PI/LOCK_PI waits "
        ">= 100 us with the address";
    if (wait2_) d += ", futex_wait";
    if (waitv_) d += ", futex_waitv";
    return d;
  }

 private:
  SkelPtr<futex_bpf, futex_bpf__destroy> skel_;
  bool waitv_ = false, wait2_ = false;
};

}  // namespace

std::unique_ptr<Probe> make_futex_probe() { return std::make_unique<FutexProbe>(); }

}  // namespace ld::probes
