// TlsJoin: TLS plaintext classes given to the ciphertext sends and receives of the same thread,
// from synthetic records; and the timeline a TLS stream then makes. No root, no BPF.
#include <vector>

#include <gtest/gtest.h>

#include "analysis/timeline.hpp"
#include "analysis/tls_join.hpp"
#include "events.h"

namespace {

using ld::analysis::SocketTimelineBuilder;
using ld::analysis::TlsJoin;

constexpr uint64_t kMs = 1'000'000;
constexpr uint32_t kPid = 300;
constexpr uint64_t kSock = 0xabc;

ld_hdr header(uint16_t type, uint16_t size, double t_ms, uint32_t tid) {
  ld_hdr h{};
  h.type = type;
  h.size = size;
  h.tgid = kPid;
  h.tid = tid;
  h.ts_ns = static_cast<uint64_t>(t_ms * kMs);
  return h;
}

// A ciphertext send or receive: the kernel cannot classify it (LD_PC_OTHER).
ld_sock_io cipher(double t_ms, uint8_t dir, uint32_t tid = kPid, int64_t ret = 120) {
  ld_sock_io io{};
  io.hdr = header(LD_EV_SOCK_IO, sizeof io, t_ms, tid);
  io.sock_id = kSock;
  io.ret = ret;
  io.fd = 7;
  io.lport = 8443;
  io.rport = 50000;
  io.family = 2;
  io.dir = dir;
  io.syscall = LD_SC_WRITE;
  io.cls = LD_PC_OTHER;
  return io;
}

ld_tls_io plain(double t_ms, uint8_t dir, uint8_t cls, uint32_t tid = kPid) {
  ld_tls_io t{};
  t.hdr = header(LD_EV_TLS_IO, sizeof t, t_ms, tid);
  t.ssl_id = 0x55;
  t.len = 60;
  t.api = dir == LD_DIR_SEND ? LD_TLS_SSL_WRITE_EX : LD_TLS_SSL_READ_EX;
  t.dir = dir;
  t.cls = cls;
  t.sse_events = (cls == LD_PC_SSE_DATA || cls == LD_PC_HTTP_RESPONSE_SSE) ? 1 : 0;
  return t;
}

struct Joined {
  std::vector<ld_sock_io> out;
  TlsJoin join{[this](const ld_sock_io& io) { out.push_back(io); }};
};

TEST(TlsJoin, AWriteNamesTheThreadsNextSend) {
  Joined j;
  j.join.on_tls(plain(10, LD_DIR_SEND, LD_PC_SSE_DATA));
  j.join.on_sock(cipher(10.01, LD_DIR_SEND));
  ASSERT_EQ(j.out.size(), 1u);
  EXPECT_EQ(j.out[0].cls, LD_PC_SSE_DATA);
  EXPECT_EQ(j.out[0].sse_events, 1);
  EXPECT_EQ(j.out[0].hdr.ts_ns, static_cast<uint64_t>(10.01 * kMs));  // the wire's time
  EXPECT_EQ(j.join.joined(), 1u);
  // The next send has no write before it: ciphertext of something else (a TLS alert).
  j.join.on_sock(cipher(11, LD_DIR_SEND));
  EXPECT_EQ(j.out.back().cls, LD_PC_OTHER);
}

TEST(TlsJoin, WritesCoalescedIntoOneSendAreOneStatusLineAndToken) {
  Joined j;
  j.join.on_tls(plain(5, LD_DIR_SEND, LD_PC_HTTP_RESPONSE));
  j.join.on_tls(plain(5.1, LD_DIR_SEND, LD_PC_SSE_DATA));
  j.join.on_sock(cipher(5.2, LD_DIR_SEND));
  ASSERT_EQ(j.out.size(), 1u);
  EXPECT_EQ(j.out[0].cls, LD_PC_HTTP_RESPONSE_SSE);
  EXPECT_EQ(j.out[0].sse_events, 1);
  j.join.on_tls(plain(6, LD_DIR_SEND, LD_PC_SSE_DATA));
  j.join.on_tls(plain(6.1, LD_DIR_SEND, LD_PC_SSE_DATA));
  j.join.on_sock(cipher(6.2, LD_DIR_SEND));
  EXPECT_EQ(j.out.back().cls, LD_PC_SSE_DATA);
  EXPECT_EQ(j.out.back().sse_events, 2);  // two tokens in one send
}

TEST(TlsJoin, AReadNamesTheReceiveBeforeIt) {
  Joined j;
  j.join.on_sock(cipher(20, LD_DIR_RECV));
  EXPECT_TRUE(j.out.empty());  // held until the thread says what it was
  j.join.on_tls(plain(20.05, LD_DIR_RECV, LD_PC_HTTP_REQUEST));
  ASSERT_EQ(j.out.size(), 1u);
  EXPECT_EQ(j.out[0].cls, LD_PC_HTTP_REQUEST);
  EXPECT_EQ(j.out[0].hdr.ts_ns, 20 * kMs);  // the request arrived with its ciphertext
  EXPECT_EQ(j.out[0].ret, 120);
}

TEST(TlsJoin, OnlyTheSameThreadsPlaintextCounts) {
  Joined j;
  j.join.on_tls(plain(1, LD_DIR_SEND, LD_PC_SSE_DATA, 901));
  j.join.on_sock(cipher(1.1, LD_DIR_SEND, 902));
  ASSERT_EQ(j.out.size(), 1u);
  EXPECT_EQ(j.out[0].cls, LD_PC_OTHER);
  j.join.on_sock(cipher(1.2, LD_DIR_SEND, 901));
  EXPECT_EQ(j.out.back().cls, LD_PC_SSE_DATA);
}

TEST(TlsJoin, AWriteLongBeforeTheSendDoesNotNameIt) {
  Joined j;
  j.join.on_tls(plain(100, LD_DIR_SEND, LD_PC_SSE_DATA));
  j.join.on_sock(cipher(2100, LD_DIR_SEND));  // 2 s later: it went out another way
  EXPECT_EQ(j.out.back().cls, LD_PC_OTHER);
  EXPECT_EQ(j.join.joined(), 0u);
}

TEST(TlsJoin, PlainTrafficPassesUnchangedAndInOrderPerThread) {
  Joined j;
  ld_sock_io request = cipher(1, LD_DIR_RECV);
  request.cls = LD_PC_HTTP_REQUEST;
  ld_sock_io token = cipher(3, LD_DIR_SEND);
  token.cls = LD_PC_SSE_DATA;
  token.sse_events = 1;
  j.join.on_sock(request);                 // classified: passes at once
  j.join.on_sock(cipher(2, LD_DIR_RECV));  // a body: held...
  EXPECT_EQ(j.out.size(), 1u);
  j.join.on_sock(token);  // ...and passed on, before the thread's next event
  ASSERT_EQ(j.out.size(), 3u);
  EXPECT_EQ(j.out[0].cls, LD_PC_HTTP_REQUEST);
  EXPECT_EQ(j.out[1].hdr.ts_ns, 2 * kMs);
  EXPECT_EQ(j.out[1].cls, LD_PC_OTHER);
  EXPECT_EQ(j.out[2].cls, LD_PC_SSE_DATA);
  j.join.on_sock(cipher(4, LD_DIR_RECV));
  j.join.finish();  // nothing is lost at the end
  EXPECT_EQ(j.out.size(), 4u);
  EXPECT_EQ(j.join.joined(), 0u);
}

TEST(TlsJoin, TlsReceivesNoReadClaimedAreNotData) {
  Joined j;
  j.join.on_sock(cipher(1, LD_DIR_RECV));  // the handshake, before the connection is known TLS
  j.join.on_sock(cipher(2, LD_DIR_RECV));
  j.join.on_tls(plain(2.1, LD_DIR_RECV, LD_PC_HTTP_REQUEST));
  j.join.on_sock(cipher(3, LD_DIR_RECV));
  j.join.on_tls(plain(3.1, LD_DIR_RECV, LD_PC_OTHER));  // the request's body: data
  j.join.on_sock(cipher(9, LD_DIR_RECV));               // the client's close_notify alert
  j.join.finish();
  ASSERT_EQ(j.out.size(), 3u);
  EXPECT_EQ(j.out[0].hdr.ts_ns, 1 * kMs);  // not known TLS yet: passed on (the timeline ignores
                                           // bytes before a connection's first request)
  EXPECT_EQ(j.out[1].cls, LD_PC_HTTP_REQUEST);
  EXPECT_EQ(j.out[2].hdr.ts_ns, 3 * kMs);
  EXPECT_EQ(j.out[2].cls, LD_PC_OTHER);
  EXPECT_EQ(j.join.dropped(), 1u);
}

TEST(TlsJoin, TheAlertBeforeACloseIsStillTls) {
  Joined j;
  j.join.on_sock(cipher(1, LD_DIR_RECV));
  j.join.on_tls(plain(1.1, LD_DIR_RECV, LD_PC_HTTP_REQUEST));
  j.join.on_sock(cipher(5, LD_DIR_RECV));  // close_notify, then the server closes the socket
  j.join.on_close(kSock);
  j.join.on_sock(cipher(6, LD_DIR_RECV));  // the id again, now a plain connection's body bytes
  j.join.finish();
  ASSERT_EQ(j.out.size(), 2u);
  EXPECT_EQ(j.out[0].cls, LD_PC_HTTP_REQUEST);
  EXPECT_EQ(j.out[1].hdr.ts_ns, 6 * kMs);
  EXPECT_EQ(j.join.dropped(), 1u);
}

// A whole TLS stream, as the probes see it: a request and five tokens over one connection,
// each token written by SSL_write_ex and sent as ciphertext. The timeline gets the request
// and its tokens at the ciphertext's times.
TEST(TlsJoin, ATlsStreamMakesARequestWithItsTokens) {
  SocketTimelineBuilder builder;
  TlsJoin join([&](const ld_sock_io& io) { builder.add(io); });
  join.on_sock(cipher(100, LD_DIR_RECV));
  join.on_tls(plain(100.2, LD_DIR_RECV, LD_PC_HTTP_REQUEST));
  join.on_tls(plain(150, LD_DIR_SEND, LD_PC_HTTP_RESPONSE));
  join.on_sock(cipher(150.1, LD_DIR_SEND));
  for (int i = 0; i < 5; ++i) {
    join.on_tls(plain(200 + 20 * i, LD_DIR_SEND, LD_PC_SSE_DATA));
    join.on_sock(cipher(200.1 + 20 * i, LD_DIR_SEND));
  }
  join.on_tls(plain(300, LD_DIR_SEND, LD_PC_SSE_DONE));
  join.on_sock(cipher(300.1, LD_DIR_SEND));
  join.on_sock(cipher(400, LD_DIR_RECV));  // close_notify: not a second request
  join.finish();
  const ld::model::Timeline timeline = builder.finish();
  ASSERT_EQ(timeline.requests.size(), 1u);
  const ld::model::Request& r = timeline.requests[0];
  EXPECT_EQ(r.start_ns, 100 * kMs);
  ASSERT_EQ(r.token_ns.size(), 5u);
  EXPECT_EQ(r.token_ns[0], static_cast<uint64_t>(200.1 * kMs));
  EXPECT_EQ(r.token_ns[4] - r.token_ns[3], 20 * kMs);
}

}  // namespace

namespace {

ld_h2_frames plain_frames(double t_ms, uint8_t dir, std::vector<ld_h2_frame> frames, uint32_t tid = kPid) {
  ld_h2_frames h{};
  h.hdr = header(LD_EV_H2_FRAMES, sizeof h, t_ms, tid);
  h.sock_id = 0x55;  // the ssl_id, as the tls probe writes it
  h.dir = dir;
  h.tls = 1;
  for (const auto& f : frames) h.f[h.count++] = f;
  return h;
}

struct JoinedH2 {
  std::vector<ld_sock_io> out;
  std::vector<ld_h2_frames> frames;
  TlsJoin join{[this](const ld_sock_io& io) { out.push_back(io); },
               [this](const ld_h2_frames& h) { frames.push_back(h); }};
};

}  // namespace

// HTTP/2 inside TLS (h2 by ALPN, gRPC with TLS): a read's frames go out on the socket and at the
// time of the ciphertext receive it claimed; a write's on the socket and at the time of the
// thread's next send, with the send's ports. The timeline then sees an h2c connection.
TEST(TlsJoin, Http2FramesInsideTlsGoToTheirCiphertext) {
  JoinedH2 j;
  const ld_h2_frame headers{1, 80, LD_H2_HEADERS, 0, 0, 0};
  const ld_h2_frame message{1, 33, LD_H2_DATA, 0, LD_PC_GRPC_MESSAGE, 1};
  const ld_h2_frame last{1, 33, LD_H2_DATA, LD_H2_FLAG_END_STREAM, LD_PC_GRPC_MESSAGE, 1};
  j.join.on_sock(cipher(10, LD_DIR_RECV));
  j.join.on_tls(plain(10.2, LD_DIR_RECV, LD_PC_H2));
  j.join.on_tls_frames(plain_frames(10.2, LD_DIR_RECV, {headers}));
  ASSERT_EQ(j.out.size(), 1u);
  EXPECT_EQ(j.out[0].cls, LD_PC_H2);
  ASSERT_EQ(j.frames.size(), 1u);
  EXPECT_EQ(j.frames[0].sock_id, kSock);
  EXPECT_EQ(j.frames[0].hdr.ts_ns, 10 * kMs);  // the request arrived with its ciphertext
  EXPECT_EQ(j.frames[0].tls, 0);
  EXPECT_EQ(j.frames[0].rport, 50000);
  double t = 40;
  for (const ld_h2_frame& f : {headers, message, message, last}) {
    j.join.on_tls(plain(t, LD_DIR_SEND, LD_PC_H2));
    j.join.on_tls_frames(plain_frames(t, LD_DIR_SEND, {f}));
    j.join.on_sock(cipher(t + 0.05, LD_DIR_SEND));
    t += 20;
  }
  ASSERT_EQ(j.frames.size(), 5u);
  EXPECT_EQ(j.frames[2].hdr.ts_ns, static_cast<uint64_t>(60.05 * kMs));  // the wire's time
  EXPECT_EQ(j.frames[2].lport, 8443);

  SocketTimelineBuilder builder;
  for (const auto& io : j.out) builder.add(io);
  for (const auto& h : j.frames) builder.add(h);
  const auto timeline = builder.finish();
  ASSERT_EQ(timeline.requests.size(), 1u);
  EXPECT_EQ(timeline.requests[0].token_ns.size(), 3u);
  EXPECT_NEAR(timeline.requests[0].ttft_ms(), 50.05, 1e-6);
  EXPECT_TRUE(timeline.requests[0].complete);
}

// OpenSSL may hand a read bytes it had already decrypted: no receive to claim, so the frames go
// at the read's own time, on the socket an earlier read of the connection named.
TEST(TlsJoin, Http2ReadWithoutAReceiveUsesItsConnectionsSocket) {
  JoinedH2 j;
  const ld_h2_frame headers3{3, 80, LD_H2_HEADERS, 0, 0, 0};
  j.join.on_sock(cipher(10, LD_DIR_RECV));
  j.join.on_tls(plain(10.2, LD_DIR_RECV, LD_PC_H2));
  j.join.on_tls_frames(plain_frames(10.2, LD_DIR_RECV, {}));
  j.join.on_tls(plain(12, LD_DIR_RECV, LD_PC_H2));
  j.join.on_tls_frames(plain_frames(12, LD_DIR_RECV, {headers3}));
  ASSERT_EQ(j.frames.size(), 2u);
  EXPECT_EQ(j.frames[1].sock_id, kSock);
  EXPECT_EQ(j.frames[1].hdr.ts_ns, 12 * kMs);
  // After the socket closed, a read of that connection names nothing.
  j.join.on_close(kSock);
  j.join.on_tls(plain(13, LD_DIR_RECV, LD_PC_H2));
  j.join.on_tls_frames(plain_frames(13, LD_DIR_RECV, {headers3}));
  EXPECT_EQ(j.frames.size(), 2u);
}
