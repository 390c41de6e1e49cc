/* Event records shared by the BPF programs (bpf/NAME.bpf.c) and user space.
 *
 * Plain fixed-width types only, no kernel headers: this file is included by
 * BPF C (after vmlinux.h) and by C++ (after <cstdint>).  Every record starts
 * with struct ld_hdr; `type` selects the layout and `size` is the whole
 * record in bytes, so a reader can skip types it does not know (a newer
 * agent's trace read by an older one).
 *
 * These records are also the on-disk format inside .ldtrace chunks: any
 * change to an existing layout needs LD_TRACE_FORMAT_VERSION bumped.
 *
 * Privacy: no record carries socket payload bytes.  The kernel reads a short
 * prefix of each send/recv to *classify* it (enum ld_payload_class) and only
 * the class leaves the kernel.
 */
#pragma once

#ifndef __VMLINUX_H__
#include <stdint.h>
typedef uint8_t ld_u8;
typedef uint16_t ld_u16;
typedef uint32_t ld_u32;
typedef uint64_t ld_u64;
typedef int64_t ld_s64;
#else
typedef __u8 ld_u8;
typedef __u16 ld_u16;
typedef __u32 ld_u32;
typedef __u64 ld_u64;
typedef __s64 ld_s64;
#endif

enum ld_event_type {
	LD_EV_SOCK_IO = 1,   /* struct ld_sock_io: one send or receive on a socket */
	LD_EV_SOCK_CLOSE = 2,/* struct ld_sock_close: close() of a socket fd */
	LD_EV_TASK_EXIT = 3, /* struct ld_task_exit: a target thread or process exited */
	LD_EV_TYPE_MAX
};

/* Probe ids index the per-probe counters (submitted/dropped) in the kernel. */
enum ld_probe_id {
	LD_PROBE_SOCK = 0,
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

struct ld_sock_io {
	struct ld_hdr hdr;   /* hdr.ts_ns = syscall exit */
	ld_u64 sock_id;      /* opaque per-socket id (stable for the socket's life) */
	ld_u64 dur_ns;       /* syscall entry to exit */
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

/* Per-probe counters, one slot per enum ld_probe_id in a PERCPU_ARRAY map.
 * submitted = written + dropped, always. */
struct ld_probe_counters {
	ld_u64 submitted;
	ld_u64 dropped;
};

/* The kernel classifies at most this many bytes of a payload. */
#define LD_CLASSIFY_BYTES 64
