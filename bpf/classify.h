/* Payload classification: what do the first bytes of a send/recv look like?
 *
 * Shared, verbatim, by the BPF side (sock.bpf.c, where it runs on a per-CPU
 * scratch copy of the user buffer) and user space (unit tests).  Only the
 * resulting class leaves the kernel, never the bytes.
 *
 * Contract: the caller zero-fills the scratch past the n copied bytes (at
 * least up to LD_SCRATCH_BYTES + 16).  No literal we look for contains a NUL,
 * so a match can never run past the payload and the code needs no `i < n`
 * test per byte -- which is what keeps the verifier's path count small.
 *
 * Written for the verifier: every loop has a constant bound, every variable
 * index is masked; the scanning steps are BPF *global* functions, verified
 * once each on their own instead of once per call site and caller path
 * (inlined, the classifier exceeded the 1M-instruction verifier budget).
 */
#pragma once

#include "events.h"

#ifdef __VMLINUX_H__
#define LD_INLINE static __always_inline
#define LD_GLOBAL __attribute__((noinline))
/* Keeps clang from dropping an index mask it can prove redundant: the
 * verifier cannot, and rejects the access as unbounded. */
#define LD_BOUNDED(v) asm volatile("" : "+r"(v))
#else
#define LD_INLINE static inline
#define LD_GLOBAL static inline
#define LD_BOUNDED(v) ((void)0)
#endif

/* Bytes classified.  An HTTP response's header block can be a few hundred
 * bytes, and servers such as aiohttp coalesce headers with the first SSE
 * event, so we look that far for "\r\n\r\n" followed by "data:". */
#define LD_SCRATCH_BYTES 512
#define LD_SCRATCH_MASK (LD_SCRATCH_BYTES - 1)

/* 2 KiB although only LD_SCRATCH_BYTES are classified: gathering iovecs writes
 * at an offset (<= 511) plus a length (<= 1023) that the verifier must see in
 * bounds, and the reads below may look up to 16 bytes past the mask. */
struct ld_scratch {
	unsigned char b[2048];
};

LD_INLINE unsigned char ld_byte(const struct ld_scratch *s, unsigned int i)
{
	unsigned int j = i & LD_SCRATCH_MASK;

	LD_BOUNDED(j);
	return s->b[j & LD_SCRATCH_MASK];
}

/* Does the literal `lit` (1..8 bytes, no NUL) stand at offset `off`? */
LD_INLINE int ld_starts(const struct ld_scratch *s, unsigned int off, const char *lit,
			unsigned int len)
{
	for (unsigned int i = 0; i < 8 && i < len; i++) {
		if (ld_byte(s, off + i) != (unsigned char)lit[i])
			return 0;
	}
	return 1;
}

LD_INLINE int ld_is_hex(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Skips chunked-encoding framing at `off`: an optional "\r\n" that closes the
 * previous chunk, then a chunk-size line "1a\r\n" (extensions after ';' are
 * allowed).  Returns (offset after the framing) << 1 | (size line was "0");
 * `off` << 1 when there is no size line there. */
LD_GLOBAL int ld_skip_chunk_frame(const struct ld_scratch *s, unsigned int off)
{
	unsigned int i, digits = 0;
	int nonzero = 0;

	if (!s || off >= LD_SCRATCH_BYTES)
		return (int)(off << 1);
	i = off;
	if (ld_byte(s, i) == '\r' && ld_byte(s, i + 1) == '\n')
		i += 2;
	for (unsigned int k = 0; k < 8; k++) {
		unsigned char c = ld_byte(s, i);

		if (!ld_is_hex(c))
			break;
		nonzero |= c != '0';
		digits++;
		i++;
	}
	if (!digits)
		return (int)(off << 1);
	if (ld_byte(s, i) == ';') { /* chunk extensions: "1a;name=value\r\n" */
		for (unsigned int k = 0; k < 32; k++) {
			unsigned char c = ld_byte(s, i);

			if (c == '\r' || c == 0)
				break;
			i++;
		}
	}
	if (ld_byte(s, i) != '\r' || ld_byte(s, i + 1) != '\n')
		return (int)(off << 1); /* hex-looking text such as "deadbeef", not a size line */
	return (int)(((i + 2) << 1) | !nonzero);
}

/* Offset just past the "\r\n\r\n" that ends an HTTP header block, or 0. */
LD_GLOBAL int ld_header_end(const struct ld_scratch *s, unsigned int n)
{
	if (!s)
		return 0;
	for (unsigned int i = 0; i + 3 < LD_SCRATCH_BYTES; i++) {
		if (i + 3 >= n)
			break;
		if (s->b[i] == '\r' && s->b[i + 1] == '\n' && s->b[i + 2] == '\r' &&
		    s->b[i + 3] == '\n')
			return i + 4;
	}
	return 0;
}

/* Offset just past the next '\n' at or after `off` (at most 128 bytes on),
 * or LD_SCRATCH_BYTES when there is none. */
LD_GLOBAL int ld_next_line(const struct ld_scratch *s, unsigned int off)
{
	if (!s)
		return LD_SCRATCH_BYTES;
	for (unsigned int k = 0; k < 128; k++) {
		unsigned int i = off + k;
		unsigned char c;

		if (i >= LD_SCRATCH_BYTES)
			break;
		c = ld_byte(s, i);
		if (c == '\n')
			return i + 1;
		if (c == 0)
			break;
	}
	return LD_SCRATCH_BYTES;
}

/* Does the JSON from `off` on (within the classified prefix) mark an event
 * without generated content?  `"choices":[]` is the usage summary of OpenAI /
 * vLLM streams (include_usage) and llama.cpp's last event; `"delta":{}` is the
 * finish chunk of chat streams.  Only keys can match: a quote inside
 * generated text is escaped as \". One optional space after the colon
 * covers Python's json.dumps.  Looks at most LD_CONTENTLESS_SCAN bytes on:
 * the verifier caps the jumps on one path at 8192, and ~20 per byte is the
 * worst case here; the keys sit well inside that in every server seen. */
#define LD_CONTENTLESS_SCAN 320
LD_GLOBAL int ld_contentless(const struct ld_scratch *s, unsigned int off, unsigned int n)
{
	if (!s)
		return 0;
	for (unsigned int k = 0; k < LD_CONTENTLESS_SCAN; k++) {
		unsigned int i = off + k, v;

		if (i + 10 > n || i >= LD_SCRATCH_BYTES)
			break;
		if (ld_byte(s, i) != '"')
			continue;
		if (ld_starts(s, i, "\"choices", 8) && ld_starts(s, i + 8, "\":", 2)) {
			v = i + 10;
			if (ld_byte(s, v) == ' ')
				v++;
			if (ld_starts(s, v, "[]", 2))
				return 1;
		} else if (ld_starts(s, i, "\"delta\":", 8)) {
			v = i + 8;
			if (ld_byte(s, v) == ' ')
				v++;
			if (ld_starts(s, v, "{}", 2))
				return 1;
		}
	}
	return 0;
}

LD_INLINE int ld_sse_field(const struct ld_scratch *s, unsigned int i)
{
	unsigned int d;

	if (ld_starts(s, i, "data:", 5)) {
		d = i + 5;
		if (ld_byte(s, d) == ' ')
			d++;
		return ld_starts(s, d, "[DONE]", 6) ? LD_PC_SSE_DONE : LD_PC_SSE_DATA;
	}
	return -1;
}

/* The class of the SSE event that starts at `off`, or -1 when no SSE field
 * starts there.  An "event:"/"id:" line before "data:" is part of the same
 * event (Anthropic-style streams name each event). */
LD_GLOBAL int ld_classify_sse(const struct ld_scratch *s, unsigned int off)
{
	int cls;
	unsigned int next;

	if (!s)
		return -1;
	cls = ld_sse_field(s, off);
	if (cls >= 0)
		return cls;
	if (ld_starts(s, off, "event:", 6) || ld_starts(s, off, "id:", 3)) {
		next = ld_next_line(s, off);
		cls = ld_sse_field(s, next);
		if (cls >= 0)
			return cls;
		return LD_PC_SSE_OTHER;
	}
	if (ld_byte(s, off) == ':' || ld_starts(s, off, "retry:", 6))
		return LD_PC_SSE_OTHER; /* a comment (": ping" keep-alive) or a retry hint */
	return -1;
}

LD_INLINE int ld_is_request_line(const struct ld_scratch *s)
{
	return ld_starts(s, 0, "GET ", 4) || ld_starts(s, 0, "POST ", 5) ||
	       ld_starts(s, 0, "PUT ", 4) || ld_starts(s, 0, "HEAD ", 5) ||
	       ld_starts(s, 0, "DELETE ", 7) || ld_starts(s, 0, "OPTIONS ", 8) ||
	       ld_starts(s, 0, "PATCH ", 6);
}

/* Classifies the first n bytes (n <= LD_SCRATCH_BYTES, zero-filled after) of
 * one send or receive. */
LD_GLOBAL int ld_classify(const struct ld_scratch *s, unsigned int n)
{
	unsigned int body;
	int frame, sse;

	if (!s || n == 0)
		return LD_PC_OTHER;
	if (n > LD_SCRATCH_BYTES)
		n = LD_SCRATCH_BYTES;
	if (ld_is_request_line(s))
		return LD_PC_HTTP_REQUEST;
	if (ld_starts(s, 0, "HTTP/1.", 7)) {
		body = ld_header_end(s, n);
		if (body && body < n) {
			frame = ld_skip_chunk_frame(s, body);
			if (ld_classify_sse(s, (unsigned int)frame >> 1) == LD_PC_SSE_DATA)
				return LD_PC_HTTP_RESPONSE_SSE;
		}
		return LD_PC_HTTP_RESPONSE;
	}
	frame = ld_skip_chunk_frame(s, 0);
	body = (unsigned int)frame >> 1;
	if (body >= n) /* nothing but framing */
		return (frame & 1) ? LD_PC_CHUNK_END : LD_PC_CHUNK_FRAME;
	if ((frame & 1) && ld_byte(s, body) == '\r' && ld_byte(s, body + 1) == '\n')
		return LD_PC_CHUNK_END; /* "0\r\n\r\n" (+ trailers we do not read) */
	sse = ld_classify_sse(s, body);
	if (sse == LD_PC_SSE_DATA && ld_contentless(s, body, n))
		return LD_PC_SSE_META;
	if (sse >= 0)
		return sse;
	if (n == 2 && ld_byte(s, 0) == '\r' && ld_byte(s, 1) == '\n')
		return LD_PC_CHUNK_FRAME; /* the "\r\n" that closes a chunk, alone */
	return LD_PC_OTHER;
}
