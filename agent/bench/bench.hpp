// The load client behind `latency-doctor bench`: POSTs streaming completions to an
// OpenAI-compatible endpoint and times every SSE token on the client side (CLOCK_MONOTONIC).
//
// TTFT is measured to the first SSE data event, never to the response headers: llama.cpp,
// uvicorn and hyper send headers before prefill, so header time says nothing about the model.
// Every request carries "X-Request-Id: req-N" (its id in the token log), which proxies log and
// engines such as vLLM can adopt as their own request id.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ld::bench {

struct BenchOptions {
  std::string url;  // e.g. http://127.0.0.1:8000/v1/completions
  int requests = 10;
  int concurrency = 1;  // simultaneous requests (one thread + connection each)
  size_t prompt_bytes = 256;
  // Prompt sizes in bytes used in turn, request i (from 0) the (i mod size)-th; empty = every
  // request prompt_bytes. {256, 256, 256, 16384}: every 4th request brings a long prompt, whose
  // prefill a batching server computes while the other streams decode.
  std::vector<size_t> prompt_mix;
  int max_tokens = 30;
  std::string tokens_out;     // token log (jsonl) path; empty = none
  double timeout_s = 120;     // per request
  bool allow_remote = false;  // without it only loopback hosts are accepted
  // Accept gzip/deflate/br like browsers and the OpenAI SDKs (httpx, aiohttp) do; libcurl
  // decodes. A proxy that compresses text/event-stream then holds tokens back, as it would for
  // those clients.
  bool compressed = false;
  // A CA certificate (PEM) to verify an https:// server with, instead of the system bundle: a server
  // with a self-signed certificate, as a staging host often has. Verification stays on.
  std::string cacert;
  // Speak HTTP/2: with prior knowledge (h2c) to an http:// URL, by ALPN to an https:// one, as
  // gRPC-era clients and browsers do. Each concurrent client keeps its own connection.
  bool http2 = false;
};

struct BenchRequestResult {
  std::string id;
  uint64_t start_mono_ns = 0;
  uint64_t first_token_mono_ns = 0;  // 0 if no token arrived
  uint64_t end_mono_ns = 0;
  std::vector<uint64_t> token_mono_ns;
  long http_status = 0;               // 0 if no response
  std::string error;                  // empty = success
  std::optional<long> prompt_tokens;  // from a "usage" event, when the server sends one
  uint16_t local_port = 0;            // the client's TCP port of the connection (0: none)
};

struct BenchResult {
  std::vector<BenchRequestResult> requests;
  // Computed by summarize(); NaN when there is nothing to measure.
  double ttft_p50_ms = 0, ttft_p90_ms = 0, ttft_p99_ms = 0;
  double tpot_median_ms = 0, tpot_stddev_ms = 0;
  double tpot_p99_ms = 0;
  double wall_s = 0;        // first request start to last request end
  double tokens_per_s = 0;  // tokens / wall_s: the server's throughput under this load
  uint64_t tokens = 0;
  int failed = 0;
};

// Runs the benchmark. Throws std::invalid_argument for bad options (including a non-loopback
// URL without allow_remote) and std::runtime_error if tokens_out cannot be written. Per-request
// failures (HTTP errors, refused connections, timeouts) are recorded, never thrown. `progress`
// is called (serialised) after each request with a one-line status.
BenchResult run_bench(const BenchOptions& opts, std::function<void(const std::string&)> progress = {});

std::string format_bench_summary(const BenchResult& result);

// ------------------------------------------------------------------ pieces, public for tests

struct SseEvent {
  std::string event;  // "event:" field; empty = default "message"
  std::string data;   // data lines joined with '\n'
  std::string id;
  uint64_t t_ns = 0;  // arrival time of the blank line that completed the event
};

// Incremental text/event-stream parser (WHATWG rules): lines end in \n, \r\n or \r; ":" lines
// are comments; "field: value" loses one leading space; several data lines join with '\n'; an
// event is dispatched at a blank line only if it has data. Input may be split anywhere.
class SseParser {
 public:
  using Callback = std::function<void(const SseEvent&)>;
  explicit SseParser(Callback on_event) : on_event_(std::move(on_event)) {}

  void feed(std::string_view bytes, uint64_t now_ns);

 private:
  void process_line(std::string_view line, uint64_t now_ns);

  Callback on_event_;
  std::string line_;      // partial line carried over between feeds
  bool skip_lf_ = false;  // previous feed ended in '\r': a leading '\n' belongs to it
  bool bom_checked_ = false;
  SseEvent pending_;
  bool has_data_ = false;
};

// Whether an SSE data payload is a generated token: anything but "[DONE]" and usage-only
// events (a "usage" object with no choice carrying text), which servers send after the last
// token when asked for usage (llama.cpp, OpenAI stream_options.include_usage).
bool is_token_event(std::string_view data);
// usage.prompt_tokens of a usage event, if this data payload is one.
std::optional<long> usage_prompt_tokens(std::string_view data);

// Statistics come from analysis/stats.hpp, the same functions the server-side report uses,
// so client and server numbers are computed alike.
// Fills the computed fields of `result` from result.requests.
void summarize(BenchResult& result);

// Throws std::invalid_argument unless `url` is http(s) and (allow_remote or its host is
// loopback: 127.0.0.0/8, localhost, ::1).
void check_url(const std::string& url, bool allow_remote);
bool is_loopback_host(std::string host);

// Writes the contract token log (one JSON object per line, "clock":"monotonic"; "local_port" on
// start lines: the server sees it as the peer port, which joins the log to the server's requests
// exactly), mode 0600.
void write_token_log(const std::string& path, const std::vector<BenchRequestResult>& requests);

uint64_t monotonic_now_ns();

}  // namespace ld::bench
