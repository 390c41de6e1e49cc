// The in-kernel HTTP/2 frame walk (bpf/classify.h, ld_h2_walk), run in user space on the frames
// gRPC C-core (python3-grpcio) and HTTP/2 SSE servers send, and on payloads it must refuse.
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "classify.h"

namespace {

std::string frame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload) {
  std::string f;
  const auto len = static_cast<uint32_t>(payload.size());
  f += static_cast<char>(len >> 16);
  f += static_cast<char>(len >> 8);
  f += static_cast<char>(len);
  f += static_cast<char>(type);
  f += static_cast<char>(flags);
  for (int shift = 24; shift >= 0; shift -= 8) f += static_cast<char>(stream >> shift);
  return f + payload;
}

std::string grpc_message(const std::string& body) {
  std::string m(1, '\0');
  const auto len = static_cast<uint32_t>(body.size());
  for (int shift = 24; shift >= 0; shift -= 8) m += static_cast<char>(len >> shift);
  return m + body;
}

const std::string kPreface("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
const std::string kToken = R"({"text": "tok1", "index": 0})";

struct Walk {
  int h2 = 0;
  ld_h2_seen w{};
};

// As sock.bpf.c runs it: the first 512 bytes in the scratch with a 0 after them, over stale bytes.
Walk walk(const std::string& bytes, unsigned char stale = 0xAA) {
  static ld_scratch scratch;
  std::memset(&scratch, stale, sizeof scratch);
  const size_t n = std::min(bytes.size(), static_cast<size_t>(LD_SCRATCH_BYTES));
  std::memcpy(scratch.b, bytes.data(), n);
  scratch.b[n] = 0;
  Walk out;
  std::memset(&out.w, 0x5A, sizeof out.w);  // the per-CPU slot holds the last walk's entries
  out.h2 = ld_h2_walk(&scratch, static_cast<unsigned>(n), bytes.size(), &out.w);
  return out;
}

TEST(H2Walk, TheClientsPrefaceAndSettingsHoldNoStream) {
  const std::string settings = frame(LD_H2_SETTINGS, 0, 0, std::string(36, '\0'));
  const std::string window = frame(LD_H2_WINDOW_UPDATE, 0, 0, std::string("\x00\x3f\x00\x01", 4));
  const std::string ack = frame(LD_H2_SETTINGS, 1, 0, "");
  const Walk r = walk(kPreface + settings + window + ack);
  ASSERT_EQ(r.h2, 1);
  EXPECT_EQ(r.w.preface, 1);
  EXPECT_EQ(r.w.count, 0);
  EXPECT_EQ(r.w.more, 0);
  // The server's own first send: SETTINGS and a WINDOW_UPDATE, no preface.
  const Walk s = walk(frame(LD_H2_SETTINGS, 0, 0, std::string(24, '\0')) + window);
  EXPECT_EQ(s.h2, 1);
  EXPECT_EQ(s.w.preface, 0);
  EXPECT_EQ(s.w.count, 0);
}

TEST(H2Walk, AGrpcRequestIsHeadersThenOneMessage) {
  const std::string headers = frame(LD_H2_HEADERS, 0x4, 1, std::string(208, '\x83'));
  const std::string data = frame(LD_H2_DATA, LD_H2_FLAG_END_STREAM, 1, grpc_message(R"({"max_tokens": 3})"));
  const Walk r = walk(headers + data);
  ASSERT_EQ(r.h2, 1);
  ASSERT_EQ(r.w.count, 2);
  EXPECT_EQ(r.w.f[0].type, LD_H2_HEADERS);
  EXPECT_EQ(r.w.f[0].stream_id, 1u);
  EXPECT_EQ(r.w.f[0].len, 208u);
  EXPECT_EQ(r.w.f[0].flags, 0);  // END_HEADERS is not kept
  EXPECT_EQ(r.w.f[1].type, LD_H2_DATA);
  EXPECT_EQ(r.w.f[1].flags, LD_H2_FLAG_END_STREAM);
  EXPECT_EQ(r.w.f[1].cls, LD_PC_GRPC_MESSAGE);
  EXPECT_EQ(r.w.f[1].messages, 1);
}

// gRPC C-core's first answer on a stream: response HEADERS, the first message, a WINDOW_UPDATE.
TEST(H2Walk, AGrpcServersFirstTokenSend) {
  const Walk r =
      walk(frame(LD_H2_HEADERS, 0x4, 3, std::string(78, '\x88')) + frame(LD_H2_DATA, 0, 3, grpc_message(kToken)) +
           frame(LD_H2_WINDOW_UPDATE, 0, 0, std::string("\x00\x00\x00\x2c", 4)));
  ASSERT_EQ(r.h2, 1);
  ASSERT_EQ(r.w.count, 2);
  EXPECT_EQ(r.w.f[1].stream_id, 3u);
  EXPECT_EQ(r.w.f[1].cls, LD_PC_GRPC_MESSAGE);
  EXPECT_EQ(r.w.f[1].len, kToken.size() + 5);
  EXPECT_EQ(r.w.more, 0);
}

TEST(H2Walk, TokensOfSeveralStreamsInOneSend) {
  const std::string d1 = frame(LD_H2_DATA, 0, 1, grpc_message(kToken));
  const std::string d3 = frame(LD_H2_DATA, 0, 3, grpc_message(kToken));
  const Walk r = walk(d1 + d3 + d1 + frame(LD_H2_HEADERS, 0x5, 3, std::string(20, '\x40')));
  ASSERT_EQ(r.h2, 1);
  ASSERT_EQ(r.w.count, 4);
  EXPECT_EQ(r.w.f[0].stream_id, 1u);
  EXPECT_EQ(r.w.f[1].stream_id, 3u);
  EXPECT_EQ(r.w.f[2].stream_id, 1u);
  EXPECT_EQ(r.w.f[3].type, LD_H2_HEADERS);  // trailers: the stream's end
  EXPECT_EQ(r.w.f[3].flags, LD_H2_FLAG_END_STREAM);
  // Two frames of one stream back to back are one entry of two messages; two messages in one
  // frame also count two.
  const Walk same = walk(d1 + d1);
  ASSERT_EQ(same.w.count, 1);
  EXPECT_EQ(same.w.f[0].messages, 2);
  EXPECT_EQ(same.w.f[0].len, 2 * (kToken.size() + 5));
  const Walk packed = walk(frame(LD_H2_DATA, 0, 1, grpc_message(kToken) + grpc_message(kToken)));
  ASSERT_EQ(packed.w.count, 1);
  EXPECT_EQ(packed.w.f[0].messages, 2);
}

TEST(H2Walk, SseOverHttp2) {
  const Walk token = walk(frame(LD_H2_DATA, 0, 1, "data: {\"choices\":[{\"text\":\"a\"}]}\n\n"));
  ASSERT_EQ(token.w.count, 1);
  EXPECT_EQ(token.w.f[0].cls, LD_PC_SSE_DATA);
  EXPECT_EQ(token.w.f[0].messages, 1);
  const Walk done = walk(frame(LD_H2_DATA, 0, 1, "data: [DONE]\n\n"));
  EXPECT_EQ(done.w.f[0].cls, LD_PC_SSE_DONE);
  const Walk usage = walk(frame(LD_H2_DATA, 0, 1, "data: {\"choices\":[],\"usage\":{}}\n\n"));
  EXPECT_EQ(usage.w.f[0].cls, LD_PC_SSE_META);
  const Walk json = walk(frame(LD_H2_DATA, LD_H2_FLAG_END_STREAM, 1, "{\"ok\": true}"));
  EXPECT_EQ(json.w.f[0].cls, LD_PC_OTHER);
  EXPECT_EQ(json.w.f[0].messages, 0);
  const Walk end = walk(frame(LD_H2_DATA, LD_H2_FLAG_END_STREAM, 1, ""));  // an empty END_STREAM frame
  ASSERT_EQ(end.w.count, 1);
  EXPECT_EQ(end.w.f[0].cls, LD_PC_OTHER);
  EXPECT_EQ(end.w.f[0].flags, LD_H2_FLAG_END_STREAM);
}

TEST(H2Walk, ResetsAreKept) {
  const Walk r = walk(frame(LD_H2_RST_STREAM, 0, 5, std::string("\x00\x00\x00\x08", 4)));
  ASSERT_EQ(r.w.count, 1);
  EXPECT_EQ(r.w.f[0].type, LD_H2_RST_STREAM);
  EXPECT_EQ(r.w.f[0].stream_id, 5u);
}

TEST(H2Walk, FramesPastTheBytesReadAreCountedUnseen) {
  const std::string big = frame(LD_H2_DATA, 0, 1, grpc_message(std::string(600, 'x')));
  const Walk r = walk(big + frame(LD_H2_DATA, 0, 3, grpc_message(kToken)));
  ASSERT_EQ(r.h2, 1);
  EXPECT_EQ(r.w.count, 1);
  EXPECT_EQ(r.w.more, 1);
  std::string many;
  for (uint32_t s = 1; s <= 19; s += 2) many += frame(LD_H2_DATA, 0, s, grpc_message("{}"));
  const Walk crowded = walk(many);  // 10 streams, 8 entries
  EXPECT_EQ(crowded.w.count, LD_H2_MAX_FRAMES);
  EXPECT_EQ(crowded.w.more, 1);
}

TEST(H2Walk, OtherPayloadsAreNotHttp2) {
  EXPECT_EQ(walk("data: {\"x\":1}\n\n").h2, 0);
  EXPECT_EQ(walk("POST /v1/completions HTTP/1.1\r\n").h2, 0);
  EXPECT_EQ(walk(std::string("\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7f", 10)).h2, 0);  // a ZMTP greeting
  EXPECT_EQ(walk(std::string("\x00\x00\x00\x0c", 4)).h2, 0);                           // a short binary length
  EXPECT_EQ(walk(frame(LD_H2_DATA, 0, 0, "x")).h2, 0);                                 // DATA on stream 0
  EXPECT_EQ(walk(frame(LD_H2_SETTINGS, 0, 0, "abcde")).h2, 0);                         // not 6-byte settings
  EXPECT_EQ(walk(frame(LD_H2_PING, 0, 0, "1234")).h2, 0);                              // PING is 8 bytes
  EXPECT_EQ(walk(frame(12, 0, 1, "x")).h2, 0);                                         // no such type
  EXPECT_EQ(walk(frame(LD_H2_DATA, 0, 0x80000001u, "x")).h2, 0);                       // reserved bit
  // One good frame followed by garbage is not HTTP/2 either.
  EXPECT_EQ(walk(frame(LD_H2_DATA, 0, 1, "x") + std::string("\x00\x00\x01\x0f\x00\x00\x00\x00\x01y", 10)).h2, 0);
}

TEST(H2Walk, StaleBytesPastThePayloadChangeNothing) {
  const std::string send = frame(LD_H2_HEADERS, 0x4, 3, std::string(78, '\x88')) +
                           frame(LD_H2_DATA, LD_H2_FLAG_END_STREAM, 3, "data: [DONE]\n\n");
  const Walk a = walk(send, 0x00), b = walk(send, 0xFF), c = walk(send, 'd');
  ASSERT_EQ(a.w.count, 2);
  for (const Walk* other : {&b, &c}) {
    EXPECT_EQ(other->w.count, a.w.count);
    EXPECT_EQ(other->w.f[1].cls, a.w.f[1].cls);
    EXPECT_EQ(other->w.f[1].flags, a.w.f[1].flags);
  }
}

}  // namespace
