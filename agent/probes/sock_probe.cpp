// sock: socket sends/receives of the targets, classified in the kernel -> token timeline.
#include <sys/random.h>

#include <bpf/libbpf.h>

#include "events.h"
#include "probes/libbpf_util.hpp"
#include "probes/probe.hpp"
#include "sock.skel.h"

namespace ld::probes {
namespace {

uint64_t random_u64() {
  uint64_t value = 0;
  if (getrandom(&value, sizeof(value), 0) != sizeof(value)) value = 0x5bd1e9955bd1e995ULL;
  return value;
}

class SockProbe : public Probe {
 public:
  const void* bpf_object_elf(size_t* size) const override { return sock_bpf__elf_bytes(size); }

  void start(ProbeContext& ctx) override {
    skel_.reset(sock_bpf__open_opts(ctx.open_opts));
    if (!skel_) throw_libbpf_error("sock", "opening", errno);
    use_shared_maps(skel_->obj, ctx.shared);
    // sock_id hides kernel addresses: a per-run key mixed into the struct sock pointer.
    skel_->rodata->ld_sock_id_key = random_u64();
    skel_->rodata->ld_follow_children = ctx.options.follow_children;
    if (int err = sock_bpf__load(skel_.get())) throw_libbpf_error("sock", "loading", err);
    if (int err = sock_bpf__attach(skel_.get())) throw_libbpf_error("sock", "attaching", err);
  }
  std::string detail() const override {
    return "send/recv/read/write/sendmsg/recvmsg syscall exit tracepoints, payload classified in-kernel";
  }

 private:
  SkelPtr<sock_bpf, sock_bpf__destroy> skel_;
};

}  // namespace

std::unique_ptr<Probe> make_sock_probe() { return std::make_unique<SockProbe>(); }

}  // namespace ld::probes
