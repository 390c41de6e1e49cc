#include "bench/bench.hpp"

#include "bench/curl_api.hpp"
#include "model/stats.hpp"
#include "util/time.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

namespace ld::bench {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}

uint64_t monotonic_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return util::timespec_ns(ts);
}

// ------------------------------------------------------------------------------------ SSE

void SseParser::feed(std::string_view bytes, uint64_t now_ns) {
  size_t i = 0;
  if (skip_lf_ && !bytes.empty()) {
    if (bytes[0] == '\n') i = 1;  // the LF of a CRLF split across feeds
    skip_lf_ = false;
  }
  while (i < bytes.size()) {
    size_t j = bytes.find_first_of("\r\n", i);
    if (j == std::string_view::npos) {
      line_.append(bytes.substr(i));
      return;
    }
    line_.append(bytes.substr(i, j - i));
    process_line(line_, now_ns);
    line_.clear();
    if (bytes[j] == '\r') {
      if (j + 1 == bytes.size()) skip_lf_ = true;
      else if (bytes[j + 1] == '\n') ++j;
    }
    i = j + 1;
  }
}

void SseParser::process_line(std::string_view line, uint64_t now_ns) {
  if (!bom_checked_) {
    bom_checked_ = true;
    if (line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
  }
  if (line.empty()) {  // blank line: dispatch
    if (has_data_) {
      pending_.data.pop_back();  // the '\n' after the last data line
      pending_.t_ns = now_ns;
      if (on_event_) on_event_(pending_);
    }
    pending_.event.clear();
    pending_.data.clear();
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // comment, e.g. ": ping" keep-alives
  size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    pending_.data.append(value).push_back('\n');
    has_data_ = true;
  } else if (field == "event") {
    pending_.event = value;
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) pending_.id = value;  // sticky, per spec
  }
  // "retry" and unknown fields are ignored.
}

namespace {

// Cheap pre-check: only payloads mentioning "usage" need a JSON parse.
std::optional<nlohmann::json> parse_usage_candidate(std::string_view data) {
  if (data.find("\"usage\"") == std::string_view::npos) return std::nullopt;
  auto j = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("usage") || !j["usage"].is_object()) return std::nullopt;
  return j;
}

bool non_empty_string(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

bool choice_has_text(const nlohmann::json& choice) {
  if (!choice.is_object()) return false;
  if (non_empty_string(choice, "text")) return true;
  auto delta = choice.find("delta");
  return delta != choice.end() && delta->is_object() &&
         (non_empty_string(*delta, "content") || non_empty_string(*delta, "reasoning_content"));
}

}  // namespace

bool is_token_event(std::string_view data) {
  if (data == "[DONE]") return false;
  auto j = parse_usage_candidate(data);
  if (!j) return true;
  auto choices = j->find("choices");
  if (choices == j->end() || !choices->is_array()) return false;
  return std::any_of(choices->begin(), choices->end(), choice_has_text);
}

std::optional<long> usage_prompt_tokens(std::string_view data) {
  auto j = parse_usage_candidate(data);
  if (!j) return std::nullopt;
  const auto& usage = (*j)["usage"];
  auto it = usage.find("prompt_tokens");
  if (it == usage.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<long>();
}

// ------------------------------------------------------------------------------------ stats

void summarize(BenchResult& r) {
  std::vector<double> ttft_ms, gaps_ms;
  r.tokens = 0;
  r.failed = 0;
  for (const auto& q : r.requests) {
    r.tokens += q.token_mono_ns.size();
    if (!q.error.empty()) {
      ++r.failed;
      continue;  // a broken stream's timings would skew the latency figures
    }
    if (q.first_token_mono_ns != 0) ttft_ms.push_back(util::ns_to_ms(q.first_token_mono_ns - q.start_mono_ns));
    for (size_t i = 1; i < q.token_mono_ns.size(); ++i)
      gaps_ms.push_back(util::ns_to_ms(q.token_mono_ns[i] - q.token_mono_ns[i - 1]));
  }
  r.ttft_p50_ms = model::percentile(ttft_ms, 50);
  r.ttft_p90_ms = model::percentile(ttft_ms, 90);
  r.ttft_p99_ms = model::percentile(ttft_ms, 99);
  r.tpot_median_ms = model::percentile(gaps_ms, 50);
  r.tpot_stddev_ms = model::stddev(gaps_ms);
  r.tpot_p99_ms = model::percentile(gaps_ms, 99);
  uint64_t first_start = UINT64_MAX, last_end = 0;
  for (const auto& q : r.requests) {
    if (q.start_mono_ns) first_start = std::min(first_start, q.start_mono_ns);
    last_end = std::max(last_end, q.end_mono_ns);
  }
  r.wall_s = last_end > first_start ? util::ns_to_s(last_end - first_start) : 0;
  r.tokens_per_s = r.wall_s > 0 ? static_cast<double>(r.tokens) / r.wall_s : 0;
}

// ------------------------------------------------------------------------------------ URL check

bool is_loopback_host(std::string host) {
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost" || host == "localhost.") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

namespace {

struct CurlUrlDeleter {
  void operator()(CURLU* u) const { curl_lib().url_cleanup(u); }
};

struct UrlParts {
  std::string scheme, host, path;
};

// Parses with curl's own URL parser so we check exactly the host curl will connect to.
UrlParts parse_url(const std::string& url) {
  std::unique_ptr<CURLU, CurlUrlDeleter> u(curl_lib().url());
  if (!u || curl_lib().url_set(u.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK)
    throw std::invalid_argument(fmt::format("bench: invalid URL '{}'", url));
  auto part = [&](CURLUPart which) {
    char* s = nullptr;
    std::string out;
    if (curl_lib().url_get(u.get(), which, &s, 0) == CURLUE_OK && s) out = s;
    curl_lib().free(s);
    return out;
  };
  return {part(CURLUPART_SCHEME), part(CURLUPART_HOST), part(CURLUPART_PATH)};
}

}  // namespace

void check_url(const std::string& url, bool allow_remote) {
  UrlParts p = parse_url(url);
  if (p.scheme != "http" && p.scheme != "https")
    throw std::invalid_argument(fmt::format("bench: URL '{}' must be http:// or https://", url));
  if (!allow_remote && !is_loopback_host(p.host))
    throw std::invalid_argument(
        fmt::format("bench: refusing non-loopback host '{}' (only 127.0.0.0/8, localhost and [::1] are "
                    "allowed; pass --allow-remote to load a remote server)",
                    p.host));
}

// ------------------------------------------------------------------------------------ token log

namespace {

// Created (or truncated) with mode 0600, also when the file already existed.
int open_private(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ::fchmod(fd, 0600) != 0) {
    std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw std::runtime_error(fmt::format("cannot write {}: {}", path, why));
  }
  return fd;
}

std::string token_log_text(const std::vector<BenchRequestResult>& requests) {
  std::string out;
  auto line = [&](const std::string& id, const char* event, uint64_t t_ns,
                  std::optional<long> input_tokens = std::nullopt, uint16_t local_port = 0) {
    nlohmann::ordered_json j;
    j["request"] = id;
    j["event"] = event;
    j["t_ns"] = t_ns;
    j["clock"] = "monotonic";
    if (input_tokens) j["input_tokens"] = *input_tokens;
    if (local_port) j["local_port"] = local_port;
    out += j.dump();
    out += '\n';
  };
  for (const auto& r : requests) {
    if (r.start_mono_ns == 0) continue;  // never started
    line(r.id, "start", r.start_mono_ns, r.prompt_tokens, r.local_port);
    for (uint64_t t : r.token_mono_ns) line(r.id, "token", t);
    line(r.id, "end", r.end_mono_ns);
  }
  return out;
}

void write_fd(int fd, const std::string& text, const std::string& path) {
  std::string_view rest = text;
  while (!rest.empty()) {
    ssize_t n = ::write(fd, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(fmt::format("cannot write {}: {}", path, strerror(errno)));
    rest.remove_prefix(static_cast<size_t>(n));
  }
}

struct FdCloser {
  int fd = -1;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

void write_token_log_fd(int fd, const std::string& path, const std::vector<BenchRequestResult>& requests) {
  write_fd(fd, token_log_text(requests), path);
}

}  // namespace

void write_token_log(const std::string& path, const std::vector<BenchRequestResult>& requests) {
  FdCloser f{open_private(path)};
  write_token_log_fd(f.fd, path, requests);
}

// ------------------------------------------------------------------------------------ requests

namespace {

// Filler with word boundaries so real tokenizers see roughly one token per word instead of
// compressing a run of one letter; cut to exactly prompt_bytes.
std::string make_prompt(size_t bytes) {
  static constexpr std::string_view kWords = "the quick brown fox jumps over a lazy dog ";
  std::string s;
  s.reserve(bytes);
  while (s.size() < bytes) s.append(kWords.substr(0, std::min(kWords.size(), bytes - s.size())));
  return s;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Chat endpoints need "messages"; everything else gets the completions "prompt".
std::string make_body(const BenchOptions& o, bool chat, size_t prompt_bytes) {
  nlohmann::ordered_json j;
  if (chat) j["messages"] = {{{"role", "user"}, {"content", make_prompt(prompt_bytes)}}};
  else j["prompt"] = make_prompt(prompt_bytes);
  j["max_tokens"] = o.max_tokens;
  j["stream"] = true;
  return j.dump();
}

// Per-request state reachable from the curl write callback.
struct Transfer {
  CURL* curl = nullptr;
  BenchRequestResult* result = nullptr;
  SseParser parser;
  bool status_checked = false;
  bool http_ok = true;
  std::string error_body;  // first bytes of a non-2xx body, for the error message

  Transfer(CURL* c, BenchRequestResult* r) : curl(c), result(r), parser([this](const SseEvent& ev) { on_event(ev); }) {}

  void on_event(const SseEvent& ev) {
    if (is_token_event(ev.data)) {
      result->token_mono_ns.push_back(ev.t_ns);
    } else if (auto pt = usage_prompt_tokens(ev.data)) {
      result->prompt_tokens = pt;
    }
  }
};

size_t on_body(char* ptr, size_t size, size_t nmemb, void* userdata) {
  const uint64_t now = monotonic_now_ns();  // first thing: the arrival time of these bytes
  auto* t = static_cast<Transfer*>(userdata);
  const size_t n = size * nmemb;
  if (!t->status_checked) {
    t->status_checked = true;
    long code = 0;
    curl_lib().easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
    t->http_ok = code >= 200 && code < 300;
  }
  if (t->http_ok) {
    t->parser.feed(std::string_view(ptr, n), now);
  } else if (t->error_body.size() < 200) {
    t->error_body.append(ptr, std::min(n, 200 - t->error_body.size()));
  }
  return n;
}

struct CurlEasyDeleter {
  void operator()(CURL* c) const { curl_lib().easy_cleanup(c); }
};
struct CurlSlistDeleter {
  void operator()(curl_slist* l) const { curl_lib().slist_free_all(l); }
};
using CurlEasy = std::unique_ptr<CURL, CurlEasyDeleter>;
using CurlHeaders = std::unique_ptr<curl_slist, CurlSlistDeleter>;

struct RequestPlan {
  const BenchOptions* opts;
  std::vector<std::string> bodies;  // request i sends bodies[i % size]: the prompt size mix
  bool loopback;
  curl_slist* headers;
  const std::string& body(int request) const { return bodies[static_cast<size_t>(request) % bodies.size()]; }
};

// Options that stay the same for every request a handle makes (the handle is reused so the
// connection is kept alive between requests, like a real client).
void setup_handle(CURL* c, const RequestPlan& plan, const std::string& body, char* errbuf) {
  const CurlApi& curl = curl_lib();
  const auto timeout_ms = static_cast<long>(std::ceil(util::s_to_ms(plan.opts->timeout_s)));
  curl.easy_setopt(c, CURLOPT_URL, plan.opts->url.c_str());
  curl.easy_setopt(c, CURLOPT_POST, 1L);
  curl.easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  curl.easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl.easy_setopt(c, CURLOPT_HTTPHEADER, plan.headers);
  curl.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl.easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, std::min(timeout_ms, 10000L));
  curl.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM-based timeouts
  curl.easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl.easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
  curl.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl.easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  if (plan.opts->compressed) curl.easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");  // every encoding it decodes
  if (!plan.opts->cacert.empty()) curl.easy_setopt(c, CURLOPT_CAINFO, plan.opts->cacert.c_str());
  if (plan.opts->http2) {
    const bool tls = plan.opts->url.rfind("https:", 0) == 0;
    curl.easy_setopt(c, CURLOPT_HTTP_VERSION,
                     static_cast<long>(tls ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE));
    // Debian 12's libcurl (7.88) fails the second request of an easy handle on a kept HTTP/2
    // connection ("Error in the HTTP2 framing layer", seen against hypercorn): a connection each.
    curl.easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
  }
  // An http_proxy in the environment must not turn a loopback benchmark into remote traffic.
  if (plan.loopback) curl.easy_setopt(c, CURLOPT_NOPROXY, "*");
}

void run_one(CURL* c, const RequestPlan& plan, int index, BenchRequestResult& r) {
  char errbuf[CURL_ERROR_SIZE] = {0};
  setup_handle(c, plan, plan.body(index), errbuf);
  // The plan's headers plus this request's id.
  CurlHeaders headers;
  for (const curl_slist* h = plan.headers; h; h = h->next)
    headers.reset(curl_lib().slist_append(headers.release(), h->data));
  const std::string id_header = "X-Request-Id: " + r.id;
  headers.reset(curl_lib().slist_append(headers.release(), id_header.c_str()));
  if (headers) curl_lib().easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  Transfer t(c, &r);
  curl_lib().easy_setopt(c, CURLOPT_WRITEDATA, &t);

  r.start_mono_ns = monotonic_now_ns();
  CURLcode rc = curl_lib().easy_perform(c);
  // A kept-alive connection the server closed after its last response (llama-server says
  // Keep-Alive and closes after a stream; Debian's libcurl 7.88 may not notice before sending):
  // the request never reached it. Send it once more on a new connection.
  long new_connections = 1;
  curl_lib().easy_getinfo(c, CURLINFO_NUM_CONNECTS, &new_connections);
  if ((rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR || rc == CURLE_GOT_NOTHING) && new_connections == 0 &&
      r.token_mono_ns.empty() && t.error_body.empty()) {
    errbuf[0] = 0;
    curl_lib().easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
    r.start_mono_ns = monotonic_now_ns();
    rc = curl_lib().easy_perform(c);
    curl_lib().easy_setopt(c, CURLOPT_FRESH_CONNECT, 0L);
  }
  r.end_mono_ns = monotonic_now_ns();
  curl_lib().easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.http_status);
  long local_port = 0;
  if (curl_lib().easy_getinfo(c, CURLINFO_LOCAL_PORT, &local_port) == CURLE_OK && local_port > 0 && local_port <= 65535)
    r.local_port = static_cast<uint16_t>(local_port);
  curl_lib().easy_setopt(c, CURLOPT_HTTPHEADER, plan.headers);  // `headers` dies with this frame
  curl_lib().easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);      // errbuf dies with this frame
  if (!r.token_mono_ns.empty()) r.first_token_mono_ns = r.token_mono_ns.front();

  if (rc != CURLE_OK) {
    r.error = errbuf[0] ? fmt::format("{}: {}", curl_lib().easy_strerror(rc), errbuf)
                        : std::string(curl_lib().easy_strerror(rc));
  } else if (r.http_status < 200 || r.http_status >= 300) {
    std::string snippet = t.error_body;
    std::replace(snippet.begin(), snippet.end(), '\n', ' ');
    while (!snippet.empty() && snippet.back() == ' ') snippet.pop_back();
    r.error =
        snippet.empty() ? fmt::format("HTTP {}", r.http_status) : fmt::format("HTTP {}: {}", r.http_status, snippet);
  } else if (r.token_mono_ns.empty() && plan.opts->max_tokens > 0) {
    r.error = "stream ended without any token";
  }
}

std::string progress_line(const BenchRequestResult& r, int done, int total) {
  if (!r.error.empty()) return fmt::format("[{}/{}] {} failed: {}", done, total, r.id, r.error);
  double ttft = r.first_token_mono_ns ? util::ns_to_ms(r.first_token_mono_ns - r.start_mono_ns) : kNaN;
  return fmt::format("[{}/{}] {} HTTP {}, {} tokens, TTFT {:.1f} ms", done, total, r.id, r.http_status,
                     r.token_mono_ns.size(), ttft);
}

void validate(const BenchOptions& o) {
  if (o.requests < 0) throw std::invalid_argument("bench: requests must be >= 0");
  if (o.concurrency < 1) throw std::invalid_argument("bench: concurrency must be >= 1");
  if (o.max_tokens < 0) throw std::invalid_argument("bench: max_tokens must be >= 0");
  if (o.prompt_mix.size() > 1024) throw std::invalid_argument("bench: at most 1024 prompt sizes in a mix");
  if (!(o.timeout_s > 0) || o.timeout_s > 1e7)
    throw std::invalid_argument("bench: timeout must be a positive number of seconds");
  check_url(o.url, o.allow_remote);
}

void global_init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_lib().global_init(CURL_GLOBAL_DEFAULT) != 0) throw std::runtime_error("bench: curl_global_init failed");
  });
}

}  // namespace

BenchResult run_bench(const BenchOptions& opts, std::function<void(const std::string&)> progress) {
  validate(opts);
  global_init_once();
  FdCloser log;  // opened before any load so a bad path fails fast
  if (!opts.tokens_out.empty()) log.fd = open_private(opts.tokens_out);

  const UrlParts url = parse_url(opts.url);
  CurlHeaders headers;
  for (const char* h : {"Content-Type: application/json", "Accept: text/event-stream",
                        "Expect:"})  // no 100-continue round trip inside the TTFT
    headers.reset(curl_lib().slist_append(headers.release(), h));
  const bool chat = ends_with(url.path, "/chat/completions");
  std::vector<std::string> bodies;
  for (size_t bytes : opts.prompt_mix.empty() ? std::vector<size_t>{opts.prompt_bytes} : opts.prompt_mix)
    bodies.push_back(make_body(opts, chat, bytes));
  const RequestPlan plan{&opts, std::move(bodies), is_loopback_host(url.host), headers.get()};

  BenchResult result;
  result.requests.resize(static_cast<size_t>(opts.requests));
  for (int i = 0; i < opts.requests; ++i) result.requests[static_cast<size_t>(i)].id = fmt::format("req-{}", i + 1);

  std::atomic<int> next{0};
  std::mutex progress_mu;
  int done = 0;
  auto worker = [&] {
    CurlEasy curl(curl_lib().easy_init());
    for (int i; (i = next.fetch_add(1)) < opts.requests;) {
      auto& r = result.requests[static_cast<size_t>(i)];
      if (curl) run_one(curl.get(), plan, i, r);
      else r.error = "curl_easy_init failed";
      std::lock_guard lock(progress_mu);
      ++done;
      if (progress) progress(progress_line(r, done, opts.requests));
    }
  };
  std::vector<std::thread> threads;
  const int nthreads = std::min(opts.concurrency, opts.requests);
  for (int t = 0; t < nthreads; ++t) threads.emplace_back(worker);
  for (auto& th : threads) th.join();

  summarize(result);
  if (log.fd >= 0) write_token_log_fd(log.fd, opts.tokens_out, result.requests);
  return result;
}

// ------------------------------------------------------------------------------------ summary

std::string format_bench_summary(const BenchResult& r) {
  auto ms = [](double v) { return std::isnan(v) ? std::string("n/a") : fmt::format("{:.2f}", v); };
  const size_t ok = r.requests.size() - static_cast<size_t>(r.failed);
  std::string out;
  out += fmt::format("{:<18}{:>12}\n", "requests ok", ok);
  out += fmt::format("{:<18}{:>12}\n", "requests failed", r.failed);
  out += fmt::format("{:<18}{:>12}\n", "tokens", r.tokens);
  out += fmt::format("{:<18}{:>12}\n", "TTFT P50 (ms)", ms(r.ttft_p50_ms));
  out += fmt::format("{:<18}{:>12}\n", "TTFT P90 (ms)", ms(r.ttft_p90_ms));
  out += fmt::format("{:<18}{:>12}\n", "TTFT P99 (ms)", ms(r.ttft_p99_ms));
  out += fmt::format("{:<18}{:>12}\n", "TPOT median (ms)", ms(r.tpot_median_ms));
  out += fmt::format("{:<18}{:>12}\n", "TPOT stddev (ms)", ms(r.tpot_stddev_ms));
  out += fmt::format("{:<18}{:>12}\n", "TPOT P99 (ms)", ms(r.tpot_p99_ms));
  out += fmt::format("{:<18}{:>12.2f}\n", "wall time (s)", r.wall_s);
  out += fmt::format("{:<18}{:>12.1f}\n", "tokens/s", r.tokens_per_s);
  // The distinct errors, most frequent first, so one glance says why requests failed.
  std::map<std::string, int> errors;
  for (const auto& q : r.requests)
    if (!q.error.empty()) ++errors[q.error];
  std::vector<std::pair<std::string, int>> sorted(errors.begin(), errors.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (size_t i = 0; i < sorted.size() && i < 5; ++i)
    out += fmt::format("error x{}: {}\n", sorted[i].second, sorted[i].first);
  return out;
}

}  // namespace ld::bench
