/* Payload classification: what do the first bytes of a send/recv look like?
 *
 * Shared, verbatim, by the BPF side (sock.bpf.c, where it runs on a per-CPU
 * scratch copy of the user buffer) and user space (unit tests).  Only the
 * resulting class leaves the kernel, never the bytes.
 *
 * Contract: the byte after the n copied ones is 0; what lies beyond it is
 * never looked at (it is whatever an earlier payload left).  Every scan stops
 * at the first NUL, and no literal we look for contains one, so a match can
 * never run past the payload and the code needs no `i < n` test per byte --
 * which is what keeps the verifier's path count small.  (The word-at-a-time
 * scan in ld_contentless reads up to 7 bytes past n and discards them.)
 * Zeroing the whole scratch instead cost ~0.3 us per send.
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

/* The 8 bytes at `i`, a multiple of 8 (an aligned load: one instruction in BPF). */
LD_INLINE unsigned long long ld_word(const struct ld_scratch *s, unsigned int i)
{
	unsigned int j = i & (LD_SCRATCH_MASK & ~7u);

	LD_BOUNDED(j);
#ifdef __VMLINUX_H__
	return *(const unsigned long long *)&s->b[j & (LD_SCRATCH_MASK & ~7u)];
#else
	unsigned long long w;

	__builtin_memcpy(&w, &s->b[j], sizeof(w));
	return w;
#endif
}

/* Is the empty value "[]" or "{}" opening at `v` the value of the key
 * "choices" ("[]") or "delta" ("{}"), the key starting at or after `off`?
 * One optional space after the colon covers Python's json.dumps. */
LD_GLOBAL int ld_empty_value_of_key(const struct ld_scratch *s, unsigned int off, unsigned int v)
{
	unsigned int c = v - 1;

	if (!s || v < off + 10)
		return 0;
	if (ld_byte(s, c) == ' ')
		c--;
	if (ld_byte(s, c) != ':' || ld_byte(s, c - 1) != '"')
		return 0;
	if (ld_byte(s, v) == '[')
		return c >= off + 9 && ld_starts(s, c - 9, "\"choices", 8);
	return c >= off + 7 && ld_starts(s, c - 7, "\"delta", 6);
}

/* Does the JSON from `off` on (within the classified prefix) mark an event
 * without generated content?  `"choices":[]` is the usage summary of OpenAI /
 * vLLM streams (include_usage) and llama.cpp's last event; `"delta":{}` is the
 * finish chunk of chat streams.  Only keys can match: a quote inside
 * generated text is escaped as \", so `\"choices\":[]` in text has a
 * backslash where the key's closing quote is.
 *
 * This runs on every token a server sends, so it looks for the rare part
 * first: an empty "[]" or "{}", eight bytes at a time ('[' | 0x20 == '{', and
 * a zero byte of w ^ 0x7b7b.. marks one; the classic has-zero-byte test may
 * also flag a byte above a real one, so each flagged word is checked byte by
 * byte), and only there the key before it.  A per-byte scan for the key's
 * quote cost ~1 us per token send here.  Looks LD_CONTENTLESS_SCAN bytes on,
 * which holds the keys in every server seen. */
#define LD_CONTENTLESS_SCAN 336
#define LD_ONES 0x0101010101010101ULL
#define LD_HIGHS 0x8080808080808080ULL
LD_GLOBAL int ld_contentless(const struct ld_scratch *s, unsigned int off, unsigned int n)
{
	unsigned int start = off & ~7u;

	if (!s)
		return 0;
	for (unsigned int k = 0; k < LD_CONTENTLESS_SCAN / 8; k++) {
		unsigned int i = start + k * 8;
		unsigned long long t;

		if (i >= n || i >= LD_SCRATCH_BYTES)
			break;
		t = (ld_word(s, i) | 0x2020202020202020ULL) ^ 0x7b7b7b7b7b7b7b7bULL;
		if (!((t - LD_ONES) & ~t & LD_HIGHS))
			continue;
		for (unsigned int b = 0; b < 8; b++) {
			unsigned int v = i + b;
			unsigned char open = ld_byte(s, v);

			if ((open != '[' && open != '{') || v < off || v + 1 >= n)
				continue;
			if (ld_byte(s, v + 1) == open + 2 && ld_empty_value_of_key(s, off, v))
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

/* RFC 6455 frames: a byte of FIN, RSV1-3 and opcode, a byte of MASK and a
 * 7-bit length (126: a 16-bit length follows, 127: a 64-bit one), a 4-byte
 * masking key when masked, the payload.  A payload that opens with a final
 * text or binary frame (RSV1 allowed: permessage-deflate) whose frames tile
 * the bytes read, every one masked alike, is WebSocket: LD_PC_WS_CLIENT when
 * masked (a client's), LD_PC_WS_MESSAGE when not (a server's).  Requiring FIN
 * and the tiling keeps binary protocols out (a ZMQ frame's flags byte never
 * has 0x80; TLS records set RSV3); the timeline takes the classes only on a
 * connection that switched protocols or received a masked frame. */
#define LD_WS_WALK 8
LD_INLINE int ld_classify_ws(const struct ld_scratch *s, unsigned int n)
{
	unsigned char b0 = ld_byte(s, 0), masked = ld_byte(s, 1) & 0x80;
	int cls = masked ? LD_PC_WS_CLIENT : LD_PC_WS_MESSAGE;
	/* A frame that runs past the bytes read is whole only when they were cut
	 * at the scratch's size; never a byte past n is looked at. */
	int cut = n == LD_SCRATCH_BYTES ? cls : -1;
	unsigned int off = 0;

	if (n < 2 || (b0 & 0xb0) != 0x80 || ((b0 & 0x0f) != 1 && (b0 & 0x0f) != 2))
		return -1;
	for (unsigned int k = 0; k < LD_WS_WALK && off < n; k++) {
		unsigned char h0, h1;
		unsigned int len, hdr = 2;

		if (off + 2 > n)
			return cut;
		h0 = ld_byte(s, off);
		h1 = ld_byte(s, off + 1);
		if ((h1 & 0x80) != masked || (h0 & 0x30))
			return -1;
		len = h1 & 0x7f;
		if (len == 127) /* a 64-bit length: 64 KiB or more, past any bytes read */
			return cut;
		if (len == 126) {
			if (off + 4 > n)
				return cut;
			len = (unsigned int)ld_byte(s, off + 2) << 8 | ld_byte(s, off + 3);
			hdr = 4;
		}
		hdr += masked ? 4 : 0;
		if (off + hdr + len > n)
			return cut;
		off += hdr + len;
	}
	return cls; /* the frames tile the bytes read, or LD_WS_WALK of them did */
}

/* Token events a payload of class cls carries, as a record's sse_events:
 * one for an SSE data event (with or without the status line before it) or
 * a server's WebSocket frames. */
LD_INLINE unsigned char ld_token_events(int cls)
{
	return cls == LD_PC_SSE_DATA || cls == LD_PC_HTTP_RESPONSE_SSE || cls == LD_PC_WS_MESSAGE;
}

/* Classifies the first n bytes (n <= LD_SCRATCH_BYTES, a 0 after them) of
 * one send or receive. */
LD_GLOBAL int ld_classify(const struct ld_scratch *s, unsigned int n)
{
	unsigned int body;
	int frame, sse;

	if (!s || n == 0)
		return LD_PC_OTHER;
	if (n > LD_SCRATCH_BYTES)
		n = LD_SCRATCH_BYTES;
	/* Most sends of a streaming server are SSE events: those first.  A payload
	 * that starts with an SSE field is none of the classes below (':', 't',
	 * 'v', 'i' and 'r' end a chunk-size line's hex digits without "\r\n"). */
	sse = ld_classify_sse(s, 0);
	if (sse >= 0)
		return sse == LD_PC_SSE_DATA && ld_contentless(s, 0, n) ? LD_PC_SSE_META : sse;
	if (ld_is_request_line(s))
		return LD_PC_HTTP_REQUEST;
	if (ld_starts(s, 0, "HTTP/1.", 7)) {
		if (ld_starts(s, 8, " 101", 4))
			return LD_PC_HTTP_SWITCH;
		body = ld_header_end(s, n);
		if (body && body < n) {
			frame = ld_skip_chunk_frame(s, body);
			if (ld_classify_sse(s, (unsigned int)frame >> 1) == LD_PC_SSE_DATA)
				return LD_PC_HTTP_RESPONSE_SSE;
		}
		return LD_PC_HTTP_RESPONSE;
	}
	if (ld_byte(s, 0) & 0x80) {
		sse = ld_classify_ws(s, n);
		return sse >= 0 ? sse : LD_PC_OTHER;
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

/* ------------------------------------------------------------------ HTTP/2
 * RFC 9113 frames: a 9-byte header (length:24, type:8, flags:8, R:1,
 * stream:31) and the payload.  A send or receive of an HTTP/2 connection is
 * a run of whole frames (a client's first one begins with the 24-byte
 * preface); nothing marks the connection, so a payload is taken for HTTP/2
 * only when every frame header in the bytes read is one a peer may send
 * (known type, the stream and length that type needs) and the first frame is
 * shorter than 64 KiB (its first byte 0: no text protocol starts so).  Frames
 * are walked in the classified prefix only; those past it are counted as
 * unseen (ld_h2_frames.more). */
#define LD_H2_WALK 16
#define LD_H2_PREFACE_LEN 24
#define LD_H2_PRIORITY 2
#define LD_H2_SETTINGS 4
#define LD_H2_PUSH_PROMISE 5
#define LD_H2_PING 6
#define LD_H2_GOAWAY 7
#define LD_H2_WINDOW_UPDATE 8
#define LD_H2_CONTINUATION 9

/* What the walk found; the per-CPU home of an ld_h2_frames record's body. */
struct ld_h2_seen {
	unsigned char count;
	unsigned char more;
	unsigned char preface;
	unsigned char _pad;
	struct ld_h2_frame f[LD_H2_MAX_FRAMES];
};

LD_INLINE unsigned int ld_be24(const struct ld_scratch *s, unsigned int i)
{
	return (unsigned int)ld_byte(s, i) << 16 | (unsigned int)ld_byte(s, i + 1) << 8 | ld_byte(s, i + 2);
}

LD_INLINE unsigned int ld_be32(const struct ld_scratch *s, unsigned int i)
{
	return (unsigned int)ld_byte(s, i) << 24 | ld_be24(s, i + 1);
}

/* May a peer send a frame of this type, stream and length?  Types past
 * CONTINUATION are legal extensions but would let binary protocols pass. */
LD_GLOBAL int ld_h2_frame_valid(unsigned int type, unsigned int stream, unsigned int len)
{
	switch (type) {
	case LD_H2_DATA:
	case LD_H2_HEADERS:
	case LD_H2_CONTINUATION:
	case LD_H2_PUSH_PROMISE:
		return stream != 0;
	case LD_H2_PRIORITY:
		return stream != 0 && len == 5;
	case LD_H2_RST_STREAM:
		return stream != 0 && len == 4;
	case LD_H2_SETTINGS:
		return stream == 0 && len % 6 == 0;
	case LD_H2_PING:
		return stream == 0 && len == 8;
	case LD_H2_GOAWAY:
		return stream == 0 && len >= 8;
	case LD_H2_WINDOW_UPDATE:
		return len == 4;
	}
	return 0;
}

/* gRPC messages starting in a DATA payload of `len` bytes at `p` (a 5-byte
 * prefix each: compressed flag 0/1, length), or 0 when it does not start with
 * one.  Counts those whose prefix lies in the classified bytes. */
LD_GLOBAL int ld_grpc_messages(const struct ld_scratch *s, unsigned int p, unsigned int len,
			       unsigned int n)
{
	unsigned int end = p + len, count = 0;

	if (!s || len < 5)
		return 0;
	for (unsigned int k = 0; k < 8; k++) {
		unsigned char flag;
		unsigned int mlen;

		if (p + 5 > end || p + 5 > n || p + 5 > LD_SCRATCH_BYTES)
			break;
		flag = ld_byte(s, p);
		mlen = ld_be32(s, p + 1);
		if (flag > 1 || (count == 0 && mlen > (1u << 24)))
			break;
		count++;
		if (mlen >= end - p - 5)
			break; /* the last message here (it may go on in the next frame) */
		p += 5 + mlen;
	}
	return (int)count;
}

/* The class of a DATA payload at `p` (len bytes, of which those below n were
 * read), with the messages or events starting in it << 8. */
LD_GLOBAL int ld_h2_data_class(const struct ld_scratch *s, unsigned int p, unsigned int len,
			       unsigned int n)
{
	int grpc, sse;

	if (!s || len == 0 || p >= n || p >= LD_SCRATCH_BYTES)
		return LD_PC_OTHER;
	grpc = ld_grpc_messages(s, p, len, n);
	if (grpc > 0)
		return LD_PC_GRPC_MESSAGE | (grpc & 0xff) << 8;
	sse = ld_classify_sse(s, p);
	if (sse < 0)
		return LD_PC_OTHER;
	if (sse == LD_PC_SSE_DATA && ld_contentless(s, p, n))
		sse = LD_PC_SSE_META;
	return sse | 1 << 8;
}

/* Adds a frame the timeline reads to w (`what`: type | flags << 8 | data
 * class and messages << 16, as ld_h2_data_class gives them); consecutive
 * DATA frames of a stream share an entry (several tokens of a stream in one
 * send).  A global function: inlined in the walk's loop, its branches made
 * the verifier's path count explode. */
LD_GLOBAL int ld_h2_keep(struct ld_h2_seen *w, unsigned int what, unsigned int stream,
			 unsigned int len)
{
	unsigned int type = what & 0xff, flags = (what >> 8) & 0xff;
	unsigned char cls = (what >> 16) & 0xff, messages = (what >> 24) & 0xff;
	unsigned int count, last, at;

	if (!w)
		return 0;
	count = w->count;
	last = (count - 1) & (LD_H2_MAX_FRAMES - 1);
	at = count & (LD_H2_MAX_FRAMES - 1);
	if (type == LD_H2_DATA && count && w->f[last].type == LD_H2_DATA &&
	    w->f[last].stream_id == stream) {
		w->f[last].len += len;
		w->f[last].flags |= flags;
		w->f[last].messages += messages;
		if (w->f[last].cls == LD_PC_OTHER)
			w->f[last].cls = cls;
		return 0;
	}
	if (count >= LD_H2_MAX_FRAMES) {
		w->more = 1;
		return 0;
	}
	w->f[at].stream_id = stream;
	w->f[at].len = len;
	w->f[at].type = type;
	w->f[at].flags = flags;
	w->f[at].cls = type == LD_H2_DATA ? cls : 0;
	w->f[at].messages = type == LD_H2_DATA ? messages : 0;
	w->count = count + 1;
	return 0;
}

/* The body of an ld_h2_frames record from a walk: the caller names the
 * socket (or SSL object), direction, ports and stamp. */
LD_INLINE void ld_h2_frames_fill(struct ld_h2_frames *e, const struct ld_h2_seen *seen)
{
	e->count = seen->count;
	e->more = seen->more;
	e->preface = seen->preface;
	__builtin_memset(e->_pad, 0, sizeof(e->_pad));
	__builtin_memcpy(e->f, seen->f, sizeof(e->f));
}

/* Walks the frames of a payload whose first n bytes (n <= LD_SCRATCH_BYTES)
 * are in s and whose whole length is `total`.  Returns 1, w filled, when they
 * read as HTTP/2; 0 when any frame header seen is not one. */
LD_GLOBAL int ld_h2_walk(const struct ld_scratch *s, unsigned int n, unsigned long long total,
			 struct ld_h2_seen *w)
{
	unsigned int off = 0, frames = 0;

	if (!s || !w || n == 0)
		return 0;
	w->count = 0;
	w->more = 0;
	w->preface = 0;
	if (ld_starts(s, 0, "PRI * HT", 8) && ld_starts(s, 8, "TP/2.0\r\n", 8)) {
		w->preface = 1;
		off = LD_H2_PREFACE_LEN;
	} else if (ld_byte(s, 0) != 0) {
		return 0;
	}
	for (unsigned int k = 0; k < LD_H2_WALK; k++) {
		unsigned int len, type, stream, what;

		if (off >= total)
			break;
		if (off + 9 > n || off + 9 > LD_SCRATCH_BYTES) {
			w->more = 1;
			break;
		}
		len = ld_be24(s, off);
		type = ld_byte(s, off + 3);
		stream = ld_be32(s, off + 5);
		if ((stream & 0x80000000u) || !ld_h2_frame_valid(type, stream, len))
			return 0;
		what = type | (ld_byte(s, off + 4) & LD_H2_FLAG_END_STREAM) << 8;
		if (type == LD_H2_DATA)
			what |= (unsigned int)ld_h2_data_class(s, off + 9, len, n) << 16;
		if (type == LD_H2_DATA || type == LD_H2_HEADERS || type == LD_H2_RST_STREAM)
			ld_h2_keep(w, what, stream, len);
		frames++;
		off += 9 + len;
		if (k == LD_H2_WALK - 1 && off < total)
			w->more = 1;
	}
	return frames > 0 || w->preface;
}
