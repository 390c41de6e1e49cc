// latency-doctor bench: drive a streaming endpoint and measure TTFT/TPOT from the client.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "bench/bench.hpp"
#include "cli/common.hpp"

namespace ld::cli {
namespace {

int run_bench_cmd(const bench::BenchOptions& o, bool quiet) {
  if (o.requests <= 0 || o.concurrency <= 0 || o.max_tokens <= 0) {
    print_error("bench", "--requests, --concurrency and --max-tokens must be positive");
    return kExitUsage;
  }
  auto progress = [quiet](const std::string& line) {
    if (!quiet) fmt::print(stderr, "{}\n", line);
  };
  auto result = bench::run_bench(o, progress);
  fmt::print("{}", bench::format_bench_summary(result));
  if (!o.tokens_out.empty() && !quiet) fmt::print(stderr, "token log written to {}\n", o.tokens_out);
  return result.failed == static_cast<int>(result.requests.size()) ? kExitRuntime : kExitOk;
}

}  // namespace

void register_bench(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<bench::BenchOptions>();
  auto quiet = std::make_shared<bool>(false);
  opts->url = "http://127.0.0.1:8000/v1/completions";
  auto* sub = app.add_subcommand(
      "bench", "Load an OpenAI-style streaming endpoint and measure TTFT and TPOT as a client sees them");
  sub->footer(
      "TTFT is timed to the first SSE data event (not to the response headers, which servers\n"
      "such as llama.cpp send before prompt processing). Only loopback URLs unless --allow-remote.\n\n"
      "Examples:\n"
      "  latency-doctor bench --url http://127.0.0.1:8000/v1/completions --requests 50 --concurrency 4\n"
      "  latency-doctor bench --requests 20 --tokens-out tokens.jsonl   # then: report TRACE --client tokens.jsonl\n\n"
      "Each request carries X-Request-Id: req-N (its id in the token log); the log's start lines\n"
      "carry the client's local port, which joins them to the server's requests (docs/definitions.md).");
  sub->add_option("--url", opts->url, "Streaming completions endpoint")->capture_default_str();
  sub->add_option("-n,--requests", opts->requests, "Requests to send")->capture_default_str();
  sub->add_option("-c,--concurrency", opts->concurrency, "Requests in flight at once")->capture_default_str();
  sub->add_option("--prompt-bytes", opts->prompt_bytes, "Prompt size in bytes")->capture_default_str();
  sub->add_option("--prompt-mix", opts->prompt_mix,
                  "Prompt sizes in bytes used in turn, comma-separated (request N gets the (N mod count)-th; "
                  "overrides --prompt-bytes): 256,256,256,16384 makes every 4th prompt long, whose prefill "
                  "a batching server computes while the other streams decode")
      ->delimiter(',')
      ->check(CLI::Range(size_t{1}, size_t{64} << 20));
  sub->add_option("--max-tokens", opts->max_tokens, "max_tokens of each request")->capture_default_str();
  sub->add_option("--tokens-out", opts->tokens_out, "Write a token log (jsonl, the --tokens jsonl: format)");
  sub->add_option("--timeout", opts->timeout_s, "Per-request timeout, seconds")->capture_default_str();
  sub->add_flag("--allow-remote", opts->allow_remote, "Allow a non-loopback URL (your own servers only)");
  sub->add_flag("--compressed", opts->compressed,
                "Accept compressed responses (gzip, deflate, br), as browsers and the OpenAI SDKs do: a proxy "
                "that compresses the stream then holds tokens back for this client too");
  sub->add_option("--cacert", opts->cacert,
                  "Verify an https:// server with this CA certificate (PEM) instead of the system's: a "
                  "self-signed server certificate is its own CA")
      ->check(CLI::ExistingFile);
  sub->add_flag("--http2", opts->http2,
                "Speak HTTP/2: h2c with prior knowledge to http://, negotiated by ALPN with https:// (the "
                "server must speak it: hypercorn, Envoy, Node's http2...)");
  sub->add_flag("-q,--quiet", *quiet, "No progress on stderr");
  sub->callback(
      [opts, quiet, &exit_code] { exit_code = run_command("bench", [&] { return run_bench_cmd(*opts, *quiet); }); });
}

}  // namespace ld::cli
