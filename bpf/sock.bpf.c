// SPDX-License-Identifier: GPL-2.0
/* sock: every send and receive of the target processes on a socket, with the
 * class of its first bytes, so that user space can rebuild requests and token
 * emissions without ever seeing a payload byte.
 *
 * Two ways in, one chosen at load (sock_probe.cpp), neither needing kprobes or
 * BPF trampolines:
 *  - the socket layer's own tracepoints, sock_send_length and
 *    sock_recv_length (Linux 6.3+), as tp_btf programs: they run for socket
 *    I/O only, hand over the struct sock (no fd-table walk), and cost a file,
 *    pipe or eventfd read/write nothing (docs/performance.md: ~half the
 *    per-call cost of the exits below);
 *  - before 6.3, the exits of read/write/readv/writev/sendto/recvfrom/
 *    sendmsg/recvmsg: Python servers (uvicorn, aiohttp) write SSE events
 *    with write(2) on the socket fd, so every read/write of the targets is
 *    seen there and the fd is checked to be a socket.
 *
 * Either way a call's arguments are read back from the user registers the
 * syscall entry saved (ld_call_args), so no entry program, no per-thread
 * slot and no map lookup by tid; the price is that a call's duration is not
 * measured (a call that blocked is in the sched probe's off-CPU records,
 * with its syscall).
 *
 * A TCP send also carries what the socket still held unsent when it returned,
 * and whether Nagle's algorithm was on: a send that returns at once does not
 * mean its bytes left (ld_tcp_send_state).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "common.bpf.h"
#include "classify.h"

char LICENSE[] SEC("license") = "GPL";

#define LD_S_IFMT 0170000
#define LD_S_IFSOCK 0140000
#define LD_AF_UNIX 1
#define LD_AF_INET 2
#define LD_AF_INET6 10
#define LD_EAGAIN 11
/* gRPC C-core writes a frame header, each header field and each message as
 * iovecs of their own: a stream's first token is ~11 of them. */
#define LD_MAX_IOV 16

/* Set by user space before load. */
const volatile __u64 ld_sock_id_key = 0; /* hides kernel addresses in sock_id */
const volatile bool ld_follow_children = false;

/* One call being classified: its arguments (from the saved registers) and,
 * once ld_sock_of_fd has run, its socket. */
struct ld_sock_call {
	__u64 sock_id;
	__u64 sk;      /* the struct sock's address: read here, never recorded */
	__u64 buf;     /* user buffer, or iovec array when vec */
	__u64 len;     /* buffer length, or iovec count when vec */
	__u32 fd;
	__u16 lport;
	__u16 rport;
	__u16 family;
	__u8 syscall;
	__u8 dir;
	__u8 vec;
};

/* Per CPU: the call an exit program hands to the tail-called classifier, and
 * the payload's first bytes.  A tracepoint program and its tail call run on
 * one CPU without preemption, so the two share it safely. */
struct ld_sock_cpu {
	struct ld_sock_call call;
	struct ld_scratch s;
	struct ld_h2_seen h2;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ld_sock_cpu);
} ld_sock_percpu SEC(".maps");

/* The f_op of every socket's file (socket_file_ops: sock_alloc_file() gives
 * every socket that one), learned from the first file proven a socket by its
 * inode.  A data symbol, so not in kallsyms without CONFIG_KALLSYMS_ALL (as on
 * the reference VM).  With it, a send's fd is told a socket by the pointer in
 * its file, as sock_from_file() tells it, instead of two more reads and a
 * third cache line (the inode). */
__u64 ld_socket_fops = 0;

/* Is the file at f a socket (of any family)?  Reads f_op (into *fops), and the
 * inode only until ld_socket_fops is known or for files that are not sockets:
 * 1 by f_op, 2 by the inode, 0 not a socket. */
static __always_inline int ld_file_is_socket(struct file *f, __u64 *fops)
{
	umode_t mode;

	*fops = (__u64)BPF_CORE_READ(f, f_op);
	if (*fops && *fops == ld_socket_fops)
		return 1;
	mode = BPF_CORE_READ(f, f_inode, i_mode);
	if ((mode & LD_S_IFMT) != LD_S_IFSOCK)
		return 0;
	/* An O_PATH file of a socket inode has S_IFSOCK too, but no socket:
	 * learn only from a file that has one (the caller checks sk). */
	return 2;
}

/* Fills the socket identity of a call from its socket's family and ports
 * (skc_num in host order, skc_dport in network order); 0 unless the socket is
 * AF_INET, AF_INET6 or AF_UNIX. */
static __always_inline int ld_sock_ident(__u64 sk_addr, __u16 family, __u16 num, __u16 dport,
					 struct ld_sock_call *in)
{
	in->family = family;
	if (family != LD_AF_INET && family != LD_AF_INET6 && family != LD_AF_UNIX)
		return 0;
	in->lport = num;
	in->rport = bpf_ntohs(dport);
	in->sock_id = (sk_addr ^ ld_sock_id_key) * 0x9E3779B97F4A7C15ULL;
	in->sk = sk_addr;
	return 1;
}

#define LD_SOCK_STREAM 1
#define LD_IPPROTO_TCP 6
#define LD_TCP_NAGLE_OFF 1  /* include/net/tcp.h: TCP_NODELAY sets it (with TCP_NAGLE_PUSH) */
#define LD_TCP_NAGLE_CORK 2 /* TCP_CORK */

/* A send on a TCP socket: the bytes it left queued (write_seq - snd_nxt, both
 * under the socket lock the send just released; an ACK processed meanwhile
 * can only make it smaller) and the socket's Nagle and cork bits.  A small
 * write with unacknowledged data in flight and Nagle on stays queued until
 * the peer's ACK, which a client with delayed ACKs sends up to 40 ms later:
 * the syscall's time is not the token's departure.  sk_protocol was a
 * bitfield before 5.6 and nonagle still is one: the _PROBED reads cover both. */
static __always_inline void ld_tcp_send_state(const struct ld_sock_call *in, struct ld_sock_io *e)
{
	struct sock *sk = (struct sock *)in->sk;
	struct tcp_sock *tp = (struct tcp_sock *)in->sk;
	__u32 write_seq, snd_nxt;
	__u8 nonagle;

	e->unsent = 0;
	e->tcp = 0;
	if (in->dir != LD_DIR_SEND || (in->family != LD_AF_INET && in->family != LD_AF_INET6))
		return;
	if (BPF_CORE_READ(sk, sk_type) != LD_SOCK_STREAM ||
	    BPF_CORE_READ_BITFIELD_PROBED(sk, sk_protocol) != LD_IPPROTO_TCP)
		return;
	write_seq = BPF_CORE_READ(tp, write_seq);
	snd_nxt = BPF_CORE_READ(tp, snd_nxt);
	nonagle = BPF_CORE_READ_BITFIELD_PROBED(tp, nonagle);
	e->unsent = write_seq - snd_nxt; /* sequence space wraps: the difference does not */
	if (e->unsent > (1U << 30))      /* a torn read across a wrap or a reset: not a queue */
		e->unsent = 0;
	e->tcp = LD_TCP_READ | ((nonagle & LD_TCP_NAGLE_OFF) ? LD_TCP_NODELAY : 0) |
		 ((nonagle & LD_TCP_NAGLE_CORK) ? LD_TCP_CORK : 0);
}

/* The first bytes of struct sock_common: addresses, hash, ports, family; read
 * at once instead of a read per field. */
#define LD_SK_HEAD 32

/* Fills the socket identity of `fd` of the current task; 0 when fd is not
 * an AF_INET/AF_INET6/AF_UNIX socket.  The task's file table is walked with
 * plain loads (BTF pointers) and the rest with one read per pointer hop.  It
 * runs on every send of a token, at the syscall's exit: there the five reads
 * cost ~170-210 ns in all (the exit's growth when they moved from the entry,
 * where cold they cost ~80 ns apiece). */
static __always_inline int ld_sock_of_fd(__u32 fd, struct ld_sock_call *in)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fdtable *fdt = task->files->fdt;
	__u32 off_family = bpf_core_field_offset(struct sock_common, skc_family);
	__u32 off_num = bpf_core_field_offset(struct sock_common, skc_num);
	__u32 off_dport = bpf_core_field_offset(struct sock_common, skc_dport);
	__u8 head[LD_SK_HEAD];
	struct file **fds;
	struct file *f = NULL;
	struct socket *sock;
	struct sock *sk;
	__u16 family, num, dport;
	__u64 fops;
	int is_socket;

	if (!fdt || fd >= fdt->max_fds)
		return 0;
	fds = fdt->fd;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return 0;
	is_socket = ld_file_is_socket(f, &fops);
	if (!is_socket)
		return 0;
	sock = BPF_CORE_READ(f, private_data);
	sk = BPF_CORE_READ(sock, sk);
	if (!sk)
		return 0;
	if (is_socket == 2)
		ld_socket_fops = fops;
	/* The three fields lie in the head on every kernel since 2.6; the
	 * offsets are constants after relocation, so the verifier sees the
	 * bounds. */
	if (off_family > LD_SK_HEAD - 2 || off_num > LD_SK_HEAD - 2 || off_dport > LD_SK_HEAD - 2 ||
	    bpf_probe_read_kernel(head, sizeof(head), &sk->__sk_common))
		return 0;
	__builtin_memcpy(&family, &head[off_family], sizeof(family));
	__builtin_memcpy(&num, &head[off_num], sizeof(num));
	__builtin_memcpy(&dport, &head[off_dport], sizeof(dport));
	return ld_sock_ident((__u64)sk, family, num, dport, in);
}

/* The same from the socket layer's tracepoints: sk is a BTF pointer there,
 * so its fields are plain loads from lines the send or receive just used.
 * The verifier allows no arithmetic on such a pointer, so its value (for
 * sock_id) is copied out of the tracepoint's arguments as a number. */
static __always_inline int ld_sock_of_sk(struct sock *sk, const __u64 *sk_arg,
					 struct ld_sock_call *in)
{
	__u64 sk_addr = 0;

	if (!sk || bpf_probe_read_kernel(&sk_addr, sizeof(sk_addr), sk_arg))
		return 0;
	return ld_sock_ident(sk_addr, sk->__sk_common.skc_family, sk->__sk_common.skc_num,
			     sk->__sk_common.skc_dport, in);
}

/* Copies up to LD_SCRATCH_BYTES of the payload (at most `avail` bytes) into
 * the scratch buffer, with the 0 after it that classify.h needs; returns how
 * many. */
static __always_inline __u32 ld_gather(struct ld_scratch *s, const struct ld_sock_call *in,
				       __u64 avail)
{
	__u64 take, off = 0;

	if (avail > LD_SCRATCH_BYTES)
		avail = LD_SCRATCH_BYTES;
	if (!in->vec) {
		take = avail & 1023;
		if (take && bpf_probe_read_user(s->b, take, (void *)in->buf))
			return 0;
		s->b[take & 1023] = 0;
		return take;
	}
	/* writev/sendmsg: Rust servers write [size line, event, "\r\n"] as
	 * separate iovecs, gRPC a frame in several, so classify the gathered
	 * prefix, not iov[0]. */
	for (int i = 0; i < LD_MAX_IOV; i++) {
		struct iovec iov;

		if (i >= in->len || off >= avail)
			break;
		if (bpf_probe_read_user(&iov, sizeof(iov), (void *)(in->buf + i * sizeof(iov))))
			break;
		take = iov.iov_len;
		if (take > avail - off)
			take = avail - off;
		take &= 1023;
		if (take && bpf_probe_read_user(&s->b[off & 511], take, iov.iov_base))
			break;
		off += take;
	}
	s->b[off & 1023] = 0;
	return off;
}

/* The HTTP/2 frames the walk found in this CPU's slot, stamped as the
 * ld_sock_io record they detail. */
static __always_inline void ld_h2_record(struct ld_sock_cpu *cpu, __u64 ts)
{
	struct ld_h2_frames *e = ld_reserve(LD_PROBE_SOCK, LD_EV_H2_FRAMES, sizeof(*e));

	if (!e)
		return;
	e->hdr.ts_ns = ts;
	e->sock_id = cpu->call.sock_id;
	e->dir = cpu->call.dir;
	e->rport = cpu->call.rport;
	e->lport = cpu->call.lport;
	e->tls = 0;
	ld_h2_frames_fill(e, &cpu->h2);
	ld_commit(LD_PROBE_SOCK, e);
}

/* Classifies the call in this CPU's slot, its socket known, and records it. */
static __always_inline int ld_sock_record(struct ld_sock_cpu *cpu, long ret)
{
	struct ld_sock_call *in = &cpu->call;
	struct ld_sock_io *e;
	__u64 avail, ts;
	__u32 n;
	int h2;

	/* Received bytes exist only up to ret; a failed send still has its buffer. */
	avail = ret > 0 ? (__u64)ret : (in->dir == LD_DIR_SEND ? in->len : 0);
	if (in->vec && ret <= 0)
		avail = 0;
	n = ld_gather(&cpu->s, in, avail);

	e = ld_reserve(LD_PROBE_SOCK, LD_EV_SOCK_IO, sizeof(*e));
	if (!e)
		return 0;
	e->sock_id = in->sock_id;
	ld_tcp_send_state(in, e);
	e->_pad0[0] = e->_pad0[1] = e->_pad0[2] = 0;
	e->ret = ret;
	e->fd = in->fd;
	e->lport = in->lport;
	e->rport = in->rport;
	e->family = in->family;
	e->dir = in->dir;
	e->syscall = in->syscall;
	e->cls = ld_classify(&cpu->s, n);
	if (e->cls == LD_PC_OTHER && ret > 0 && ld_h2_walk(&cpu->s, n, (__u64)ret, &cpu->h2))
		e->cls = LD_PC_H2;
	e->sse_events = ld_token_events(e->cls);
	e->_pad = 0;
	ts = e->hdr.ts_ns;
	h2 = e->cls == LD_PC_H2 && (cpu->h2.count || cpu->h2.preface);
	ld_commit(LD_PROBE_SOCK, e);
	if (h2)
		ld_h2_record(cpu, ts);
	return 0;
}

static __always_inline int ld_io_exit_classify(long ret)
{
	__u32 zero = 0;
	struct ld_sock_cpu *cpu = bpf_map_lookup_elem(&ld_sock_percpu, &zero);

	if (!cpu)
		return 0;
	/* Non-blocking servers poll with reads that return EAGAIN: no IO. */
	if (ret == -LD_EAGAIN || !ld_sock_of_fd(cpu->call.fd, &cpu->call))
		return 0;
	return ld_sock_record(cpu, ret);
}

/* Every sys_exit program tail-calls this one program, so the verifier checks
 * the classifier once instead of once per syscall (8x the load time). */
SEC("tracepoint")
int ld_sock_exit_common(struct trace_event_raw_sys_exit *ctx)
{
	return ld_io_exit_classify(ctx->ret);
}

/* Slot 0: ld_sock_exit_common, set by the loader when the syscall exits are
 * the way in (a program not loaded cannot be a static initializer). */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} ld_sock_tail SEC(".maps");

/* The first three arguments of the syscall being left (fd, buffer, length),
 * from the user registers its entry saved (ld_current_user_regs).  Syscall
 * handlers take them from there and do not write them back; the return value
 * goes to another register (x86-64's ax), except on arm64, where x0 takes it
 * before the exit tracepoint and the first argument survives in orig_x0.  The
 * entry wrote these lines and the handler read them, so they are warm. */
static __always_inline int ld_call_args(struct ld_sock_call *call)
{
	struct pt_regs *regs = ld_current_user_regs();

	if (!regs)
		return 0;
#if defined(__TARGET_ARCH_x86)
	call->fd = regs->di;
	call->buf = regs->si;
	call->len = regs->dx;
#elif defined(__TARGET_ARCH_arm64)
	call->fd = regs->orig_x0;
	call->buf = regs->regs[1];
	call->len = regs->regs[2];
#else
#error "sock.bpf.c: the syscall argument registers of this architecture are not known"
#endif
	return 1;
}

enum ld_call_shape {
	LD_SHAPE_PLAIN, /* (fd, buf, len, ...) */
	LD_SHAPE_VEC,   /* (fd, iov, iovcnt) */
	LD_SHAPE_MSG,   /* (fd, msg, flags): the iovecs are in the user msghdr */
};

/* The call's arguments, from the saved registers, into *call; for sendmsg and
 * recvmsg the iovec array from the user msghdr. */
static __always_inline int ld_call_prepare(struct ld_sock_call *call, __u8 syscall, __u8 dir,
					   enum ld_call_shape shape)
{
	if (!ld_call_args(call))
		return 0;
	call->syscall = syscall;
	call->dir = dir;
	call->vec = shape != LD_SHAPE_PLAIN;
	if (shape == LD_SHAPE_MSG) {
		struct user_msghdr msg = {};

		if (bpf_probe_read_user(&msg, sizeof(msg), (void *)call->buf))
			return 0;
		call->buf = (__u64)msg.msg_iov;
		call->len = msg.msg_iovlen;
	}
	return 1;
}

/* A target's exit: the call's arguments into this CPU's ld_sock_percpu, then the
 * classifier (a failed tail call, with an empty prog array, records nothing).
 * The fd is looked up here, at the exit: should another thread have closed it
 * while the call was in flight, the record names what the fd holds now
 * (nothing, or a socket accepted into that number). */
static __always_inline int ld_io_exit(void *ctx, __u8 syscall, __u8 dir, enum ld_call_shape shape)
{
	__u32 zero = 0;
	struct ld_sock_cpu *cpu;

	if (!ld_is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	cpu = bpf_map_lookup_elem(&ld_sock_percpu, &zero);
	if (!cpu || !ld_call_prepare(&cpu->call, syscall, dir, shape))
		return 0;
	bpf_tail_call(ctx, &ld_sock_tail, 0);
	return 0;
}

#define LD_IO_EXIT(name, sc, dir, shape)                                             \
	SEC("tracepoint/syscalls/sys_exit_" #name)                                   \
	int ld_exit_##name(struct trace_event_raw_sys_exit *ctx)                     \
	{                                                                            \
		return ld_io_exit(ctx, sc, dir, shape);                              \
	}

LD_IO_EXIT(read, LD_SC_READ, LD_DIR_RECV, LD_SHAPE_PLAIN)
LD_IO_EXIT(write, LD_SC_WRITE, LD_DIR_SEND, LD_SHAPE_PLAIN)
LD_IO_EXIT(sendto, LD_SC_SENDTO, LD_DIR_SEND, LD_SHAPE_PLAIN)
LD_IO_EXIT(recvfrom, LD_SC_RECVFROM, LD_DIR_RECV, LD_SHAPE_PLAIN)
LD_IO_EXIT(readv, LD_SC_READV, LD_DIR_RECV, LD_SHAPE_VEC)
LD_IO_EXIT(writev, LD_SC_WRITEV, LD_DIR_SEND, LD_SHAPE_VEC)
LD_IO_EXIT(sendmsg, LD_SC_SENDMSG, LD_DIR_SEND, LD_SHAPE_MSG)
LD_IO_EXIT(recvmsg, LD_SC_RECVMSG, LD_DIR_RECV, LD_SHAPE_MSG)

/* The syscall a socket-layer tracepoint fired in, from the number its entry
 * saved; 0 for calls we do not classify (sendmmsg/recvmmsg, sendfile and
 * splice into a socket, io_uring: the same set the exits above see).  A
 * tracepoint of one direction only accepts that direction's calls. */
static __always_inline int ld_syscall_of_nr(long nr, __u8 dir, __u8 *syscall,
					    enum ld_call_shape *shape)
{
#if defined(__TARGET_ARCH_x86)
	enum { NR_READ = 0, NR_WRITE = 1, NR_READV = 19, NR_WRITEV = 20, NR_SENDTO = 44,
	       NR_RECVFROM = 45, NR_SENDMSG = 46, NR_RECVMSG = 47 };
#elif defined(__TARGET_ARCH_arm64)
	enum { NR_READ = 63, NR_WRITE = 64, NR_READV = 65, NR_WRITEV = 66, NR_SENDTO = 206,
	       NR_RECVFROM = 207, NR_SENDMSG = 211, NR_RECVMSG = 212 };
#endif
	if (dir == LD_DIR_SEND) {
		switch (nr) {
		case NR_WRITE: *syscall = LD_SC_WRITE; *shape = LD_SHAPE_PLAIN; return 1;
		case NR_SENDTO: *syscall = LD_SC_SENDTO; *shape = LD_SHAPE_PLAIN; return 1;
		case NR_WRITEV: *syscall = LD_SC_WRITEV; *shape = LD_SHAPE_VEC; return 1;
		case NR_SENDMSG: *syscall = LD_SC_SENDMSG; *shape = LD_SHAPE_MSG; return 1;
		}
		return 0;
	}
	switch (nr) {
	case NR_READ: *syscall = LD_SC_READ; *shape = LD_SHAPE_PLAIN; return 1;
	case NR_RECVFROM: *syscall = LD_SC_RECVFROM; *shape = LD_SHAPE_PLAIN; return 1;
	case NR_READV: *syscall = LD_SC_READV; *shape = LD_SHAPE_VEC; return 1;
	case NR_RECVMSG: *syscall = LD_SC_RECVMSG; *shape = LD_SHAPE_MSG; return 1;
	}
	return 0;
}

/* The number of the syscall the current task is in, as its entry saved it. */
static __always_inline long ld_current_syscall_nr(void)
{
	struct pt_regs *regs = ld_current_user_regs();

	if (!regs)
		return -1;
#if defined(__TARGET_ARCH_x86)
	return regs->orig_ax;
#elif defined(__TARGET_ARCH_arm64)
	return regs->syscallno;
#endif
}

/* A target's send or receive, seen by the socket layer (sock_sendmsg_nosec /
 * sock_recvmsg_nosec, 6.3+), inside the syscall: its socket comes with the
 * tracepoint and its buffer from the saved registers.  The tracepoint's ret
 * is the protocol's, which is what the syscall returns (but for a signal's
 * -ERESTARTSYS, which the exits saw as -EINTR or a restart). */
static __always_inline int ld_sock_layer(struct sock *sk, const __u64 *sk_arg, long ret, __u8 dir)
{
	__u32 zero = 0;
	struct ld_sock_cpu *cpu;
	enum ld_call_shape shape;
	__u8 syscall;

	if (!ld_is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	if (ret == -LD_EAGAIN)
		return 0;
	if (!ld_syscall_of_nr(ld_current_syscall_nr(), dir, &syscall, &shape))
		return 0;
	cpu = bpf_map_lookup_elem(&ld_sock_percpu, &zero);
	if (!cpu || !ld_call_prepare(&cpu->call, syscall, dir, shape) ||
	    !ld_sock_of_sk(sk, sk_arg, &cpu->call))
		return 0;
	return ld_sock_record(cpu, ret);
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(ld_sock_send_length, struct sock *sk, int ret, int flags)
{
	return ld_sock_layer(sk, &ctx[0], ret, LD_DIR_SEND);
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(ld_sock_recv_length, struct sock *sk, int ret, int flags)
{
	return ld_sock_layer(sk, &ctx[0], ret, LD_DIR_RECV);
}

/* close() needs the socket before the fd is gone: its entry. */
SEC("tracepoint/syscalls/sys_enter_close")
int ld_enter_close(struct trace_event_raw_sys_enter *ctx)
{
	struct ld_sock_call in = {};
	struct ld_sock_close *e;

	if (!ld_is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	if (!ld_sock_of_fd(ctx->args[0], &in))
		return 0;
	e = ld_reserve(LD_PROBE_SOCK, LD_EV_SOCK_CLOSE, sizeof(*e));
	if (!e)
		return 0;
	e->sock_id = in.sock_id;
	e->fd = ctx->args[0];
	e->_pad = 0;
	ld_commit(LD_PROBE_SOCK, e);
	return 0;
}

SEC("tracepoint/sched/sched_process_exit")
int ld_task_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct task_struct *task;
	struct ld_task_exit *e;

	if (!ld_is_target(id >> 32))
		return 0;
	task = (struct task_struct *)bpf_get_current_task();
	e = ld_reserve(LD_PROBE_SOCK, LD_EV_TASK_EXIT, sizeof(*e));
	if (!e)
		return 0;
	e->exit_code = BPF_CORE_READ(task, exit_code);
	e->is_process = (__u32)id == (id >> 32);
	ld_commit(LD_PROBE_SOCK, e);
	return 0;
}

/* --children: a raw tracepoint, because only its arguments (the task
 * structs) tell a new process (child pid == child tgid) from a new thread. */
SEC("raw_tracepoint/sched_process_fork")
int ld_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx->args[0];
	struct task_struct *child = (struct task_struct *)ctx->args[1];
	__u32 parent_tgid, child_tgid, child_pid;

	if (!ld_follow_children)
		return 0;
	parent_tgid = BPF_CORE_READ(parent, tgid);
	child_tgid = BPF_CORE_READ(child, tgid);
	child_pid = BPF_CORE_READ(child, pid);
	if (child_pid != child_tgid || !ld_is_target(parent_tgid))
		return 0;
	ld_add_target(child_tgid);
	return 0;
}
