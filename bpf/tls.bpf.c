// SPDX-License-Identifier: GPL-2.0
/* tls: the plaintext side of a target's TLS connections, classified as the
 * sock probe classifies plain sockets, so that a server that terminates TLS
 * itself still shows its requests and streamed tokens.
 *
 * User space attaches per target process, to OpenSSL 3's entry points in the
 * libssl a target maps (or its executable, where it links OpenSSL in):
 *  - SSL_write / SSL_write_ex, at entry: the plaintext about to be encrypted;
 *  - SSL_read / SSL_read_ex, at entry (the buffer, kept per thread) and at
 *    return (how much plaintext the call gave).
 * The attach cookie is the enum ld_tls_api of the function.
 *
 * Only the class of the plaintext's first bytes (classify.h) leaves the
 * kernel, with its length: struct ld_tls_io.  It names no socket: OpenSSL's
 * socket BIO sends the ciphertext inside SSL_write and receives it inside
 * SSL_read, and a memory BIO (Python's asyncio) hands it to the socket right
 * after, on the same thread; user space gives the class to that ciphertext
 * send or receive (analysis/tls_join.cpp).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "common.bpf.h"
#include "classify.h"

char LICENSE[] SEC("license") = "GPL";

/* A read in progress, per thread: its buffer, and where SSL_read_ex puts the
 * count. */
struct ld_tls_read {
	__u64 buf;
	__u64 readbytes;
	__u64 ssl;
	__u64 api;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct ld_tls_read);
} ld_tls_reads SEC(".maps");

/* The plaintext's first bytes and their HTTP/2 frames, per CPU (a uprobe
 * program runs on one CPU, without preemption, to its end). */
struct ld_tls_cpu {
	struct ld_scratch s;
	struct ld_h2_seen h2;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ld_tls_cpu);
} ld_tls_scratch SEC(".maps");

/* Set by user space before load: hides user-space addresses in ssl_id. */
const volatile __u64 ld_ssl_id_key = 0;

/* The HTTP/2 frames of a plaintext (HTTP/2 over TLS: h2 by ALPN, gRPC with
 * TLS), stamped as its ld_tls_io; every such plaintext gets one, so that
 * user space can join it even when it holds no stream's frame. */
static __always_inline void ld_tls_h2_record(const struct ld_h2_seen *h2, __u64 ssl_id, __u8 dir,
					     __u64 ts)
{
	struct ld_h2_frames *e = ld_reserve(LD_PROBE_TLS, LD_EV_H2_FRAMES, sizeof(*e));

	if (!e)
		return;
	e->hdr.ts_ns = ts;
	e->sock_id = ssl_id;
	e->dir = dir;
	e->rport = 0;
	e->lport = 0;
	e->tls = 1;
	ld_h2_frames_fill(e, h2);
	ld_commit(LD_PROBE_TLS, e);
}

/* Classifies the plaintext at buf (len bytes) and records it. */
static __always_inline void ld_tls_emit(__u64 ssl, __u64 buf, __s64 len, __u8 dir, __u16 api)
{
	__u32 zero = 0, n;
	struct ld_tls_cpu *cpu = bpf_map_lookup_elem(&ld_tls_scratch, &zero);
	struct ld_scratch *s;
	struct ld_tls_io *e;
	__u64 ssl_id, ts;
	int h2;

	if (!cpu)
		return;
	s = &cpu->s;
	n = len > LD_SCRATCH_BYTES ? LD_SCRATCH_BYTES : (len > 0 ? (__u32)len : 0);
	n &= 1023; /* a bound the verifier sees (as sock.bpf.c's ld_gather) */
	if (n && bpf_probe_read_user(s->b, n, (void *)buf))
		n = 0;
	s->b[n & 1023] = 0;
	e = ld_reserve(LD_PROBE_TLS, LD_EV_TLS_IO, sizeof(*e));
	if (!e)
		return;
	ssl_id = (ssl ^ ld_ssl_id_key) * 0x9E3779B97F4A7C15ULL;
	e->ssl_id = ssl_id;
	e->len = len;
	e->api = api;
	e->dir = dir;
	e->cls = n ? ld_classify(s, n) : LD_PC_OTHER;
	if (e->cls == LD_PC_OTHER && n && ld_h2_walk(s, n, (__u64)len, &cpu->h2))
		e->cls = LD_PC_H2;
	e->sse_events = ld_token_events(e->cls);
	__builtin_memset(e->_pad, 0, sizeof(e->_pad));
	h2 = e->cls == LD_PC_H2;
	ts = e->hdr.ts_ns;
	ld_commit(LD_PROBE_TLS, e);
	if (h2)
		ld_tls_h2_record(&cpu->h2, ssl_id, dir, ts);
}

/* int SSL_write(SSL *ssl, const void *buf, int num);
 * int SSL_write_ex(SSL *ssl, const void *buf, size_t num, size_t *written); */
SEC("uprobe")
int BPF_KPROBE(ld_tls_write, void *ssl, const void *buf, __u64 num)
{
	__u16 api = (__u16)bpf_get_attach_cookie(ctx);
	__s64 len = (__s64)num;

	if (!ld_is_target(bpf_get_current_pid_tgid() >> 32))
		return 0;
	if (api == LD_TLS_SSL_WRITE)
		len = (int)num; /* an int: the register's upper half is not defined */
	ld_tls_emit((__u64)ssl, (__u64)buf, len, LD_DIR_SEND, api);
	return 0;
}

/* int SSL_read(SSL *ssl, void *buf, int num);
 * int SSL_read_ex(SSL *ssl, void *buf, size_t num, size_t *readbytes); */
SEC("uprobe")
int BPF_KPROBE(ld_tls_read_entry, void *ssl, void *buf, __u64 num, __u64 *readbytes)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct ld_tls_read r = {.buf = (__u64)buf, .ssl = (__u64)ssl};

	if (!ld_is_target(id >> 32))
		return 0;
	r.api = bpf_get_attach_cookie(ctx);
	if (r.api == LD_TLS_SSL_READ_EX)
		r.readbytes = (__u64)readbytes;
	bpf_map_update_elem(&ld_tls_reads, &tid, &r, BPF_ANY);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(ld_tls_read_return, long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct ld_tls_read *r;
	__u64 got = 0;
	__s64 len;

	if (!ld_is_target(id >> 32))
		return 0;
	r = bpf_map_lookup_elem(&ld_tls_reads, &tid);
	if (!r)
		return 0;
	if (r->readbytes) {
		/* SSL_read_ex: 1 and the count, or 0 */
		if ((int)ret != 1 || bpf_probe_read_user(&got, sizeof(got), (void *)r->readbytes))
			got = 0;
		len = (__s64)got;
	} else {
		len = (int)ret;
	}
	/* Nothing read (would block, closed): no record; a buffer reused later
	 * by another call is not this one's. */
	if (len > 0)
		ld_tls_emit(r->ssl, r->buf, len, LD_DIR_RECV, (__u16)r->api);
	bpf_map_delete_elem(&ld_tls_reads, &tid);
	return 0;
}
