// The in-kernel payload classifier (bpf/classify.h), run in user space on the
// exact byte patterns real servers send.
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "classify.h"

namespace {

// As the BPF side leaves the scratch: the payload, one 0, then whatever an earlier payload
// left there (`stale`).
int classify_over(const std::string& bytes, unsigned char stale) {
  static ld_scratch scratch;
  std::memset(&scratch, stale, sizeof(scratch));
  size_t n = std::min(bytes.size(), static_cast<size_t>(LD_SCRATCH_BYTES));
  std::memcpy(scratch.b, bytes.data(), n);
  scratch.b[n] = 0;
  return ld_classify(&scratch, static_cast<unsigned>(n));
}

// The class, checked to be the same whatever lies past the 0 (classify.h's contract): over
// zeros, over bytes that look like the literals it matches, over high bytes.
int classify(const std::string& bytes) {
  int cls = classify_over(bytes, 0);
  for (int stale : std::initializer_list<int>{'\n', '\r', 'a', '[', ']', '"', ':', 0xff})
    EXPECT_EQ(classify_over(bytes, static_cast<unsigned char>(stale)), cls)
        << "stale byte " << stale << " changed the class of: " << bytes;
  return cls;
}

TEST(Classify, RequestLines) {
  EXPECT_EQ(classify("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"), LD_PC_HTTP_REQUEST);
  EXPECT_EQ(classify("GET /health HTTP/1.1\r\n\r\n"), LD_PC_HTTP_REQUEST);
  EXPECT_EQ(classify("OPTIONS * HTTP/1.1\r\n"), LD_PC_HTTP_REQUEST);
  EXPECT_EQ(classify("POSTX /"), LD_PC_OTHER);
  EXPECT_EQ(classify("{\"prompt\":\"hello\"}"), LD_PC_OTHER);  // a body sent separately
}

TEST(Classify, ResponseHeaders) {
  EXPECT_EQ(classify("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"), LD_PC_HTTP_RESPONSE);
  EXPECT_EQ(classify("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"), LD_PC_HTTP_RESPONSE);
  // aiohttp-style: headers and the first event in one send.
  EXPECT_EQ(classify("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1a\r\ndata: {\"t\":1}\n\n\r\n"),
            LD_PC_HTTP_RESPONSE_SSE);
  EXPECT_EQ(classify("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), LD_PC_HTTP_RESPONSE);
}

TEST(Classify, SseEvents) {
  EXPECT_EQ(classify("data: {\"choices\":[{\"text\":\"a\"}]}\n\n"), LD_PC_SSE_DATA);
  EXPECT_EQ(classify("data:{\"x\":1}\n\n"), LD_PC_SSE_DATA);
  EXPECT_EQ(classify("data: [DONE]\n\n"), LD_PC_SSE_DONE);
  EXPECT_EQ(classify("event: content_block_delta\ndata: {\"x\":1}\n\n"), LD_PC_SSE_DATA);
  EXPECT_EQ(classify("id: 7\ndata: [DONE]\n\n"), LD_PC_SSE_DONE);
  EXPECT_EQ(classify(": ping\n\n"), LD_PC_SSE_OTHER);
  EXPECT_EQ(classify("event: ping\n\n"), LD_PC_SSE_OTHER);
  EXPECT_EQ(classify("retry: 3000\n\n"), LD_PC_SSE_OTHER);
}

TEST(Classify, ChunkedFraming) {
  EXPECT_EQ(classify("1a\r\n"), LD_PC_CHUNK_FRAME);  // uvicorn: size line alone
  EXPECT_EQ(classify("\r\n"), LD_PC_CHUNK_FRAME);    // chunk close alone
  EXPECT_EQ(classify("0\r\n\r\n"), LD_PC_CHUNK_END);
  EXPECT_EQ(classify("\r\n0\r\n\r\n"), LD_PC_CHUNK_END);
  EXPECT_EQ(classify("1F\r\ndata: {\"t\":\"x\"}\n\n\r\n"), LD_PC_SSE_DATA);  // one write per token
  EXPECT_EQ(classify("\r\n1f\r\ndata: {\"t\":\"x\"}\n\n"), LD_PC_SSE_DATA);  // previous close first
  EXPECT_EQ(classify("e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"), LD_PC_SSE_DONE);
  EXPECT_EQ(classify("1a;ext=1\r\ndata: x\n\n"), LD_PC_SSE_DATA);
  EXPECT_EQ(classify("deadbeef is not a size line"), LD_PC_OTHER);
}

TEST(Classify, NothingLeaksPastN) {
  // Stale bytes past n must not count (classify() checks them over several stale fills).
  EXPECT_EQ(classify(""), LD_PC_OTHER);
  EXPECT_EQ(classify("dat"), LD_PC_OTHER);
  EXPECT_EQ(classify("d"), LD_PC_OTHER);
}

TEST(Classify, LongHeaderBlockBeyondPrefix) {
  std::string headers = "HTTP/1.1 200 OK\r\n" + std::string(600, 'x') + "\r\n\r\ndata: y\n\n";
  EXPECT_EQ(classify(headers), LD_PC_HTTP_RESPONSE);  // end of headers not within 512 bytes
}

}  // namespace

namespace {

TEST(Classify, ContentlessEventsAreNotTokens) {
  // vLLM / OpenAI include_usage summary, llama.cpp's last event.
  EXPECT_EQ(
      classify(
          "data: {\"id\":\"x\",\"object\":\"text_completion\",\"choices\":[],\"usage\":{\"prompt_tokens\":3}}\n\n"),
      LD_PC_SSE_META);
  EXPECT_EQ(classify("1f\r\ndata: {\"choices\": [], \"usage\": {}}\n\n\r\n"), LD_PC_SSE_META);
  // OpenAI chat finish chunk: empty delta.
  EXPECT_EQ(classify("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"),
            LD_PC_SSE_META);
  // Real tokens, including text that *talks about* choices (escaped quotes cannot match a key).
  EXPECT_EQ(classify("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"), LD_PC_SSE_DATA);
  EXPECT_EQ(classify("data: {\"choices\":[{\"text\":\"\\\"choices\\\":[] is empty\"}]}\n\n"), LD_PC_SSE_DATA);
  EXPECT_EQ(classify("data: {\"choices\":[{\"text\":\"x\"}],\"usage\":null}\n\n"), LD_PC_SSE_DATA);
}

// Every prefix of real payloads (a short read or send cuts them anywhere) over stale bytes
// copied from the other payloads: the class never depends on bytes past the payload.
TEST(Classify, NeverReadsPastThePayload) {
  const std::vector<std::string> payloads = {
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1a\r\ndata: {\"t\":1}\n\n\r\n",
      "data: {\"id\":\"cmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":3}}\n\n",
      "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
      "data: {\"choices\": [{\"text\": \" tok\"}]}\n\n",
      "event: content_block_delta\ndata: {\"type\":\"x\"}\n\n",
      "1f\r\ndata: {\"choices\": [], \"usage\": {}}\n\n\r\n",
      "0\r\n\r\n",
      ": ping\n\n",
      "data: [DONE]\n\n",
      "retry: 100\n\n",
  };
  static ld_scratch scratch;
  for (const auto& p : payloads) {
    for (size_t n = 0; n <= p.size(); ++n) {
      std::memset(&scratch, 0, sizeof(scratch));
      std::memcpy(scratch.b, p.data(), n);
      int clean = ld_classify(&scratch, static_cast<unsigned>(n));
      for (const auto& stale : payloads) {
        std::memset(&scratch, 0, sizeof(scratch));
        for (size_t i = 0; i < LD_SCRATCH_BYTES + 16; ++i) scratch.b[i] = stale[i % stale.size()];
        std::memcpy(scratch.b, p.data(), n);
        scratch.b[n] = 0;
        ASSERT_EQ(ld_classify(&scratch, static_cast<unsigned>(n)), clean)
            << "prefix " << n << " of: " << p << "\nover stale bytes of: " << stale;
      }
    }
  }
}

}  // namespace

namespace {

// An RFC 6455 frame: FIN + opcode, the length (7, 16 or 64 bits), a masking key when masked.
std::string ws_frame(const std::string& payload, bool masked, unsigned char first = 0x81) {
  std::string f(1, static_cast<char>(first));
  const unsigned char mask_bit = masked ? 0x80 : 0;
  if (payload.size() < 126) {
    f += static_cast<char>(mask_bit | payload.size());
  } else {
    f += static_cast<char>(mask_bit | 126);
    f += static_cast<char>(payload.size() >> 8);
    f += static_cast<char>(payload.size() & 0xff);
  }
  if (!masked) return f + payload;
  const std::string key = "\x11\x22\x33\x44";
  f += key;
  for (size_t i = 0; i < payload.size(); ++i) f += static_cast<char>(payload[i] ^ key[i % 4]);
  return f;
}

}  // namespace

TEST(Classify, WebSocketFrames) {
  const std::string token = R"({"type":"token","text":"hello"})";
  EXPECT_EQ(classify("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"), LD_PC_HTTP_SWITCH);
  EXPECT_EQ(classify(ws_frame(token, false)), LD_PC_WS_MESSAGE);
  EXPECT_EQ(classify(ws_frame(token, false) + ws_frame(token, false)), LD_PC_WS_MESSAGE);
  EXPECT_EQ(classify(ws_frame(token, true)), LD_PC_WS_CLIENT);
  EXPECT_EQ(classify(ws_frame(token, false, 0xc1)), LD_PC_WS_MESSAGE);             // permessage-deflate (RSV1)
  EXPECT_EQ(classify(ws_frame(token, false, 0x82)), LD_PC_WS_MESSAGE);             // binary
  EXPECT_EQ(classify(ws_frame(std::string(300, 'x'), false)), LD_PC_WS_MESSAGE);   // 16-bit length
  EXPECT_EQ(classify(ws_frame(std::string(2000, 'x'), false)), LD_PC_WS_MESSAGE);  // cut at 512 bytes read
  // Not WebSocket data: a ping, a fragment that is not final, frames that do not tile the bytes,
  // one masked and one not, a TLS record, a ZMQ frame (flags 0x01).
  EXPECT_EQ(classify(ws_frame("", false, 0x89)), LD_PC_OTHER);
  EXPECT_EQ(classify(ws_frame(token, false, 0x01)), LD_PC_OTHER);
  EXPECT_EQ(classify(ws_frame(token, false) + "xy"), LD_PC_OTHER);
  EXPECT_EQ(classify(ws_frame(token, false).substr(0, 10)), LD_PC_OTHER);
  EXPECT_EQ(classify(ws_frame(token, false) + ws_frame(token, true)), LD_PC_OTHER);
  EXPECT_EQ(classify(std::string("\x17\x03\x03\x00\x20", 5) + std::string(32, 'c')), LD_PC_OTHER);
  EXPECT_EQ(classify(std::string("\x01\x05hello", 7)), LD_PC_OTHER);
}
