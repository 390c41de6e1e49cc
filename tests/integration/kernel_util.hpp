// What the kernel under test offers the root tests: one reason to skip where BPF cannot run
// at all, and which optional hooks it has (the probes fall back where it lacks one).
#pragma once

#include <unistd.h>

#include <bpf/btf.h>

#include <memory>
#include <string>

#include "probes/probe_session.hpp"

namespace ld::test {

// Why no BPF test can run here, or "" (root, BTF and the features every probe needs).
inline std::string bpf_skip_reason() {
  if (geteuid() != 0) return "needs root (CAP_BPF, CAP_PERFMON) to load BPF programs";
  if (std::string missing = ld::probes::missing_kernel_feature(); !missing.empty())
    return "this kernel lacks " + missing;
  return "";
}

// Does this kernel have the typed tracepoint NAME (its BTF type btf_trace_NAME)? The socket
// layer's came in Linux 6.3: older kernels get the sock probe's syscall exits instead.
inline bool kernel_has_typed_tracepoint(const std::string& name) {
  static std::unique_ptr<btf, void (*)(btf*)> vmlinux(btf__load_vmlinux_btf(), btf__free);
  return vmlinux && btf__find_by_name_kind(vmlinux.get(), ("btf_trace_" + name).c_str(), BTF_KIND_TYPEDEF) >= 0;
}

}  // namespace ld::test
