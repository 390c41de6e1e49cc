#include <gtest/gtest.h>

#include "util/parse.hpp"

using namespace ld::util;

TEST(ParseDuration, UnitsOfTheContract) {
  EXPECT_EQ(parse_duration_ms("500ms"), 500u);
  EXPECT_EQ(parse_duration_ms("30s"), 30000u);
  EXPECT_EQ(parse_duration_ms("5m"), 300000u);
  EXPECT_EQ(parse_duration_ms("1h"), 3600000u);
  EXPECT_EQ(parse_duration_ms("7"), 7000u);  // bare number: seconds
}

TEST(ParseDuration, RejectsWhatIsNotADuration) {
  for (const char* bad : {"", "0s", "soon", "s", "-5s", "5 s", "5sec", "1.5s", "99999999999999s"})
    EXPECT_FALSE(parse_duration_ms(bad).has_value()) << bad;
}

TEST(ParseSize, Suffixes) {
  EXPECT_EQ(parse_size("16M"), 16u << 20);
  EXPECT_EQ(parse_size("512K"), 512u << 10);
  EXPECT_EQ(parse_size("1G"), 1u << 30);
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_FALSE(parse_size("16X").has_value());
  EXPECT_FALSE(parse_size("M").has_value());
}

TEST(ParseTokenSource, SseOrJsonl) {
  EXPECT_EQ(parse_token_source("sse"), "sse");
  EXPECT_EQ(parse_token_source("jsonl:/tmp/t.jsonl"), "jsonl:/tmp/t.jsonl");
  EXPECT_FALSE(parse_token_source("jsonl:").has_value());
  EXPECT_FALSE(parse_token_source("csv:x").has_value());
}

TEST(SplitList, SkipsEmptyItems) {
  EXPECT_EQ(split_list("a,b,,c"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(split_list("").empty());
}
