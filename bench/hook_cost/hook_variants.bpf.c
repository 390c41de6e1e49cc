// SPDX-License-Identifier: GPL-2.0
/* Ways to hook a syscall, each with only the agent's target filter (a bitmap word lookup
 * that fails for every caller), to weigh the attach mechanisms against each other
 * (bench/hook_cost/run.sh).  Not part of the agent.  x86-64 syscall numbers. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

__u64 hits;

/* The agent's own target filter (ld_is_target, common.bpf.h): an idle bitmap, so it fails. */
static __always_inline int count(void)
{
	if (ld_is_target(bpf_get_current_pid_tgid() >> 32))
		__sync_fetch_and_add(&hits, 1);
	return 0;
}

/* The agent's way: a perf-event syscall tracepoint per syscall. */
SEC("tracepoint/syscalls/sys_exit_read")
int pe_exit_read(void *ctx) { return count(); }

/* One program on every syscall's exit, dispatching on the number (the sock probe's eight). */
SEC("tp_btf/sys_exit")
int BPF_PROG(raw_exit, struct pt_regs *regs, long ret)
{
	switch (regs->orig_ax) {
	case 0: case 1: case 19: case 20: case 44: case 45: case 46: case 47:
		return count();
	default:
		return 0;
	}
}

/* And on every syscall's entry (futex, the mmap family, close). */
SEC("tp_btf/sys_enter")
int BPF_PROG(raw_enter, struct pt_regs *regs, long id)
{
	switch (id) {
	case 3: case 9: case 11: case 202:
		return count();
	default:
		return 0;
	}
}

/* The socket layer's own tracepoints (6.3+): fire for socket I/O only. */
SEC("tp_btf/sock_send_length")
int BPF_PROG(sock_send, struct sock *sk, int ret, int flags) { return count(); }
SEC("tp_btf/sock_recv_length")
int BPF_PROG(sock_recv, struct sock *sk, int ret, int flags) { return count(); }
