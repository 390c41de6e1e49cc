// sock: socket sends/receives of the targets, classified in the kernel -> token timeline.
//
// Two ways in (bpf/sock.bpf.c): the socket layer's tracepoints sock_send_length and
// sock_recv_length as tp_btf programs (Linux 6.3+: socket I/O only, about half the per-call
// cost, nothing on other files' read/write), else the exits of the eight read/write/send/recv
// syscalls. ProbeOptions::hooks.sock (--sock-hook) forces either on any kernel: the root test
// of the exits, and a way back should the socket layer's tracepoints misbehave on some kernel.
#include <sys/random.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "events.h"
#include "probes/libbpf_util.hpp"
#include "probes/probe.hpp"
#include "probes/probe_session.hpp"
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
    // One key for both tries: sock_id must not depend on which way in was taken.
    sock_id_key_ = random_u64();
    const SockHook hook = ctx.options.hooks.sock;
    exits_asked_ = hook == SockHook::SyscallExits;
    if (!exits_asked_) socket_layer_ = start_socket_layer(ctx);
    if (socket_layer_) return;
    if (hook == SockHook::SocketLayer)
      throw ProbeUnavailable(
          fmt::format("the socket-layer tracepoints did not {} ({}); the "
                      "syscall exits were not asked for",
                      socket_layer_error_stage_, std::strerror(-socket_layer_error_)));
    if (int err = open_and_load(ctx, false)) throw_libbpf_error("sock", "loading", err);
    // The exits tail-call the classifier (verified once, not once per syscall).
    const int slot = 0;
    const int classifier = bpf_program__fd(skel_->progs.ld_sock_exit_common);
    if (bpf_map_update_elem(bpf_map__fd(skel_->maps.ld_sock_tail), &slot, &classifier, BPF_ANY))
      throw_libbpf_error("sock", "setting the classifier's tail call", -errno);
    if (int err = sock_bpf__attach(skel_.get())) throw_libbpf_error("sock", "attaching", err);
  }

  std::string detail() const override {
    std::string way = socket_layer_
                          ? "socket-layer tracepoints sock_send_length/sock_recv_length (tp_btf)"
                          : "read/write/readv/writev/sendto/recvfrom/sendmsg/recvmsg syscall exit tracepoints";
    // libbpf's ESRCH at load: the kernel's BTF has no such tracepoint (sock_send_length and
    // sock_recv_length came in Linux 6.3), a fact of the kernel rather than a failure.
    if (socket_layer_error_ == -ESRCH && std::string_view(socket_layer_error_stage_) == "load")
      way += " (this kernel has no socket-layer tracepoints: they came in Linux 6.3)";
    else if (socket_layer_error_)
      way += fmt::format(" (the socket-layer ones did not {}: {})", socket_layer_error_stage_,
                         std::strerror(-socket_layer_error_));
    else if (exits_asked_) way += " (asked for: the socket-layer ones not tried)";
    return way + ", payload classified in-kernel";
  }

 private:
  // Opens the object with either the socket-layer programs or the syscall exits set to load,
  // and loads it; a libbpf error code, 0 when loaded.
  int open_and_load(ProbeContext& ctx, bool socket_layer) {
    skel_.reset(sock_bpf__open_opts(ctx.open_opts));
    if (!skel_) throw_libbpf_error("sock", "opening", errno);
    use_shared_maps(skel_->obj, ctx.shared);
    // sock_id hides kernel addresses: a per-run key mixed into the struct sock pointer.
    skel_->rodata->ld_sock_id_key = sock_id_key_;
    skel_->rodata->ld_follow_children = ctx.options.follow_children;
    bpf_program* exits[] = {
        skel_->progs.ld_exit_read,    skel_->progs.ld_exit_write,   skel_->progs.ld_exit_readv,
        skel_->progs.ld_exit_writev,  skel_->progs.ld_exit_sendto,  skel_->progs.ld_exit_recvfrom,
        skel_->progs.ld_exit_sendmsg, skel_->progs.ld_exit_recvmsg, skel_->progs.ld_sock_exit_common};
    for (bpf_program* prog : exits) bpf_program__set_autoload(prog, !socket_layer);
    bpf_program__set_autoload(skel_->progs.ld_sock_send_length, socket_layer);
    bpf_program__set_autoload(skel_->progs.ld_sock_recv_length, socket_layer);
    int err = sock_bpf__load(skel_.get());
    if (err) skel_.reset();
    return err;
  }

  // Loads and attaches the socket-layer programs: true, or false (why in socket_layer_error_)
  // where this kernel has no such tracepoints or refuses them, with nothing of them left
  // loaded. A permission error is fatal, not a fallback.
  bool start_socket_layer(ProbeContext& ctx) {
    int err = open_and_load(ctx, true);
    const bool loaded = !err;
    if (loaded) err = sock_bpf__attach(skel_.get());
    if (err == -EPERM || err == -EACCES) throw_libbpf_error("sock", loaded ? "attaching" : "loading", err);
    if (err) {
      skel_.reset();
      socket_layer_error_ = err;
      socket_layer_error_stage_ = loaded ? "attach" : "load";
    }
    return !err;
  }

  SkelPtr<sock_bpf, sock_bpf__destroy> skel_;
  uint64_t sock_id_key_ = 0;
  bool socket_layer_ = false;
  bool exits_asked_ = false;  // hooks.sock forced the syscall exits
  int socket_layer_error_ = 0;
  const char* socket_layer_error_stage_ = "";
};

}  // namespace

std::unique_ptr<Probe> make_sock_probe() { return std::make_unique<SockProbe>(); }

}  // namespace ld::probes
