#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "tokens/token_log.hpp"

namespace {

using ld::tokens::parse_token_log;
using ld::tokens::TokenLogResult;

constexpr int64_t kOffset = 1'700'000'000'000'000'000;  // realtime - monotonic

TokenLogResult parse(const std::string& text, int64_t offset = kOffset) {
  std::istringstream in(text);
  return parse_token_log(in, "tokens.jsonl", offset);
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST(TokenLog, GoodFileMonotonic) {
  const auto r = parse(joined({
      R"({"request":"a","event":"start","t_ns":1000000000,"clock":"monotonic","input_tokens":12})",
      R"({"request":"a","event":"token","t_ns":1300000000,"clock":"monotonic"})",
      R"({"request":"a","event":"token","t_ns":1350000000,"clock":"monotonic"})",
      R"({"request":"a","event":"token","t_ns":1420000000,"clock":"monotonic"})",
      R"({"request":"a","event":"end","t_ns":1421000000,"clock":"monotonic"})",
  }));
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(r.lines, 5u);
  EXPECT_EQ(r.bad_lines, 0u);
  ASSERT_EQ(r.timeline.requests.size(), 1u);
  const auto& req = r.timeline.requests[0];
  EXPECT_EQ(req.id, "a");
  EXPECT_EQ(req.start_ns, 1'000'000'000u);
  EXPECT_EQ(req.end_ns, 1'421'000'000u);
  EXPECT_TRUE(req.complete);
  EXPECT_EQ(req.input_tokens, 12);
  EXPECT_DOUBLE_EQ(req.ttft_ms(), 300.0);
  EXPECT_EQ(req.gaps_ms(), (std::vector<double>{50.0, 70.0}));
  EXPECT_EQ(req.token_tid, (std::vector<uint32_t>{0, 0, 0}));
}

TEST(TokenLog, RealtimeIsTheDefaultAndIsConverted) {
  const uint64_t mono = 5'000'000'000;
  const uint64_t real = mono + kOffset;
  const auto r = parse(joined({
      R"({"request":"r","event":"start","t_ns":)" + std::to_string(real) + "}",
      R"({"request":"r","event":"token","t_ns":)" + std::to_string(real + 200'000'000) + R"(,"clock":"realtime"})",
      R"({"request":"r","event":"token","t_ns":)" + std::to_string(mono + 250'000'000) + R"(,"clock":"monotonic"})",
  }));
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
  ASSERT_EQ(r.timeline.requests.size(), 1u);
  EXPECT_EQ(r.timeline.requests[0].start_ns, mono);
  EXPECT_EQ(r.timeline.requests[0].token_ns, (std::vector<uint64_t>{mono + 200'000'000, mono + 250'000'000}));
  EXPECT_FALSE(r.timeline.requests[0].complete);  // no end event
}

TEST(TokenLog, EveryKindOfBadLineIsWarnedWithItsLineNumber) {
  const auto r = parse(joined({
      R"({"request":"a","event":"start","t_ns":100,"clock":"monotonic"})",                    // 1 ok
      R"(not json at all)",                                                                   // 2
      R"([1,2,3])",                                                                           // 3
      R"({"event":"token","t_ns":200,"clock":"monotonic"})",                                  // 4
      R"({"request":true,"event":"token","t_ns":200,"clock":"monotonic"})",                   // 5
      R"({"request":"a","t_ns":200,"clock":"monotonic"})",                                    // 6
      R"({"request":"a","event":"tok","t_ns":200,"clock":"monotonic"})",                      // 7
      R"({"request":"a","event":"token","clock":"monotonic"})",                               // 8
      R"({"request":"a","event":"token","t_ns":-5,"clock":"monotonic"})",                     // 9
      R"({"request":"a","event":"token","t_ns":2.5,"clock":"monotonic"})",                    // 10
      R"({"request":"a","event":"token","t_ns":"200","clock":"monotonic"})",                  // 11
      R"({"request":"a","event":"token","t_ns":200,"clock":"tai"})",                          // 12
      R"({"request":"a","event":"start","t_ns":100,"clock":"monotonic","input_tokens":-1})",  // 13
      R"({"request":"","event":"token","t_ns":200,"clock":"monotonic"})",                     // 14
      R"({"request":"a","event":"token","t_ns":5})",                                          // 15 realtime < offset
      R"({"request":"a","event":"start","t_ns":150,"clock":"monotonic"})",                    // 16 second start
      R"({"request":"a","event":"token","t_ns":300,"clock":"monotonic"})",                    // 17 ok
      R"({"request":"a","event":"token","t_ns":300)",                                         // 18 truncated
  }));
  const std::vector<std::string> expected = {
      "tokens.jsonl:2: not valid JSON (at byte 2); line skipped",
      "tokens.jsonl:3: not a JSON object; line skipped",
      "tokens.jsonl:4: missing \"request\"; line skipped",
      "tokens.jsonl:5: \"request\" must be a string or a number; line skipped",
      "tokens.jsonl:6: missing \"event\"; line skipped",
      "tokens.jsonl:7: \"event\" must be \"start\", \"token\" or \"end\"; line skipped",
      "tokens.jsonl:8: missing \"t_ns\"; line skipped",
      "tokens.jsonl:9: \"t_ns\" must be a non-negative integer; line skipped",
      "tokens.jsonl:10: \"t_ns\" must be a non-negative integer; line skipped",
      "tokens.jsonl:11: \"t_ns\" must be a non-negative integer; line skipped",
      "tokens.jsonl:12: \"clock\" must be \"realtime\" or \"monotonic\"; line skipped",
      "tokens.jsonl:13: \"input_tokens\" must be a non-negative integer; line skipped",
      "tokens.jsonl:14: \"request\" is empty; line skipped",
      "tokens.jsonl:15: \"t_ns\" is before the monotonic clock's zero (realtime stamp before boot?); "
      "line skipped",
      "tokens.jsonl:16: second start for request \"a\" (first on line 1); line skipped",
      "tokens.jsonl:18: not valid JSON (at byte 42); line skipped",
  };
  EXPECT_EQ(r.warnings, expected);
  EXPECT_EQ(r.lines, 18u);
  EXPECT_EQ(r.bad_lines, 16u);
  ASSERT_EQ(r.timeline.requests.size(), 1u);
  EXPECT_EQ(r.timeline.requests[0].token_ns, (std::vector<uint64_t>{300}));
  EXPECT_EQ(r.timeline.requests[0].start_ns, 100u);
}

TEST(TokenLog, NumbersAndIntegerValuedFloatsAreAccepted) {
  const auto r = parse(joined({
      R"({"request":7,"event":"start","t_ns":1e9,"clock":"monotonic","input_tokens":64.0})",
      R"({"request":7,"event":"token","t_ns":1.25e9,"clock":"monotonic"})",
  }));
  EXPECT_TRUE(r.warnings.empty());
  ASSERT_EQ(r.timeline.requests.size(), 1u);
  EXPECT_EQ(r.timeline.requests[0].id, "7");
  EXPECT_EQ(r.timeline.requests[0].input_tokens, 64);
  EXPECT_DOUBLE_EQ(r.timeline.requests[0].ttft_ms(), 250.0);
}

TEST(TokenLog, CrlfLineEndingsAndBlankLines) {
  const std::string text =
      "\r\n"
      "{\"request\":\"a\",\"event\":\"start\",\"t_ns\":10,\"clock\":\"monotonic\"}\r\n"
      "   \r\n"
      "\r\n"
      "{\"request\":\"a\",\"event\":\"token\",\"t_ns\":20,\"clock\":\"monotonic\"}\r\n"
      "oops\r\n"
      "{\"request\":\"a\",\"event\":\"token\",\"t_ns\":30,\"clock\":\"monotonic\"}";  // no final newline
  const auto r = parse(text);
  EXPECT_EQ(r.warnings, (std::vector<std::string>{"tokens.jsonl:6: not valid JSON (at byte 1); line skipped"}));
  EXPECT_EQ(r.lines, 7u);
  ASSERT_EQ(r.timeline.requests.size(), 1u);
  EXPECT_EQ(r.timeline.requests[0].token_ns, (std::vector<uint64_t>{20, 30}));
}

TEST(TokenLog, TokensAreSortedAndRequestsOrderedByStart) {
  const auto r = parse(joined({
      R"({"request":"late","event":"token","t_ns":900,"clock":"monotonic"})",
      R"({"request":"late","event":"token","t_ns":700,"clock":"monotonic"})",
      R"({"request":"late","event":"start","t_ns":500,"clock":"monotonic"})",
      R"({"request":"early","event":"start","t_ns":100,"clock":"monotonic"})",
      R"({"request":"early","event":"token","t_ns":150,"clock":"monotonic"})",
  }));
  EXPECT_TRUE(r.warnings.empty());
  ASSERT_EQ(r.timeline.requests.size(), 2u);
  EXPECT_EQ(r.timeline.requests[0].id, "early");
  EXPECT_EQ(r.timeline.requests[1].id, "late");
  EXPECT_EQ(r.timeline.requests[1].token_ns, (std::vector<uint64_t>{700, 900}));
}

TEST(TokenLog, RequestWithoutStartIsSkippedWithAWarning) {
  const auto r = parse(joined({
      R"({"request":"orphan","event":"token","t_ns":200,"clock":"monotonic"})",
      R"({"request":"ok","event":"start","t_ns":100,"clock":"monotonic"})",
      R"({"request":"ok","event":"token","t_ns":50,"clock":"monotonic"})",
      R"({"request":"ok","event":"token","t_ns":150,"clock":"monotonic"})",
  }));
  EXPECT_EQ(r.warnings, (std::vector<std::string>{
                            "tokens.jsonl: request \"orphan\" has no start event; skipped",
                            "tokens.jsonl:3: token of request \"ok\" is earlier than its start (line 2); "
                            "line skipped",
                        }));
  EXPECT_EQ(r.skipped_requests, 1u);
  ASSERT_EQ(r.timeline.requests.size(), 1u);
  EXPECT_EQ(r.timeline.requests[0].token_ns, (std::vector<uint64_t>{150}));
}

TEST(TokenLog, RequestsWithoutTokens) {
  const auto r = parse(joined({
      R"({"request":"health","event":"start","t_ns":100,"clock":"monotonic"})",
      R"({"request":"health","event":"end","t_ns":101,"clock":"monotonic"})",
      R"({"request":"waiting","event":"start","t_ns":200,"clock":"monotonic"})",
  }));
  EXPECT_TRUE(r.timeline.requests.empty());
  EXPECT_EQ(r.timeline.non_streaming_requests, 1u);
  EXPECT_EQ(r.timeline.in_flight_requests, 1u);
}

TEST(TokenLog, OverlongLineIsSkipped) {
  std::string text = R"({"request":"a","event":"start","t_ns":1,"clock":"monotonic"})"
                     "\n";
  text += std::string(ld::tokens::kMaxLineBytes + 10, 'x') + "\n";
  text += R"({"request":"a","event":"token","t_ns":2,"clock":"monotonic"})"
          "\n";
  const auto r = parse(text);
  EXPECT_EQ(r.warnings, (std::vector<std::string>{"tokens.jsonl:2: line longer than 1048576 bytes; line skipped"}));
  ASSERT_EQ(r.timeline.requests.size(), 1u);
  EXPECT_EQ(r.timeline.requests[0].token_ns.size(), 1u);
}

TEST(TokenLog, WarningsAreCapped) {
  std::string text;
  for (int i = 0; i < 500; ++i) text += "bad\n";
  const auto r = parse(text);
  EXPECT_EQ(r.bad_lines, 500u);
  ASSERT_EQ(r.warnings.size(), ld::tokens::kMaxLineWarnings + 1);
  EXPECT_EQ(r.warnings.back(), "tokens.jsonl: 400 more warnings not shown");
}

TEST(TokenLog, ExtremeValuesDoNotOverflow) {
  const auto r = parse(joined({
                           R"({"request":"a","event":"start","t_ns":18446744073709551615,"clock":"monotonic"})",
                           R"({"request":"b","event":"start","t_ns":18446744073709551616,"clock":"monotonic"})",
                           R"({"request":"c","event":"start","t_ns":1e300,"clock":"monotonic"})",
                           R"({"request":"d","event":"start","t_ns":0})",
                       }),
                       INT64_MIN);
  // a: the largest stamp is fine; b, c: too large; d: realtime 0 - INT64_MIN overflows int64 but
  // not the conversion.
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_EQ(r.warnings[0], "tokens.jsonl:2: \"t_ns\" must be a non-negative integer; line skipped");
  EXPECT_EQ(r.warnings[1], "tokens.jsonl:3: \"t_ns\" must be a non-negative integer; line skipped");
  EXPECT_EQ(r.timeline.in_flight_requests, 2u);
}

TEST(TokenLog, ReadTokenLogFromFileAndErrors) {
  char path[] = "/tmp/ld_token_log_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream out(path);
    out << R"({"request":"a","event":"start","t_ns":10,"clock":"monotonic"})"
        << "\n"
        << R"({"request":"a","event":"token","t_ns":20,"clock":"monotonic"})"
        << "\n"
        << "bad\n";
  }
  const auto r = ld::tokens::read_token_log(path, 0);
  EXPECT_EQ(r.timeline.requests.size(), 1u);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0], std::string(path) + ":3: not valid JSON (at byte 1); line skipped");
  std::remove(path);
  try {
    ld::tokens::read_token_log("/nonexistent/tokens.jsonl", 0);
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot read /nonexistent/tokens.jsonl: No such file or directory");
  }
  EXPECT_THROW(ld::tokens::read_token_log("/tmp", 0), std::runtime_error);
}

TEST(TokenLog, EmptyInput) {
  const auto r = parse("");
  EXPECT_EQ(r.lines, 0u);
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_TRUE(r.timeline.requests.empty());
}

}  // namespace
