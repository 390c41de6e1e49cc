// nginx config parsing for the audit: syntax (comments, quotes, escapes, variables), errors
// with file:line, includes (globs, relative, missing, cycles) on fixture trees, and the
// effective SSE settings of proxied blocks.
#include <gtest/gtest.h>

#include "audit/nginx_conf.hpp"

using namespace ld::audit;

namespace {

const std::string kFixtures = std::string(LD_TEST_FIXTURES_DIR) + "/audit";

std::vector<NginxDirective> parse_ok(std::string_view text) {
  std::vector<std::string> errors;
  auto out = parse_nginx(text, "t.conf", errors);
  EXPECT_TRUE(errors.empty()) << errors.front();
  return out;
}

std::string parse_error(std::string_view text) {
  std::vector<std::string> errors;
  parse_nginx(text, "t.conf", errors);
  return errors.empty() ? "" : errors.front();
}

const NginxSetting& setting(const ProxiedBlock& b, const std::string& name) { return b.settings.at(name); }

}  // namespace

TEST(NginxParse, DirectivesBlocksAndLines) {
  auto top = parse_ok("user www;\n\nhttp {\n  server {\n    listen 80 default_server;\n  }\n}\n");
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].name, "user");
  EXPECT_EQ(top[0].args, std::vector<std::string>{"www"});
  EXPECT_FALSE(top[0].is_block);
  EXPECT_EQ(top[1].name, "http");
  EXPECT_EQ(top[1].line, 3);
  ASSERT_EQ(top[1].children.size(), 1u);
  const auto& listen = top[1].children[0].children.at(0);
  EXPECT_EQ(listen.name, "listen");
  EXPECT_EQ(listen.args, (std::vector<std::string>{"80", "default_server"}));
  EXPECT_EQ(listen.line, 5);
  EXPECT_EQ(listen.file, "t.conf");
}

TEST(NginxParse, CommentsQuotesEscapesAndVariables) {
  auto top = parse_ok(
      "# a comment; with { braces }\n"
      "a \"x; y\" 'it''s' # trailing comment\n"
      "  b\\;c;\n"
      "set $v \"line\\\"quote\";\n"
      "add_header X ${upstream_addr}:$host;\n"
      "return 200 \"multi\nline\";\n"
      "after x#y;\n");
  ASSERT_EQ(top.size(), 5u);
  EXPECT_EQ(top[0].name, "a");
  EXPECT_EQ(top[0].args, (std::vector<std::string>{"x; y", "it", "s", "b\\;c"}));
  EXPECT_EQ(top[1].args, (std::vector<std::string>{"$v", "line\"quote"}));
  EXPECT_EQ(top[2].args, (std::vector<std::string>{"X", "${upstream_addr}:$host"}));
  EXPECT_EQ(top[3].args.at(1), "multi\nline");
  EXPECT_EQ(top[4].line, 8);                                // the newline inside the quoted string was counted
  EXPECT_EQ(top[4].args, std::vector<std::string>{"x#y"});  // '#' inside a word is not a comment
}

TEST(NginxParse, ErrorsNameFileAndLineAndKeepWhatCameBefore) {
  EXPECT_EQ(parse_error("a b;\nhttp {\n  x 1;\n"), "t.conf:4: unexpected end of file, expecting \"}\"");
  EXPECT_EQ(parse_error("a;\n}\n"), "t.conf:2: unexpected \"}\"");
  EXPECT_EQ(parse_error("a\n\"open;\n"), "t.conf:2: unterminated quoted string");
  EXPECT_EQ(parse_error("a;\n;\n"), "t.conf:2: unexpected \";\"");
  EXPECT_EQ(parse_error("http { x 1 }"), "t.conf:1: unexpected \"}\" (missing \";\" before it?)");
  EXPECT_EQ(parse_error("x 1"), "t.conf:1: unexpected end of file after \"x\" (missing \";\"?)");
  std::vector<std::string> errors;
  auto top = parse_nginx("first 1;\nsecond {\n", "t.conf", errors);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].name, "first");
}

TEST(NginxParse, DeepNestingIsAnErrorNotACrash) {
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "a {";
  std::vector<std::string> errors;
  parse_nginx(deep, "t.conf", errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("nested too deeply"), std::string::npos);
}

TEST(NginxTime, Units) {
  EXPECT_EQ(nginx_time_ms("60s"), 60000);
  EXPECT_EQ(nginx_time_ms("75"), 75000);
  EXPECT_EQ(nginx_time_ms("500ms"), 500);
  EXPECT_EQ(nginx_time_ms("1m30s"), 90000);
  EXPECT_EQ(nginx_time_ms("1h 30m"), 5400000);
  EXPECT_EQ(nginx_time_ms("2d"), 2 * 86400000.0);
  EXPECT_FALSE(nginx_time_ms("forever"));
  EXPECT_FALSE(nginx_time_ms("10x"));
  EXPECT_FALSE(nginx_time_ms(""));
}

TEST(NginxConfig, IncludesWithGlobsAndRelativePaths) {
  HostTree tree(kFixtures + "/good");
  auto config = load_nginx_config(tree, "/etc/nginx/nginx.conf");
  EXPECT_TRUE(config.errors.empty()) << config.errors.front();
  EXPECT_EQ(config.files, (std::vector<std::string>{"/etc/nginx/nginx.conf", "/etc/nginx/sites-enabled/llm"}));
  auto blocks = proxied_blocks(config);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].where, "server _, location /");
  EXPECT_EQ(blocks[0].at, "/etc/nginx/sites-enabled/llm:4");
  EXPECT_EQ(setting(blocks[0], "proxy_buffering").value, "off");
  EXPECT_EQ(setting(blocks[0], "proxy_buffering").at, "/etc/nginx/sites-enabled/llm:6");
  EXPECT_FALSE(setting(blocks[0], "proxy_buffering").is_default);
  // Inherited from http in the main file.
  EXPECT_EQ(setting(blocks[0], "keepalive_timeout").value, "5s");
  EXPECT_EQ(setting(blocks[0], "keepalive_timeout").at, "/etc/nginx/nginx.conf:4");
}

TEST(NginxConfig, DefaultsPointAtTheProxyPass) {
  HostTree tree(kFixtures + "/bad");
  auto config = load_nginx_config(tree, "/etc/nginx/nginx.conf");
  EXPECT_TRUE(config.errors.empty()) << config.errors.front();
  EXPECT_EQ(config.files.size(), 3u);  // nginx.conf, mime.types, conf.d/llm.conf
  auto blocks = proxied_blocks(config);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].where, "server llm.example.com, location /v1/");
  const auto& buffering = setting(blocks[0], "proxy_buffering");
  EXPECT_EQ(buffering.value, "on");
  EXPECT_TRUE(buffering.is_default);
  EXPECT_EQ(buffering.at, "/etc/nginx/conf.d/llm.conf:5");
  EXPECT_EQ(setting(blocks[0], "proxy_buffer_size").value, "64k");
  EXPECT_EQ(setting(blocks[0], "keepalive_timeout").at, "/etc/nginx/nginx.conf:8");
}

TEST(NginxConfig, BrokenIncludesAreReportedAndTheRestIsRead) {
  HostTree tree(kFixtures + "/partial");
  auto config = load_nginx_config(tree, "/etc/nginx/nginx.conf");
  std::string all;
  for (const auto& e : config.errors) all += e + "\n";
  EXPECT_NE(all.find("/etc/nginx/conf.d/a.conf:2: unexpected end of file"), std::string::npos) << all;
  EXPECT_NE(all.find("/etc/nginx/nginx.conf:3: cannot read /etc/nginx/missing.conf: no such file"), std::string::npos)
      << all;
  EXPECT_NE(all.find("/etc/nginx/nginx.conf:4: include /etc/nginx/nginx.conf: includes itself"), std::string::npos)
      << all;
  EXPECT_NE(all.find("/etc/nginx/nginx.conf:9: unterminated quoted string"), std::string::npos) << all;
  // The included file's location before its error is still seen.
  auto blocks = proxied_blocks(config);
  ASSERT_GE(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].at, "/etc/nginx/conf.d/a.conf:1");
}

TEST(NginxConfig, InheritanceInnermostWinsAndNestedLocations) {
  std::vector<std::string> errors;
  NginxConfig config;
  config.directives = parse_nginx(
      "http {\n"
      "  proxy_buffering off;\n"
      "  server {\n"
      "    location /a { proxy_pass http://x; }\n"
      "    location /b {\n"
      "      proxy_buffering on;\n"
      "      location /b/c { proxy_pass http://y; proxy_read_timeout 5m; }\n"
      "    }\n"
      "  }\n"
      "}\n",
      "n.conf", errors);
  ASSERT_TRUE(errors.empty());
  auto blocks = proxied_blocks(config);
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(setting(blocks[0], "proxy_buffering").value, "off");
  EXPECT_EQ(setting(blocks[0], "proxy_buffering").at, "n.conf:2");
  EXPECT_EQ(blocks[1].where, "server, location /b, location /b/c");
  EXPECT_EQ(setting(blocks[1], "proxy_buffering").value, "on");
  EXPECT_EQ(setting(blocks[1], "proxy_buffering").at, "n.conf:6");
  EXPECT_EQ(setting(blocks[1], "proxy_read_timeout").value, "5m");
  EXPECT_TRUE(setting(blocks[0], "proxy_read_timeout").is_default);
}
