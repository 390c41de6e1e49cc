// SPDX-License-Identifier: GPL-2.0
/* tcp: connection churn of the targets -- set-up, TIME_WAIT, close -- and retransmits.
 *
 * sock:inet_sock_set_state fires in softirq context for most transitions (the ACK that
 * completes a handshake, the FIN that ends FIN_WAIT2), where `current` is whatever task
 * was interrupted; and a softirq running in a target's context (loopback delivers packets
 * in the sender's context) handles OTHER processes' sockets.  So the tgid filter alone
 * cannot work here.  A transition belongs to a target when:
 *   - it is one only a syscall of the owner makes (connect, listen, close, shutdown: see
 *     ld_tcp_by_syscall) and `current` is a target: the socket is then remembered in
 *     ld_tcp_socks, so its later softirq transitions match too;
 *   - or the socket is in ld_tcp_socks;
 *   - or its local port is a listening port of a target (ld_tcp_ports, filled by user
 *     space from /proc/PID/net/tcp{,6} + /proc/PID/fd, and here at listen()): the server
 *     side of connections the target has not touched yet (SYN_RECV -> ESTABLISHED happens
 *     before accept()).
 * Only transitions that matter for churn are emitted: about two records per connection.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define LD_IPPROTO_TCP 6

/* Set by user space before load: hides kernel addresses in sock_id. */
const volatile __u64 ld_sock_id_key = 0;

/* Listening ports (host order) of the targets; user space adds and removes them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u16);
	__type(value, __u8);
} ld_tcp_ports SEC(".maps");

/* Sockets (struct sock address) a target touched; removed at CLOSE.  LRU: sockets that
 * die without a traced CLOSE must not fill it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u8);
} ld_tcp_socks SEC(".maps");

static __always_inline __u64 ld_tcp_sock_id(const void *sk)
{
	return ((__u64)sk ^ ld_sock_id_key) * 0x9E3779B97F4A7C15ULL;
}

/* Transitions made only by a syscall of the socket's owner, never by a softirq:
 * connect() CLOSE -> SYN_SENT, listen() CLOSE -> LISTEN and back at close(), close()/shutdown()
 * ESTABLISHED -> FIN_WAIT1 and CLOSE_WAIT -> LAST_ACK.  Only for these is `current` the
 * owner (a BPF tracepoint program cannot tell softirq context: perf overwrites the
 * trace_entry header, flags included, before the program runs). */
static __always_inline int ld_tcp_by_syscall(int old, int new)
{
	return (old == LD_TCP_CLOSE && (new == LD_TCP_SYN_SENT || new == LD_TCP_LISTEN)) ||
	       (old == LD_TCP_LISTEN && new == LD_TCP_CLOSE) ||
	       (old == LD_TCP_ESTABLISHED && new == LD_TCP_FIN_WAIT1) ||
	       (old == LD_TCP_CLOSE_WAIT && new == LD_TCP_LAST_ACK);
}

/* LD_TCP_F_* match flags, 0 when the socket is not a target's.  in_target: a syscall
 * transition by a target (the socket is remembered from now on). */
static __always_inline __u16 ld_tcp_match(const void *sk, __u16 lport, int in_target)
{
	__u64 key = (__u64)sk;
	__u16 flags = 0;
	__u8 one = 1;

	if (in_target) {
		bpf_map_update_elem(&ld_tcp_socks, &key, &one, BPF_ANY);
		flags |= LD_TCP_F_TARGET_SOCK;
	} else if (bpf_map_lookup_elem(&ld_tcp_socks, &key)) {
		flags |= LD_TCP_F_TARGET_SOCK;
	}
	if (lport && bpf_map_lookup_elem(&ld_tcp_ports, &lport))
		flags |= LD_TCP_F_LISTEN_PORT;
	return flags;
}

/* A target's listen()/close() of a listener: keep ld_tcp_ports current at once rather
 * than at user space's next /proc scan, which would miss the first connections. */
static __always_inline void ld_tcp_track_listener(__u16 port, int old, int new)
{
	__u8 one = 1;

	if (new == LD_TCP_LISTEN)
		bpf_map_update_elem(&ld_tcp_ports, &port, &one, BPF_ANY);
	else if (old == LD_TCP_LISTEN)
		bpf_map_delete_elem(&ld_tcp_ports, &port);
}

/* The newstate to report for old -> new, or 0 to stay quiet. */
static __always_inline __u16 ld_tcp_interesting(const struct sock *sk, int old, int new)
{
	if (new == LD_TCP_ESTABLISHED)
		return (old == LD_TCP_SYN_RECV || old == LD_TCP_SYN_SENT) ? new : 0;
	if (new != LD_TCP_CLOSE)
		return 0;
	/* tcp_time_wait() replaces the socket by a timewait mini-socket and then tcp_done()s
	 * it: FIN_WAIT2/CLOSING -> CLOSE with no error.  A reset or a timeout also ends in
	 * CLOSE from those states but sets sk_err first (tcp_reset, tcp_write_err). */
	if ((old == LD_TCP_FIN_WAIT2 || old == LD_TCP_CLOSING) && !BPF_CORE_READ(sk, sk_err))
		return LD_TCP_TIME_WAIT;
	return new;
}

SEC("tracepoint/sock/inet_sock_set_state")
int ld_tcp_set_state(struct trace_event_raw_inet_sock_set_state *ctx)
{
	int old = ctx->oldstate, new = ctx->newstate;
	int in_target = ld_tcp_by_syscall(old, new) && ld_is_target(bpf_get_current_pid_tgid() >> 32);
	const void *sk = ctx->skaddr;
	struct ld_tcp_state *e;
	__u16 flags, report;
	__u64 key;

	if (ctx->protocol != LD_IPPROTO_TCP)
		return 0;
	if (in_target)
		ld_tcp_track_listener(ctx->sport, old, new);
	flags = ld_tcp_match(sk, ctx->sport, in_target);
	if (!flags)
		return 0;
	report = ld_tcp_interesting(sk, old, new);
	if (new == LD_TCP_CLOSE) {
		key = (__u64)sk;
		bpf_map_delete_elem(&ld_tcp_socks, &key);
	}
	if (!report)
		return 0;
	e = ld_reserve(LD_PROBE_TCP, LD_EV_TCP_STATE, sizeof(*e));
	if (!e)
		return 0;
	e->sock_id = ld_tcp_sock_id(sk);
	e->lport = ctx->sport; /* the tracepoint gives host order */
	e->rport = ctx->dport;
	e->oldstate = old;
	e->newstate = report;
	e->family = ctx->family;
	e->flags = flags | (report == LD_TCP_TIME_WAIT ? LD_TCP_F_TW_INFERRED : 0);
	e->_pad = 0;
	ld_commit(LD_PROBE_TCP, e);
	return 0;
}

/* tcp_retransmit_skb got its own event class (adding `err`) in recent kernels; before, it
 * used tcp_event_sk_skb, whose leading fields are the same.  Read through whichever exists. */
struct trace_event_raw_tcp_event_sk_skb___o {
	const void *skaddr;
	int state;
	__u16 sport;
	__u16 dport;
} __attribute__((preserve_access_index));

static __always_inline int ld_tcp_emit_retrans(const void *sk, int state, __u16 sport, __u16 dport,
					       __u16 flags)
{
	struct ld_tcp_retrans *e;

	/* Retransmits run from timers and ACK processing, not in the owner's syscalls:
	 * `current` says nothing here, only the socket and port maps do. */
	if (!ld_tcp_match(sk, sport, 0))
		return 0;
	e = ld_reserve(LD_PROBE_TCP, LD_EV_TCP_RETRANS, sizeof(*e));
	if (!e)
		return 0;
	e->sock_id = ld_tcp_sock_id(sk);
	e->lport = sport;
	e->rport = dport;
	e->state = state;
	e->flags = flags;
	ld_commit(LD_PROBE_TCP, e);
	return 0;
}

SEC("tracepoint/tcp/tcp_retransmit_skb")
int ld_tcp_retransmit(void *ctx)
{
	if (bpf_core_type_exists(struct trace_event_raw_tcp_retransmit_skb)) {
		struct trace_event_raw_tcp_retransmit_skb *c = ctx;

		return ld_tcp_emit_retrans(c->skaddr, c->state, c->sport, c->dport, 0);
	} else {
		struct trace_event_raw_tcp_event_sk_skb___o *c = ctx;

		return ld_tcp_emit_retrans(c->skaddr, c->state, c->sport, c->dport, 0);
	}
}

/* A listener re-sending SYN-ACKs: the client's ACK was lost or the accept queue was full
 * (with tcp_abort_on_overflow=0 the kernel drops the ACK and retries the SYN-ACK). */
SEC("tracepoint/tcp/tcp_retransmit_synack")
int ld_tcp_retransmit_synack(struct trace_event_raw_tcp_retransmit_synack *ctx)
{
	return ld_tcp_emit_retrans(ctx->skaddr, LD_TCP_NEW_SYN_RECV, ctx->sport, ctx->dport,
				   LD_TCP_RT_SYNACK);
}
