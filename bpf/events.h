/* Event records shared by the BPF programs (bpf/NAME.bpf.c) and user space.
 *
 * Plain fixed-width types only, no kernel headers: this file is included by
 * BPF C (after vmlinux.h) and by C++ (after <cstdint>).  Every record starts
 * with struct ld_hdr; `type` selects the layout and `size` is the whole
 * record in bytes, so a reader can skip types it does not know (a newer
 * agent's trace read by an older one).
 *
 * These records are also the on-disk format inside .ldtrace chunks: any
 * change to an existing layout needs LD_RECORD_LAYOUT_VERSION (below) bumped
 * (the file's container has its own, ld::trace::kFormatVersion in
 * agent/trace/trace_file.hpp); the layout checks at the end of this file fail
 * the build on a change that is not meant.
 *
 * Privacy: no record carries socket payload bytes.  The kernel reads a short
 * prefix of each send/recv to *classify* it (enum ld_payload_class) and only
 * the class leaves the kernel.
 */
#pragma once

/* The version of the record layouts below, written into each trace's header.
 * Bump it with ANY change of a record's size, a field's offset, type or
 * meaning, or an enum value that a record carries; then regenerate the golden
 * records trace (tests/unit/golden_records_test.cpp says how) in the same
 * change. */
#define LD_RECORD_LAYOUT_VERSION 8  /* 2: user-space frames (ld_cpu_frames, ld_ustack, ld_pystack)
                                     3: ld_sched_agg names the wakers of its short waits
                                     4: CUDA calls (ld_cuda_call)
                                     5: GPU samples from NVML (ld_gpu_sample)
                                     6: TLS plaintext classes (ld_tls_io)
                                     7: HTTP/2 frames (ld_h2_frames, LD_PC_H2, LD_PC_GRPC_MESSAGE)
                                     8: ld_sock_io's reserved word is a TCP send's state (unsent,
                                        tcp); older traces read as "not read" (0); WebSocket
                                        classes (LD_PC_HTTP_SWITCH, LD_PC_WS_*) */

#ifndef __VMLINUX_H__
#include <stdint.h>
typedef uint8_t ld_u8;
typedef uint16_t ld_u16;
typedef uint32_t ld_u32;
typedef uint64_t ld_u64;
typedef int32_t ld_s32;
typedef int64_t ld_s64;
#else
typedef __u8 ld_u8;
typedef __u16 ld_u16;
typedef __u32 ld_u32;
typedef __u64 ld_u64;
typedef __s32 ld_s32;
typedef __s64 ld_s64;
#endif

/* The set of traced tgids (ld_targets, bpf/common.bpf.h) is a bitmap: word
 * tgid / 64 of an array map, bit tgid % 64.  Sized for PID_MAX_LIMIT on 64-bit
 * kernels (4M pids, 512 KiB), so every pid fits whatever kernel.pid_max is. */
#define LD_TARGET_WORDS (4194304 / 64)
#define LD_TARGET_WORD(tgid) ((tgid) >> 6)
#define LD_TARGET_BIT(tgid) (1ULL << ((tgid) & 63))

/* The ring buffer wakes user space when the unread data crosses a multiple of
 * ring / LD_RING_WAKE_PARTS (ld_submit_flags, bpf/common.bpf.h); user space
 * drains at its own pace only while less than one part is unread. */
#define LD_RING_WAKE_PARTS 16

enum ld_event_type {
	LD_EV_SOCK_IO = 1,   /* struct ld_sock_io: one send or receive on a socket */
	LD_EV_SOCK_CLOSE = 2,/* struct ld_sock_close: close() of a socket fd */
	LD_EV_TASK_EXIT = 3, /* struct ld_task_exit: a target thread or process exited */
	/* evidence probes */
	LD_EV_OFFCPU = 10,      /* struct ld_offcpu: a target thread was off CPU (blocked or preempted) */
	LD_EV_SCHED_AGG = 11,   /* struct ld_sched_agg: short off-CPU slices summed per thread */
	LD_EV_MIGRATE = 12,     /* struct ld_migrate: a target thread moved CPU */
	LD_EV_CPU_SAMPLE = 13,  /* struct ld_cpu_sample: perf cpu-clock sample of a target thread */
	LD_EV_KSTACK = 14,      /* struct ld_kstack: symbolised kernel stack (written by user space) */
	LD_EV_SYSCALL = 15,     /* struct ld_syscall: a timed syscall (memory, disk, futex) */
	LD_EV_FAULTS = 16,      /* struct ld_faults: user page faults of one thread, batched */
	LD_EV_BLOCK_RQ = 17,    /* struct ld_block_rq: one block request, issue to completion */
	LD_EV_RECLAIM = 18,     /* struct ld_reclaim: direct reclaim / compaction stall */
	LD_EV_GIL_ADDR = 19,    /* struct ld_gil_addr: futex word(s) that are a process's GIL */
	LD_EV_TCP_STATE = 20,   /* struct ld_tcp_state: TCP state change on a target port */
	LD_EV_TCP_RETRANS = 21, /* struct ld_tcp_retrans: a retransmitted segment */
	LD_EV_NET_SAMPLE = 22,  /* struct ld_net_sample: /proc/net counters (user space) */
	LD_EV_CGROUP_SAMPLE = 23, /* struct ld_cgroup_sample: cpu.stat / memory of the target's cgroup */
	LD_EV_CPU_FREQ = 24,    /* struct ld_cpu_freq: a CPU's frequency changed (or was sampled) */
	LD_EV_GIL_WAIT = 25,    /* struct ld_gil_wait: a thread waited for the GIL */
	LD_EV_CPU_FRAMES = 26,  /* struct ld_cpu_frames: a perf sample with its user-space stacks */
	LD_EV_USTACK = 27,      /* struct ld_ustack: symbolised native user stack (written by user space) */
	LD_EV_PYSTACK = 28,     /* struct ld_pystack: a Python stack, named (written by user space) */
	LD_EV_CUDA = 29,        /* struct ld_cuda_call: CUDA API calls of a thread (launches summed) */
	LD_EV_GPU_SAMPLE = 30,  /* struct ld_gpu_sample: one GPU's state from NVML (user space) */
	LD_EV_TLS_IO = 31,      /* struct ld_tls_io: a TLS write or read's plaintext class */
	LD_EV_H2_FRAMES = 32,   /* struct ld_h2_frames: the HTTP/2 frames of one send or receive */
	LD_EV_TYPE_MAX
};

/* Probe ids index the per-probe counters (submitted/dropped) in the kernel.
 * User-space sampled probes count in user space but keep an id too. */
enum ld_probe_id {
	LD_PROBE_SOCK = 0,
	LD_PROBE_SCHED = 1,
	LD_PROBE_PERF = 2,
	LD_PROBE_MEMORY = 3,
	LD_PROBE_DISK = 4,
	LD_PROBE_GIL = 5,
	LD_PROBE_FUTEX = 6,
	LD_PROBE_TCP = 7,
	LD_PROBE_CGROUP = 8,
	LD_PROBE_RECLAIM = 9,
	LD_PROBE_CPUFREQ = 10,
	LD_PROBE_CUDA = 11,
	LD_PROBE_NVML = 12,
	LD_PROBE_TLS = 13,
	/* bpf/bench_stress.bpf.c: the pipeline benchmark's producer, never in the registry */
	LD_PROBE_BENCH = 15,
	LD_PROBE_MAX = 16
};

struct ld_hdr {
	ld_u16 type;  /* enum ld_event_type */
	ld_u16 size;  /* whole record, bytes */
	ld_u32 cpu;
	ld_u32 tgid;
	ld_u32 tid;
	ld_u64 ts_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) at the event */
};

/* How the first bytes of a send/recv look.  Computed in the kernel. */
enum ld_payload_class {
	LD_PC_OTHER = 0,
	LD_PC_HTTP_REQUEST = 1,  /* "GET /", "POST /", ...: a request line */
	LD_PC_HTTP_RESPONSE = 2, /* "HTTP/1.x NNN": a status line (headers) */
	LD_PC_SSE_DATA = 3,      /* an SSE "data:" event (optionally after a chunk-size line) */
	LD_PC_SSE_DONE = 4,      /* "data: [DONE]": end of an OpenAI-style stream, not a token */
	LD_PC_CHUNK_FRAME = 5,   /* only chunked-encoding framing: "1a\r\n" or "\r\n" */
	LD_PC_CHUNK_END = 6,     /* the last chunk "0\r\n\r\n": end of a chunked body */
	LD_PC_SSE_OTHER = 7,     /* an SSE comment (": ping"), "event:"/"id:"/"retry:" line */
	LD_PC_HTTP_RESPONSE_SSE = 8, /* status line + headers + an SSE data event in one send */
	LD_PC_SSE_META = 9,      /* a data event without generated content: "choices":[] (usage
				  * summary) or "delta":{} (finish/role-less chunk): not a token */
	LD_PC_H2 = 10,           /* HTTP/2 frames (or the client preface); their streams are in the
				  * ld_h2_frames record that follows */
	LD_PC_GRPC_MESSAGE = 11, /* an HTTP/2 DATA frame's payload: a gRPC message (length prefix) */
	LD_PC_HTTP_SWITCH = 12,  /* "HTTP/1.x 101": a status line switching protocols (WebSocket) */
	LD_PC_WS_MESSAGE = 13,   /* RFC 6455 unmasked data frames (text or binary, final): a server's */
	LD_PC_WS_CLIENT = 14,    /* masked data frames: a client's messages (RFC 6455 masks them all) */
};

enum ld_sock_dir {
	LD_DIR_SEND = 0,
	LD_DIR_RECV = 1,
};

/* Which syscall carried the IO; kept for diagnostics ("uvicorn uses write"). */
enum ld_io_syscall {
	LD_SC_READ = 0,
	LD_SC_WRITE = 1,
	LD_SC_READV = 2,
	LD_SC_WRITEV = 3,
	LD_SC_SENDTO = 4,
	LD_SC_RECVFROM = 5,
	LD_SC_SENDMSG = 6,
	LD_SC_RECVMSG = 7,
	LD_SC_MAX
};

/* ld_sock_io.tcp: the TCP socket's send state when the send returned. */
enum ld_tcp_bits {
	LD_TCP_READ = 1,       /* the fields were read: a send on a TCP socket */
	LD_TCP_NODELAY = 2,    /* TCP_NODELAY set (Nagle's algorithm off: nonagle & TCP_NAGLE_OFF) */
	LD_TCP_CORK = 4,       /* TCP_CORK set (nonagle & TCP_NAGLE_CORK) */
};

struct ld_sock_io {
	struct ld_hdr hdr;   /* hdr.ts_ns = syscall exit */
	ld_u64 sock_id;      /* opaque per-socket id (stable for the socket's life) */
	ld_u32 unsent;       /* a TCP send: its bytes still queued, unsent, when it returned
	                      * (write_seq - snd_nxt): held by Nagle, a cork or a full window */
	ld_u8 tcp;           /* LD_TCP_* bits; 0 = not read (not a TCP send, or a trace from
	                      * before these fields: they were one reserved word, always 0) */
	ld_u8 _pad0[3];
	ld_s64 ret;          /* bytes moved, or -errno */
	ld_u32 fd;
	ld_u16 lport;        /* local port, host order (0 for AF_UNIX) */
	ld_u16 rport;        /* remote port, host order (0 for AF_UNIX) */
	ld_u16 family;       /* AF_INET / AF_INET6 / AF_UNIX */
	ld_u8 dir;           /* enum ld_sock_dir */
	ld_u8 syscall;       /* enum ld_io_syscall */
	ld_u8 cls;           /* enum ld_payload_class of the first bytes */
	ld_u8 sse_events;    /* SSE "data:" event starts seen in the classified prefix */
	ld_u16 _pad;
};

/* TLS (the tls probe): the plaintext of one SSL_write (at its entry) or
 * SSL_read (at its return) of a target thread, classified as ld_sock_io's
 * first bytes are.  No socket: user space gives the class to the ciphertext
 * send or receive of the same thread (analysis/tls_join.hpp). */
enum ld_tls_api {
	LD_TLS_SSL_WRITE = 1,
	LD_TLS_SSL_WRITE_EX = 2,
	LD_TLS_SSL_READ = 3,
	LD_TLS_SSL_READ_EX = 4,
};

struct ld_tls_io {
	struct ld_hdr hdr;   /* hdr.ts_ns = SSL_write's entry / SSL_read's return */
	ld_u64 ssl_id;       /* opaque per-connection id (the SSL object, hashed) */
	ld_s64 len;          /* plaintext bytes: asked to write, or read */
	ld_u16 api;          /* enum ld_tls_api */
	ld_u8 dir;           /* enum ld_sock_dir */
	ld_u8 cls;           /* enum ld_payload_class of the plaintext's first bytes */
	ld_u8 sse_events;    /* as ld_sock_io */
	ld_u8 _pad[3];
};

/* HTTP/2 (RFC 9113): the frames of one send or receive that carried them
 * (or of a TLS write's or read's plaintext), read from the bytes the sock or
 * tls probe classifies (a prefix of 512 bytes), so
 * that user space can give each stream its own request and tokens.  Only the
 * frames that make a stream's timeline are kept (DATA, HEADERS, RST_STREAM);
 * consecutive DATA frames of one stream share an entry. */
#define LD_H2_MAX_FRAMES 8
#define LD_H2_DATA 0
#define LD_H2_HEADERS 1
#define LD_H2_RST_STREAM 3
#define LD_H2_FLAG_END_STREAM 0x1

struct ld_h2_frame {
	ld_u32 stream_id;
	ld_u32 len;          /* payload bytes (of all DATA frames of the entry) */
	ld_u8 type;          /* LD_H2_DATA / LD_H2_HEADERS / LD_H2_RST_STREAM */
	ld_u8 flags;         /* the frames' flags, or-ed (LD_H2_FLAG_END_STREAM) */
	ld_u8 cls;           /* DATA: the first payload's class (LD_PC_GRPC_MESSAGE, LD_PC_SSE_*,
	                      * LD_PC_OTHER when unknown or not seen); 0 otherwise */
	ld_u8 messages;      /* DATA: gRPC messages or SSE events starting in it */
};

struct ld_h2_frames {
	struct ld_hdr hdr;   /* the ts and thread of the ld_sock_io it details */
	ld_u64 sock_id;
	ld_u8 dir;           /* enum ld_sock_dir */
	ld_u8 count;         /* entries in f[] */
	ld_u8 more;          /* 1: frames past the bytes read or past f[] were not seen */
	ld_u8 preface;       /* 1: began with the client's connection preface */
	ld_u16 rport;        /* as ld_sock_io */
	ld_u16 lport;        /* as ld_sock_io */
	ld_u8 tls;           /* 1: a TLS write's or read's plaintext (the tls probe): sock_id is then
	                      * the ld_tls_io's ssl_id, and no ports; user space joins it to the
	                      * ciphertext send or receive (analysis/tls_join.hpp) */
	ld_u8 _pad[7];
	struct ld_h2_frame f[LD_H2_MAX_FRAMES];
};

struct ld_sock_close {
	struct ld_hdr hdr;
	ld_u64 sock_id;
	ld_u32 fd;
	ld_u32 _pad;
};

struct ld_task_exit {
	struct ld_hdr hdr;
	ld_u32 exit_code;
	ld_u32 is_process;   /* 1 when the whole thread group ends (tid == tgid) */
};

/* ---------------------------------------------------------------- evidence */

#define LD_COMM_LEN 16

/* ld_offcpu.flags */
/* Walking a kernel stack costs ~1.5 us, too much for every block of a thread that
 * blocks 100k times a second: a thread gets a fresh stack for a syscall at most
 * every 10 ms, and blocks in the same syscall in between carry that stack with
 * this flag (same thread, same syscall, < 10 ms earlier). */
#define LD_OFFCPU_KSTACK_REUSED 1
/* The switch back in was never seen (sched_switch does not fire for every
 * switch; measured here: a few in 2000 switches from the idle task to a 200 us
 * sleeper, missing from ftrace's own sched_switch stream too).  The interval
 * was closed at the thread's next switch-out: on_ns is the wake-up (an idle
 * CPU runs the wakee at once), or off_ns when that was not seen either; no
 * holder. */
#define LD_OFFCPU_ON_UNSEEN 2

enum ld_offcpu_kind {
	LD_OFF_BLOCKED = 0,   /* went to sleep (prev_state != running), later woken */
	LD_OFF_PREEMPTED = 1, /* still runnable when switched out: waited for a CPU */
};

/* One off-CPU interval of a target thread, emitted at switch-in when it lasted
 * at least the probe's threshold.  hdr.tid/tgid = the target thread,
 * hdr.ts_ns = on_ns.  Runnable (run-queue) time = on_ns - max(wake_ns, off_ns);
 * blocked time = wake_ns - off_ns (0 for LD_OFF_PREEMPTED). */
struct ld_offcpu {
	struct ld_hdr hdr;
	ld_u64 off_ns;        /* switched out */
	ld_u64 wake_ns;       /* woken (sched_wakeup); 0 when preempted */
	ld_u64 on_ns;         /* switched back in */
	ld_u32 kind;          /* enum ld_offcpu_kind */
	ld_u32 prev_state;    /* task state at switch-out (TASK_INTERRUPTIBLE, ...) */
	ld_s64 kstack_id;     /* kernel stack at switch-out (ld_kstack source LD_PROBE_SCHED),
			       * < 0 = none (always none for LD_OFF_PREEMPTED, and for
			       * blocks in a syscall that names its cause, such as
			       * futex: sched.bpf.c); see LD_OFFCPU_KSTACK_REUSED */
	ld_u32 waker_tid;     /* who woke it (blocked) / who took the CPU (preempted); a
			       * wake-up from an interrupt (timer expiry) names the task
			       * the interrupt hit, often swapper (tid 0) */
	ld_u32 waker_tgid;
	ld_u32 holder_tid;    /* the task that ran on the CPU just before switch-in */
	ld_u32 holder_tgid;
	ld_u32 off_cpu;
	ld_u32 on_cpu;
	ld_u32 syscall_nr;    /* syscall it blocked in (raw nr), ~0 = none/unknown */
	ld_u32 flags;         /* LD_OFFCPU_* */
	/* A new thread's first run is a BLOCKED interval with off_ns = wake_ns = its
	 * creation and the creating thread as waker (prev_state 0). */
	char waker_comm[LD_COMM_LEN];
	char holder_comm[LD_COMM_LEN];
};

/* Off-CPU slices below the threshold, summed per thread, flushed periodically
 * (so that short waits are not lost, just not itemised): by the kernel at the
 * thread's next switch-in once the period (100 ms) is over, at its exit, and by
 * user space at the end of a recording.  hdr.tid = the thread.  Every slice
 * below the threshold is in exactly one record. */
#define LD_AGG_WAKERS 2

/* A thread that ended short waits of the aggregated thread: the first
 * LD_AGG_WAKERS distinct wakers of a period, each with its exact share (the
 * rest is blocked_count/blocked_ns minus theirs).  tid 0 = empty slot. */
struct ld_agg_waker {
	ld_u32 tid;
	ld_u32 tgid;
	ld_u32 count;           /* short blocked slices this thread ended */
	ld_u32 _pad;
	ld_u64 blocked_ns;      /* their blocked time (switch-out to wake-up) */
};

struct ld_sched_agg {
	struct ld_hdr hdr;      /* hdr.ts_ns = end of the aggregation period */
	ld_u64 period_start_ns;
	ld_u64 blocked_ns;
	ld_u64 runnable_ns;
	ld_u32 blocked_count;
	ld_u32 runnable_count;
	/* Layout 3 on: who woke the short blocked slices.  Without it a thread
	 * that waits well under a millisecond for each token (llama-server's
	 * HTTP threads on a condition variable) shows no producer at all.  A
	 * layout-2 record ends before this field. */
	struct ld_agg_waker wakers[LD_AGG_WAKERS];
};

struct ld_migrate {
	struct ld_hdr hdr;
	ld_u32 orig_cpu;
	ld_u32 dest_cpu;
};

/* One cpu-clock sample (99 Hz per CPU by default, --sample-hz) that hit a
 * target thread: hdr.tid was on CPU hdr.cpu at hdr.ts_ns.  kstack_id refers to
 * ld_kstack source LD_PROBE_PERF. */
struct ld_cpu_sample {
	struct ld_hdr hdr;
	ld_s64 kstack_id;    /* < 0 when in user mode or no stack */
	ld_u32 user_mode;    /* 1 = the sample hit user code */
	ld_u32 _pad;
};

/* A kernel stack, symbolised at record time (kallsyms may differ elsewhere).
 * Variable length: `depth` frames of LD_SYM_LEN bytes each follow, innermost
 * first.  Made by user space at the end of a recording, one per stack id the
 * probe's stack map holds; hdr.tgid = hdr.tid = 0.  Each probe has its own
 * stack map, so ids are only unique per `source`: the kstack_id of an
 * ld_offcpu refers to the ld_kstack with source LD_PROBE_SCHED, that of an
 * ld_cpu_sample to source LD_PROBE_PERF. */
#define LD_SYM_LEN 48
#define LD_KSTACK_MAX_DEPTH 32
struct ld_kstack {
	struct ld_hdr hdr;
	ld_s64 stack_id;
	ld_u32 depth;
	ld_u32 source;       /* enum ld_probe_id whose stack map the id is from */
	/* char frames[depth][LD_SYM_LEN]: "function+0x1a", NUL-terminated,
	 * "0xffffffff81234567" when no symbol covers the address */
};

/* ------------------------------------------------------- user-space frames
 * What a sample's thread was running in user space (the perf probe, when it
 * reads user stacks): a native stack (the interrupted instruction, then the
 * return addresses a frame-pointer walk finds) and, in a CPython process, the
 * Python frames of the thread's own thread state.  Stacks are kept once in
 * the kernel's tables; the samples refer to them by id, and user space names
 * them at the end of a recording, per process (ids are only unique per tgid). */

/* ld_cpu_frames.flags */
#define LD_FRAMES_PY_TRUNCATED 1  /* deeper than LD_PY_MAX_DEPTH: the outermost frames are cut */
#define LD_FRAMES_PY_LOST 2       /* Python frames read, but the stack table was full */
#define LD_FRAMES_PY_NO_THREAD 4  /* a Python process, but no thread state of this thread was found
				   * (a native thread, or one that has not run Python yet) */
#define LD_FRAMES_PY_BAD_READ 8   /* a frame could not be read (paged out, or freed under us) */

/* A perf sample (as struct ld_cpu_sample) with the user-space stacks: written
 * instead of ld_cpu_sample while the probe reads user stacks. */
struct ld_cpu_frames {
	struct ld_hdr hdr;
	ld_s64 kstack_id;    /* as ld_cpu_sample: ld_kstack source LD_PROBE_PERF, < 0 none */
	ld_u32 user_mode;    /* 1 = the sample hit user code */
	ld_s32 ustack_id;    /* ld_ustack of hdr.tgid; < 0 = none (-errno of the walk) */
	ld_u64 pystack_id;   /* ld_pystack of hdr.tgid; 0 = no Python frames */
	ld_u32 py_depth;     /* Python frames kept */
	ld_u32 flags;        /* LD_FRAMES_* */
};

/* A native user stack, named: one per (process, stack id) the samples used.
 * Variable length: `depth` struct ld_uframe follow, innermost first. */
#define LD_USTACK_MAX_DEPTH 32
#define LD_UFUNC_LEN 88
#define LD_UMODULE_LEN 32
/* ld_ustack.flags */
#define LD_USTACK_CUT 1       /* the walk went on past an address in no mapped code (a binary
			       * without frame pointers): those frames were dropped */
#define LD_USTACK_NO_MAPS 2   /* the process's mappings were not known: addresses only */
struct ld_uframe {
	ld_u64 offset;                /* address - the symbol's start; the file offset when func
				       * is "" (no symbol covers it); the address when module is "" */
	char func[LD_UFUNC_LEN];      /* demangled, without the parameter list; "" = no symbol */
	char module[LD_UMODULE_LEN];  /* the mapped file's name ("libc.so.6"), "" = not in a file */
};
struct ld_ustack {
	struct ld_hdr hdr;   /* hdr.tgid = the process, hdr.tid = 0 */
	ld_s64 stack_id;
	ld_u32 depth;
	ld_u32 flags;        /* LD_USTACK_* */
	/* struct ld_uframe frames[depth] */
};

/* A Python stack: one per distinct stack of code objects and lines the
 * samples saw.  Variable length: `depth` struct ld_pyframe follow, innermost
 * first. */
#define LD_PY_MAX_DEPTH 32
#define LD_PYFUNC_LEN 56
#define LD_PYFILE_LEN 64
/* ld_pyframe.flags */
#define LD_PYFRAME_UNNAMED 1    /* the code object was not in the names table (full, or not a
				 * code object): func is "?" */
#define LD_PYFRAME_FILE_CUT 2   /* file holds the last LD_PYFILE_LEN - 1 bytes of the path */
struct ld_pyframe {
	ld_s32 line;                /* line number, -1 = unknown */
	ld_u32 flags;               /* LD_PYFRAME_* */
	char func[LD_PYFUNC_LEN];   /* co_qualname (3.11+) or co_name: "Handler.do_POST" */
	char file[LD_PYFILE_LEN];   /* co_filename, its tail when longer */
};
struct ld_pystack {
	struct ld_hdr hdr;   /* hdr.tgid = the process, hdr.tid = 0 */
	ld_u64 stack_id;
	ld_u32 depth;
	ld_u32 flags;        /* LD_FRAMES_PY_TRUNCATED when the stack was cut */
	/* struct ld_pyframe frames[depth] */
};

enum ld_syscall_kind {
	LD_SYS_MMAP = 1, LD_SYS_MUNMAP, LD_SYS_BRK, LD_SYS_MREMAP, LD_SYS_MADVISE,
	/* memory calls below both thresholds, summed per thread (see struct ld_syscall) */
	LD_SYS_MEM_AGG = 15,
	LD_SYS_FSYNC = 16, LD_SYS_FDATASYNC, LD_SYS_SYNC_FILE_RANGE, LD_SYS_MSYNC, LD_SYS_SYNC,
	LD_SYS_SYNCFS,
	/* writeback/balance_dirty_pages: the thread was put to sleep for dirtying pages
	 * faster than the disk writes them.  dur_ns = the pause the kernel chose. */
	LD_SYS_DIRTY_THROTTLE = 22,
	/* Writes to a regular file (the page-cache copy, and any wait inside it) that took at
	 * least the disk probe's ld_file_write_min_ns: arg0 = fd, arg1 = bytes written (ret),
	 * the file's path after the record as for the sync kinds. */
	LD_SYS_WRITE = 23, LD_SYS_PWRITE64, LD_SYS_WRITEV, LD_SYS_PWRITEV, LD_SYS_PWRITEV2,
	/* 33 was a futex wake kind that no probe wrote: not to be reused. */
	LD_SYS_FUTEX_WAIT = 32, LD_SYS_FUTEX_LOCK_PI = 34,
	/* 48-50 were sleep kinds that no probe wrote (a sleep is in the sched probe's off-CPU
	 * record, with its syscall number): not to be reused. */
};

/* futex arg1 for the futex2 syscalls (futex(2) puts its raw op there, < 0x100 | flags). */
#define LD_FUTEX2_WAIT 0x10000   /* futex_wait(2): arg1 = LD_FUTEX2_WAIT | flags */
#define LD_FUTEX2_WAITV 0x20000  /* futex_waitv(2): arg1 = LD_FUTEX2_WAITV | nr_futexes,
				  * arg0 = the first waiter's uaddr */

/* Disk kinds carry the file after the fixed part: `path_len` bytes (no NUL) of
 * "/dir/dir/name", or ".../d1/d2/d3/d4/name" when more than LD_PATH_DEPTH names
 * were needed to reach the root.  Mount points are crossed.  Padded so that
 * hdr.size = sizeof(struct ld_syscall) + a multiple of 8 >= path_len. */
#define LD_PATH_DEPTH 5
#define LD_PATH_NAME_MAX 48   /* longer names are cut to this many bytes */
#define LD_PATH_MAX 256

/* A timed syscall of a target thread.  hdr.ts_ns = exit.
 *
 * arg0/arg1 by kind:
 *   MMAP       arg0 = length, arg1 = flags << 32 | prot;          ret = address or -errno
 *   MUNMAP     arg0 = length, arg1 = address
 *   BRK        arg0 = |new break - old break| bytes, arg1 = old break; ret = new break
 *   MREMAP     arg0 = new length, arg1 = old length
 *   MADVISE    arg0 = length, arg1 = advice (MADV_*)
 *   MEM_AGG    the target's memory calls that were below both thresholds since start_ns:
 *              arg0 = calls, arg1 = bytes (sum of lengths), dur_ns = summed duration,
 *              ret = calls that failed; hdr.ts_ns = exit of the last one
 *   FSYNC, FDATASYNC, SYNCFS  arg0 = fd                        (+ path)
 *   SYNC_FILE_RANGE           arg0 = fd, arg1 = nbytes          (+ path)
 *   MSYNC      arg0 = address, arg1 = length   (no path)
 *   SYNC       (no args, no path)
 *   DIRTY_THROTTLE  start_ns = when it was throttled, dur_ns = pause chosen,
 *              arg0 = pages dirtied since the last pause, arg1 = task's ratelimit (pages/s)
 *   FUTEX_WAIT / FUTEX_LOCK_PI  arg0 = uaddr, arg1 = op (futex(2): FUTEX_WAIT[_BITSET|
 *              _REQUEUE_PI] or FUTEX_LOCK_PI[2] with FUTEX_PRIVATE_FLAG/CLOCK_REALTIME bits;
 *              futex2: LD_FUTEX2_*)
 */
struct ld_syscall {
	struct ld_hdr hdr;
	ld_u64 start_ns;
	ld_u64 dur_ns;
	ld_s64 ret;
	ld_u64 arg0;
	ld_u64 arg1;
	ld_u32 kind;        /* enum ld_syscall_kind */
	ld_u16 path_len;    /* bytes of path after the record (disk kinds), else 0 */
	ld_u16 _pad;
	/* char path[path_len], padded to 8 */
};

/* User page faults of one thread, batched in the kernel: emitted when `count`
 * reaches the batch size (256) or the next fault comes >= 5 ms after first_ns,
 * at the thread's exit, and (by user space, from the map) at the end of a
 * recording.  Every fault is in exactly one batch: sum `count` over a window. */
struct ld_faults {
	struct ld_hdr hdr;  /* hdr.ts_ns = last fault */
	ld_u64 first_ns;
	ld_u32 count;
	ld_u32 _pad;
};

/* One block request, issue to completion.  Kept when the issue ran in a target
 * thread, or when a target thread queued a bio at that (dev, sector) just before
 * (the request was then issued by kblockd, a plug flush or another thread). */
#define LD_RWBS_WRITE 1
#define LD_RWBS_SYNC 2
#define LD_RWBS_FLUSH 4     /* preflush or FUA */
#define LD_RWBS_DISCARD 8
#define LD_RWBS_META 16
struct ld_block_rq {
	struct ld_hdr hdr;  /* hdr.ts_ns = completion; tgid/tid = issuer (see above) */
	ld_u64 issue_ns;
	ld_u64 sector;
	ld_u32 dev;         /* kernel dev_t: major << 20 | minor */
	ld_u32 bytes;
	ld_u32 rwbs;        /* LD_RWBS_* */
	ld_u32 error;       /* completion status: (int32_t)error = -errno, 0 = ok */
};

enum ld_reclaim_kind {
	LD_RECLAIM_DIRECT = 0,   /* vmscan direct reclaim: the allocation waited for reclaim */
	LD_RECLAIM_COMPACT = 1,  /* compaction of one zone in the thread's context */
	LD_RECLAIM_MEMCG = 2,    /* reclaim because the thread's cgroup hit its limit */
	LD_RECLAIM_NODE = 3,     /* NUMA node (zone_reclaim_mode) reclaim */
	LD_RECLAIM_THROTTLED = 4,/* slept in reclaim_throttle(); nr_reclaimed = reason */
};
/* A reclaim or compaction stall of a target thread. */
struct ld_reclaim {
	struct ld_hdr hdr;  /* hdr.ts_ns = end */
	ld_u64 start_ns;
	ld_u64 nr_reclaimed; /* pages; COMPACT: compaction status; THROTTLED: reason */
	ld_u32 kind;         /* enum ld_reclaim_kind */
	ld_u32 order;        /* allocation order (DIRECT, MEMCG, NODE), else 0 */
};

/* How the GIL's futex words were found: the address a thread waits on while
 * inside take_gil (local symbol, needs .symtab) or PyEval_RestoreThread
 * (exported, for stripped builds), learned with temporary uprobes. */
enum ld_gil_method { LD_GIL_TAKE_GIL = 1, LD_GIL_RESTORE_THREAD = 2 };  /* 3: never written, not to be reused */
/* The futex words of a process's GIL: futex waits of that tgid on an address
 * in [uaddr_lo, uaddr_hi) are GIL waits.  One record per learned word (glibc
 * condvars wait on two alternating words, the mutex on a third); made in user
 * space, hdr.tid = 0, hdr.ts_ns = when user space saw it. */
struct ld_gil_addr {
	struct ld_hdr hdr;
	ld_u64 uaddr_lo;
	ld_u64 uaddr_hi;
	ld_u32 method;      /* enum ld_gil_method */
	ld_u32 _pad;
};

enum ld_gil_wait_kind {
	LD_GIL_WAIT_ONE = 0, /* one futex wait >= the probe's threshold */
	LD_GIL_WAIT_AGG = 1, /* shorter waits of one thread, summed */
};

/* A futex wait on a GIL address (see ld_gil_addr): hdr.ts_ns = the wait's end
 * (AGG: the last summed wait's end).  One GIL acquisition can be several
 * futex waits: take_gil waits `switch interval` with a timeout (ret =
 * -ETIMEDOUT), then asks the holder to drop and waits again. */
struct ld_gil_wait {
	struct ld_hdr hdr;
	ld_u64 start_ns;    /* ONE: wait start; AGG: first summed wait's start */
	ld_u64 dur_ns;      /* ONE: the wait; AGG: sum of the waits */
	ld_u64 uaddr;       /* the futex word (AGG: of the last wait) */
	ld_u64 max_ns;      /* longest wait (ONE: = dur_ns) */
	ld_s64 ret;         /* ONE: futex return (0, -ETIMEDOUT, -EAGAIN...); AGG: 0 */
	ld_u32 count;       /* waits in this record (ONE: 1) */
	ld_u32 method;      /* enum ld_gil_method that found the address */
	ld_u32 kind;        /* enum ld_gil_wait_kind */
	ld_u32 _pad;
};

/* What a CUDA call does to the host thread (struct ld_cuda_call.kind). */
enum ld_cuda_kind {
	LD_CUDA_LAUNCH = 1, /* kernel or graph launches and async copies: work queued on the GPU,
			     * summed per thread: a record per burst (ended by the thread's next
			     * blocking call, or 5 ms after its first launch, or the recording's end) */
	LD_CUDA_SYNC = 2,   /* the host waited for the GPU: stream/event/context/device sync */
	LD_CUDA_MEMCPY = 3, /* a synchronous copy: waits for the GPU's queued work, then copies */
	LD_CUDA_ALLOC = 4,  /* device memory allocated or freed (cudaFree syncs the device) */
};

/* The CUDA function (struct ld_cuda_call.api): driver (libcuda) and runtime
 * (libcudart) entry points.  Names: ld::trace::cuda_api_name() (agent/trace/cuda_api.hpp). */
enum ld_cuda_api {
	LD_CUDA_API_UNKNOWN = 0,
	/* driver */
	LD_CU_LAUNCH_KERNEL = 1, LD_CU_LAUNCH_KERNEL_EX = 2, LD_CU_LAUNCH_COOPERATIVE = 3,
	LD_CU_GRAPH_LAUNCH = 4, LD_CU_STREAM_SYNCHRONIZE = 5, LD_CU_CTX_SYNCHRONIZE = 6,
	LD_CU_EVENT_SYNCHRONIZE = 7, LD_CU_MEMCPY_DTOH = 8, LD_CU_MEMCPY_HTOD = 9, LD_CU_MEMCPY = 10,
	LD_CU_MEMCPY_ASYNC = 11, LD_CU_MEM_ALLOC = 12, LD_CU_MEM_FREE = 13,
	/* runtime */
	LD_CUDART_LAUNCH_KERNEL = 32, LD_CUDART_LAUNCH_KERNEL_EXC = 33, LD_CUDART_GRAPH_LAUNCH = 34,
	LD_CUDART_STREAM_SYNCHRONIZE = 35, LD_CUDART_DEVICE_SYNCHRONIZE = 36, LD_CUDART_EVENT_SYNCHRONIZE = 37,
	LD_CUDART_MEMCPY = 38, LD_CUDART_MEMCPY_ASYNC = 39, LD_CUDART_MALLOC = 40, LD_CUDART_FREE = 41,
	LD_CUDA_API_MAX = 64
};

/* CUDA calls of one thread (probe cuda, uprobes on libcuda/libcudart).  A call
 * made inside another traced call (the runtime calling the driver) is part of
 * the outer one: only the outermost is recorded.  hdr.ts_ns = the call's return
 * (LAUNCH: the last counted call's entry). */
struct ld_cuda_call {
	struct ld_hdr hdr;
	ld_u64 start_ns;  /* entry (LAUNCH: the first summed call's entry) */
	ld_u64 dur_ns;    /* time in the call (LAUNCH: 0, launches are counted at entry only) */
	ld_u64 arg;       /* SYNC: the stream or event (0: context/device); MEMCPY, ALLOC: bytes */
	ld_s64 ret;       /* the CUresult/cudaError_t (LAUNCH: of the last call) */
	ld_u32 count;     /* calls in this record (1 but for LAUNCH) */
	ld_u16 kind;      /* enum ld_cuda_kind */
	ld_u16 api;       /* enum ld_cuda_api (LAUNCH: of the last call) */
};

/* TCP states as in include/net/tcp_states.h (and /proc/net/tcp's "st" column). */
enum ld_tcp_states {
	LD_TCP_ESTABLISHED = 1, LD_TCP_SYN_SENT = 2, LD_TCP_SYN_RECV = 3, LD_TCP_FIN_WAIT1 = 4,
	LD_TCP_FIN_WAIT2 = 5, LD_TCP_TIME_WAIT = 6, LD_TCP_CLOSE = 7, LD_TCP_CLOSE_WAIT = 8,
	LD_TCP_LAST_ACK = 9, LD_TCP_LISTEN = 10, LD_TCP_CLOSING = 11, LD_TCP_NEW_SYN_RECV = 12,
};

/* ld_gpu_sample.reasons: NVML's clocks event (throttle) reasons, the bits of
 * nvmlClocksEventReason* (nvml.h) as the driver reports them. */
enum ld_gpu_reasons {
	LD_GPU_R_IDLE = 0x1,            /* nothing to run: clocks lowered */
	LD_GPU_R_APP_CLOCKS = 0x2,      /* application clocks setting */
	LD_GPU_R_SW_POWER_CAP = 0x4,    /* the power limit */
	LD_GPU_R_HW_SLOWDOWN = 0x8,     /* hardware slowdown (thermal or power brake) */
	LD_GPU_R_SYNC_BOOST = 0x10,
	LD_GPU_R_SW_THERMAL = 0x20,     /* the driver's thermal limit */
	LD_GPU_R_HW_THERMAL = 0x40,
	LD_GPU_R_HW_POWER_BRAKE = 0x80,
	LD_GPU_R_DISPLAY_CLOCKS = 0x100,
};

/* One GPU's state, sampled through NVML by user space (the nvml probe). ~0 = not
 * reported by this driver or device. */
struct ld_gpu_sample {
	struct ld_hdr hdr;       /* tgid = the first target; tid 0 */
	ld_u64 reasons;          /* enum ld_gpu_reasons, as NVML reports them */
	ld_u64 mem_used;         /* bytes */
	ld_u64 mem_total;
	ld_u32 device;           /* NVML index */
	ld_u32 util_gpu;         /* % of the last sample period a kernel ran */
	ld_u32 util_mem;         /* % of it the memory was read or written */
	ld_u32 sm_mhz;
	ld_u32 sm_max_mhz;
	ld_u32 temp_c;
	ld_u32 power_mw;
	ld_u32 power_limit_mw;
};

/* ld_tcp_state.flags */
enum ld_tcp_state_flags {
	/* newstate TIME_WAIT is inferred: the kernel never reports a full socket entering
	 * TIME_WAIT (tcp_time_wait() hands the connection to a timewait mini-socket and the
	 * full socket goes FIN_WAIT2/CLOSING -> CLOSE); the record is that CLOSE without an
	 * error on the socket.  The end of TIME_WAIT is not traced at all: see the
	 * tcp_timewait count of ld_net_sample. */
	LD_TCP_F_TW_INFERRED = 1,
	LD_TCP_F_LISTEN_PORT = 2, /* matched a listening port of a target (server side) */
	LD_TCP_F_TARGET_SOCK = 4, /* matched a socket a target touched (client side too) */
};

/* A state change of a TCP socket of a target: connection set-up (SYN_RECV/SYN_SENT ->
 * ESTABLISHED), entering TIME_WAIT, and CLOSE. */
struct ld_tcp_state {
	struct ld_hdr hdr;  /* tgid/tid = current task, often not the target (softirq) */
	ld_u64 sock_id;
	ld_u16 lport;       /* host order */
	ld_u16 rport;
	ld_u16 oldstate;    /* enum ld_tcp_states */
	ld_u16 newstate;
	ld_u16 family;      /* AF_INET / AF_INET6 */
	ld_u16 flags;       /* enum ld_tcp_state_flags */
	ld_u32 _pad;
};

enum ld_tcp_retrans_flags {
	LD_TCP_RT_SYNACK = 1, /* a SYN-ACK retransmit of a listener (tcp_retransmit_synack) */
};

struct ld_tcp_retrans {
	struct ld_hdr hdr;
	ld_u64 sock_id;
	ld_u16 lport;
	ld_u16 rport;
	ld_u16 state;       /* enum ld_tcp_states of the socket */
	ld_u16 flags;       /* enum ld_tcp_retrans_flags */
};

/* Sampled from /proc/net/{netstat,sockstat,snmp} by user space. Cumulative. */
struct ld_net_sample {
	struct ld_hdr hdr;
	ld_u64 listen_overflows;
	ld_u64 listen_drops;
	ld_u64 tcp_timewait;     /* sockets in TIME_WAIT now (sockstat "tw") */
	ld_u64 retrans_segs;
	ld_u64 active_opens;
	ld_u64 passive_opens;
};

/* Sampled from the target's cgroup (v1 cpu,cpuacct / memory or v2). Cumulative
 * except the *_now fields; ~0 = unknown. */
struct ld_cgroup_sample {
	struct ld_hdr hdr;       /* tgid = the target whose cgroup this is */
	ld_u64 nr_periods;
	ld_u64 nr_throttled;
	ld_u64 throttled_ns;
	ld_u64 quota_us;         /* ~0 = no limit */
	ld_u64 period_us;
	ld_u64 mem_usage_now;
	ld_u64 mem_limit;
	ld_u64 mem_events_high;  /* v2 memory.events high / v1 failcnt */
	ld_u64 mem_events_oom;
};

struct ld_cpu_freq {
	struct ld_hdr hdr;
	ld_u32 cpu_id;
	ld_u32 khz;
	ld_u32 max_khz;          /* 0 = unknown */
	ld_u32 sampled;          /* 1 = read from sysfs, 0 = power:cpu_frequency */
};

/* Per-probe counters, one slot per enum ld_probe_id in a PERCPU_ARRAY map.
 * submitted = written + dropped, always. */
struct ld_probe_counters {
	ld_u64 submitted;
	ld_u64 dropped;
};

/* ------------------------------------------------------------ layout checks
 * The records above are the on-disk format of every trace written: a change
 * of any size or offset checked here fails the build until it is meant, and
 * then needs LD_RECORD_LAYOUT_VERSION bumped and the golden records trace
 * regenerated (tests/unit/golden_records_test.cpp).  Checked wherever this
 * header is compiled: C++ (the agent, the trace reader) and the BPF objects
 * (C11), so the two sides cannot disagree either. */
#ifdef __cplusplus
#define LD_LAYOUT_CHECK(cond) \
	static_assert(cond, "record layout changed: bump LD_RECORD_LAYOUT_VERSION (bpf/events.h)")
#else
#define LD_LAYOUT_CHECK(cond) \
	_Static_assert(cond, "record layout changed: bump LD_RECORD_LAYOUT_VERSION (bpf/events.h)")
#endif
#define LD_SIZE(type, bytes) LD_LAYOUT_CHECK(sizeof(struct type) == (bytes))
#define LD_AT(type, field, offset) LD_LAYOUT_CHECK(__builtin_offsetof(struct type, field) == (offset))

LD_LAYOUT_CHECK(LD_SYM_LEN == 48); /* ld_kstack frames */
LD_LAYOUT_CHECK(LD_COMM_LEN == 16);
LD_SIZE(ld_hdr, 24); LD_AT(ld_hdr, type, 0); LD_AT(ld_hdr, size, 2); LD_AT(ld_hdr, cpu, 4);
LD_AT(ld_hdr, tgid, 8); LD_AT(ld_hdr, tid, 12); LD_AT(ld_hdr, ts_ns, 16);
LD_SIZE(ld_tls_io, 48); LD_AT(ld_tls_io, ssl_id, 24); LD_AT(ld_tls_io, len, 32); LD_AT(ld_tls_io, api, 40);
LD_AT(ld_tls_io, cls, 43);
LD_SIZE(ld_sock_io, 64); LD_AT(ld_sock_io, hdr, 0); LD_AT(ld_sock_io, sock_id, 24);
LD_AT(ld_sock_io, unsent, 32); LD_AT(ld_sock_io, tcp, 36); LD_AT(ld_sock_io, ret, 40); LD_AT(ld_sock_io, fd, 48);
LD_AT(ld_sock_io, lport, 52); LD_AT(ld_sock_io, rport, 54); LD_AT(ld_sock_io, family, 56);
LD_AT(ld_sock_io, dir, 58); LD_AT(ld_sock_io, syscall, 59); LD_AT(ld_sock_io, cls, 60);
LD_AT(ld_sock_io, sse_events, 61);
LD_SIZE(ld_h2_frame, 12); LD_AT(ld_h2_frame, len, 4); LD_AT(ld_h2_frame, type, 8);
LD_AT(ld_h2_frame, messages, 11);
LD_SIZE(ld_h2_frames, 144); LD_AT(ld_h2_frames, sock_id, 24); LD_AT(ld_h2_frames, dir, 32);
LD_AT(ld_h2_frames, count, 33); LD_AT(ld_h2_frames, rport, 36); LD_AT(ld_h2_frames, lport, 38);
LD_AT(ld_h2_frames, tls, 40); LD_AT(ld_h2_frames, f, 48);
LD_SIZE(ld_sock_close, 40); LD_AT(ld_sock_close, hdr, 0); LD_AT(ld_sock_close, sock_id, 24);
LD_AT(ld_sock_close, fd, 32);
LD_SIZE(ld_task_exit, 32); LD_AT(ld_task_exit, hdr, 0); LD_AT(ld_task_exit, exit_code, 24);
LD_AT(ld_task_exit, is_process, 28);
LD_SIZE(ld_offcpu, 128); LD_AT(ld_offcpu, hdr, 0); LD_AT(ld_offcpu, off_ns, 24);
LD_AT(ld_offcpu, wake_ns, 32); LD_AT(ld_offcpu, on_ns, 40); LD_AT(ld_offcpu, kind, 48);
LD_AT(ld_offcpu, prev_state, 52); LD_AT(ld_offcpu, kstack_id, 56); LD_AT(ld_offcpu, waker_tid, 64);
LD_AT(ld_offcpu, waker_tgid, 68); LD_AT(ld_offcpu, holder_tid, 72);
LD_AT(ld_offcpu, holder_tgid, 76); LD_AT(ld_offcpu, off_cpu, 80); LD_AT(ld_offcpu, on_cpu, 84);
LD_AT(ld_offcpu, syscall_nr, 88); LD_AT(ld_offcpu, flags, 92); LD_AT(ld_offcpu, waker_comm, 96);
LD_AT(ld_offcpu, holder_comm, 112);
LD_SIZE(ld_sched_agg, 104); LD_AT(ld_sched_agg, hdr, 0); LD_AT(ld_sched_agg, period_start_ns, 24);
LD_AT(ld_sched_agg, blocked_ns, 32); LD_AT(ld_sched_agg, runnable_ns, 40);
LD_AT(ld_sched_agg, blocked_count, 48); LD_AT(ld_sched_agg, runnable_count, 52);
LD_AT(ld_sched_agg, wakers, 56);
LD_SIZE(ld_agg_waker, 24); LD_AT(ld_agg_waker, tid, 0); LD_AT(ld_agg_waker, tgid, 4);
LD_AT(ld_agg_waker, count, 8); LD_AT(ld_agg_waker, blocked_ns, 16);
LD_SIZE(ld_migrate, 32); LD_AT(ld_migrate, hdr, 0); LD_AT(ld_migrate, orig_cpu, 24);
LD_AT(ld_migrate, dest_cpu, 28);
LD_SIZE(ld_cpu_sample, 40); LD_AT(ld_cpu_sample, hdr, 0); LD_AT(ld_cpu_sample, kstack_id, 24);
LD_AT(ld_cpu_sample, user_mode, 32);
LD_SIZE(ld_kstack, 40); LD_AT(ld_kstack, hdr, 0); LD_AT(ld_kstack, stack_id, 24);
LD_AT(ld_kstack, depth, 32); LD_AT(ld_kstack, source, 36);
LD_SIZE(ld_syscall, 72); LD_AT(ld_syscall, hdr, 0); LD_AT(ld_syscall, start_ns, 24);
LD_AT(ld_syscall, dur_ns, 32); LD_AT(ld_syscall, ret, 40); LD_AT(ld_syscall, arg0, 48);
LD_AT(ld_syscall, arg1, 56); LD_AT(ld_syscall, kind, 64); LD_AT(ld_syscall, path_len, 68);
LD_SIZE(ld_faults, 40); LD_AT(ld_faults, hdr, 0); LD_AT(ld_faults, first_ns, 24);
LD_AT(ld_faults, count, 32);
LD_SIZE(ld_block_rq, 56); LD_AT(ld_block_rq, hdr, 0); LD_AT(ld_block_rq, issue_ns, 24);
LD_AT(ld_block_rq, sector, 32); LD_AT(ld_block_rq, dev, 40); LD_AT(ld_block_rq, bytes, 44);
LD_AT(ld_block_rq, rwbs, 48); LD_AT(ld_block_rq, error, 52);
LD_SIZE(ld_reclaim, 48); LD_AT(ld_reclaim, hdr, 0); LD_AT(ld_reclaim, start_ns, 24);
LD_AT(ld_reclaim, nr_reclaimed, 32); LD_AT(ld_reclaim, kind, 40); LD_AT(ld_reclaim, order, 44);
LD_SIZE(ld_gil_addr, 48); LD_AT(ld_gil_addr, hdr, 0); LD_AT(ld_gil_addr, uaddr_lo, 24);
LD_AT(ld_gil_addr, uaddr_hi, 32); LD_AT(ld_gil_addr, method, 40);
LD_SIZE(ld_gil_wait, 80); LD_AT(ld_gil_wait, hdr, 0); LD_AT(ld_gil_wait, start_ns, 24);
LD_AT(ld_gil_wait, dur_ns, 32); LD_AT(ld_gil_wait, uaddr, 40); LD_AT(ld_gil_wait, max_ns, 48);
LD_AT(ld_gil_wait, ret, 56); LD_AT(ld_gil_wait, count, 64); LD_AT(ld_gil_wait, method, 68);
LD_AT(ld_gil_wait, kind, 72);
LD_SIZE(ld_tcp_state, 48); LD_AT(ld_tcp_state, hdr, 0); LD_AT(ld_tcp_state, sock_id, 24);
LD_AT(ld_tcp_state, lport, 32); LD_AT(ld_tcp_state, rport, 34); LD_AT(ld_tcp_state, oldstate, 36);
LD_AT(ld_tcp_state, newstate, 38); LD_AT(ld_tcp_state, family, 40); LD_AT(ld_tcp_state, flags, 42);
LD_SIZE(ld_tcp_retrans, 40); LD_AT(ld_tcp_retrans, hdr, 0); LD_AT(ld_tcp_retrans, sock_id, 24);
LD_AT(ld_tcp_retrans, lport, 32); LD_AT(ld_tcp_retrans, rport, 34);
LD_AT(ld_tcp_retrans, state, 36); LD_AT(ld_tcp_retrans, flags, 38);
LD_SIZE(ld_net_sample, 72); LD_AT(ld_net_sample, hdr, 0);
LD_AT(ld_net_sample, listen_overflows, 24); LD_AT(ld_net_sample, listen_drops, 32);
LD_AT(ld_net_sample, tcp_timewait, 40); LD_AT(ld_net_sample, retrans_segs, 48);
LD_AT(ld_net_sample, active_opens, 56); LD_AT(ld_net_sample, passive_opens, 64);
LD_SIZE(ld_cgroup_sample, 96); LD_AT(ld_cgroup_sample, hdr, 0);
LD_AT(ld_cgroup_sample, nr_periods, 24); LD_AT(ld_cgroup_sample, nr_throttled, 32);
LD_AT(ld_cgroup_sample, throttled_ns, 40); LD_AT(ld_cgroup_sample, quota_us, 48);
LD_AT(ld_cgroup_sample, period_us, 56); LD_AT(ld_cgroup_sample, mem_usage_now, 64);
LD_AT(ld_cgroup_sample, mem_limit, 72); LD_AT(ld_cgroup_sample, mem_events_high, 80);
LD_AT(ld_cgroup_sample, mem_events_oom, 88);
LD_SIZE(ld_cpu_freq, 40); LD_AT(ld_cpu_freq, hdr, 0); LD_AT(ld_cpu_freq, cpu_id, 24);
LD_AT(ld_cpu_freq, khz, 28); LD_AT(ld_cpu_freq, max_khz, 32); LD_AT(ld_cpu_freq, sampled, 36);
LD_SIZE(ld_cpu_frames, 56); LD_AT(ld_cpu_frames, hdr, 0); LD_AT(ld_cpu_frames, kstack_id, 24);
LD_AT(ld_cpu_frames, user_mode, 32); LD_AT(ld_cpu_frames, ustack_id, 36);
LD_AT(ld_cpu_frames, pystack_id, 40); LD_AT(ld_cpu_frames, py_depth, 48); LD_AT(ld_cpu_frames, flags, 52);
LD_SIZE(ld_uframe, 128); LD_AT(ld_uframe, offset, 0); LD_AT(ld_uframe, func, 8); LD_AT(ld_uframe, module, 96);
LD_SIZE(ld_ustack, 40); LD_AT(ld_ustack, hdr, 0); LD_AT(ld_ustack, stack_id, 24); LD_AT(ld_ustack, depth, 32);
LD_AT(ld_ustack, flags, 36);
LD_SIZE(ld_pyframe, 128); LD_AT(ld_pyframe, line, 0); LD_AT(ld_pyframe, flags, 4); LD_AT(ld_pyframe, func, 8);
LD_AT(ld_pyframe, file, 64);
LD_SIZE(ld_pystack, 40); LD_AT(ld_pystack, hdr, 0); LD_AT(ld_pystack, stack_id, 24); LD_AT(ld_pystack, depth, 32);
LD_AT(ld_pystack, flags, 36);
LD_SIZE(ld_gpu_sample, 80); LD_AT(ld_gpu_sample, hdr, 0); LD_AT(ld_gpu_sample, reasons, 24);
LD_AT(ld_gpu_sample, mem_used, 32); LD_AT(ld_gpu_sample, mem_total, 40);
LD_AT(ld_gpu_sample, device, 48); LD_AT(ld_gpu_sample, util_gpu, 52); LD_AT(ld_gpu_sample, util_mem, 56);
LD_AT(ld_gpu_sample, sm_mhz, 60); LD_AT(ld_gpu_sample, sm_max_mhz, 64); LD_AT(ld_gpu_sample, temp_c, 68);
LD_AT(ld_gpu_sample, power_mw, 72); LD_AT(ld_gpu_sample, power_limit_mw, 76);
LD_SIZE(ld_cuda_call, 64); LD_AT(ld_cuda_call, hdr, 0); LD_AT(ld_cuda_call, start_ns, 24);
LD_AT(ld_cuda_call, dur_ns, 32); LD_AT(ld_cuda_call, arg, 40); LD_AT(ld_cuda_call, ret, 48);
LD_AT(ld_cuda_call, count, 56); LD_AT(ld_cuda_call, kind, 60); LD_AT(ld_cuda_call, api, 62);
LD_SIZE(ld_probe_counters, 16); LD_AT(ld_probe_counters, submitted, 0);
LD_AT(ld_probe_counters, dropped, 8);

#undef LD_AT
#undef LD_SIZE
#undef LD_LAYOUT_CHECK
