// The in-kernel payload classifier (bpf/classify.h), run in user space on the
// exact byte patterns real servers send.
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "classify.h"

namespace {

int classify(const std::string& bytes) {
  // The BPF side zero-fills the scratch before copying the payload; do the same.
  static ld_scratch scratch;
  std::memset(&scratch, 0, sizeof(scratch));
  size_t n = std::min(bytes.size(), static_cast<size_t>(LD_SCRATCH_BYTES));
  std::memcpy(scratch.b, bytes.data(), n);
  return ld_classify(&scratch, static_cast<unsigned>(n));
}

TEST(Classify, RequestLines) {
  EXPECT_EQ(classify("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"), LD_PC_HTTP_REQUEST);
  EXPECT_EQ(classify("GET /health HTTP/1.1\r\n\r\n"), LD_PC_HTTP_REQUEST);
  EXPECT_EQ(classify("OPTIONS * HTTP/1.1\r\n"), LD_PC_HTTP_REQUEST);
  EXPECT_EQ(classify("POSTX /"), LD_PC_OTHER);
  EXPECT_EQ(classify("{\"prompt\":\"hello\"}"), LD_PC_OTHER);  // a body sent separately
}

TEST(Classify, ResponseHeaders) {
  EXPECT_EQ(classify("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"),
            LD_PC_HTTP_RESPONSE);
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
  EXPECT_EQ(classify("1a\r\n"), LD_PC_CHUNK_FRAME);       // uvicorn: size line alone
  EXPECT_EQ(classify("\r\n"), LD_PC_CHUNK_FRAME);         // chunk close alone
  EXPECT_EQ(classify("0\r\n\r\n"), LD_PC_CHUNK_END);
  EXPECT_EQ(classify("\r\n0\r\n\r\n"), LD_PC_CHUNK_END);
  EXPECT_EQ(classify("1F\r\ndata: {\"t\":\"x\"}\n\n\r\n"), LD_PC_SSE_DATA);  // one write per token
  EXPECT_EQ(classify("\r\n1f\r\ndata: {\"t\":\"x\"}\n\n"), LD_PC_SSE_DATA);  // previous close first
  EXPECT_EQ(classify("e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"), LD_PC_SSE_DONE);
  EXPECT_EQ(classify("1a;ext=1\r\ndata: x\n\n"), LD_PC_SSE_DATA);
  EXPECT_EQ(classify("deadbeef is not a size line"), LD_PC_OTHER);
}

TEST(Classify, NothingLeaksPastN) {
  // Stale bytes past n must not count: the scratch is zeroed, so only n bytes exist.
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
  EXPECT_EQ(classify("data: {\"id\":\"x\",\"object\":\"text_completion\",\"choices\":[],\"usage\":{\"prompt_tokens\":3}}\n\n"),
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

}  // namespace
