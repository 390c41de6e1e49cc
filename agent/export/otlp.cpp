#include "export/otlp.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include <curl/curl.h>
#include <fmt/format.h>

#include "bench/curl_api.hpp"

namespace ld::exporter {
namespace {

using nlohmann::json;

// OTLP JSON: 64-bit integers (fixed64, sfixed64, uint64) as decimal strings.
std::string u64s(uint64_t v) { return std::to_string(v); }

json any_value(const json& v) {
  if (v.is_string()) return {{"stringValue", v.get<std::string>()}};
  if (v.is_boolean()) return {{"boolValue", v.get<bool>()}};
  if (v.is_number_integer()) return {{"intValue", std::to_string(v.get<int64_t>())}};
  if (v.is_number_unsigned()) return {{"intValue", std::to_string(v.get<uint64_t>())}};
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d)) return {{"stringValue", std::to_string(d)}};
    return {{"doubleValue", d}};
  }
  if (v.is_array()) {
    json values = json::array();
    for (const auto& e : v) values.push_back(any_value(e));
    return {{"arrayValue", {{"values", values}}}};
  }
  return {{"stringValue", v.dump()}};
}

json label_attributes(const std::vector<prometheus::ClientMetric::Label>& labels) {
  json out = json::array();
  for (const auto& l : labels) out.push_back({{"key", l.name}, {"value", {{"stringValue", l.value}}}});
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

json otlp_attributes(const Attributes& attributes) {
  json out = json::array();
  for (const auto& [key, value] : attributes) out.push_back({{"key", key}, {"value", any_value(value)}});
  return out;
}

OtelName otel_name(const std::string& prom) {
  if (prom == "gen_ai_server_time_to_first_token_seconds") return {"gen_ai.server.time_to_first_token", "s"};
  if (prom == "gen_ai_server_time_per_output_token_seconds") return {"gen_ai.server.time_per_output_token", "s"};
  if (prom == "latency_doctor_outlier_seconds_total") return {"latency_doctor.outlier.duration", "s"};
  std::string rest = prom;
  if (rest.rfind("latency_doctor_", 0) == 0) rest = rest.substr(15);
  if (ends_with(rest, "_total")) rest.resize(rest.size() - 6);
  std::string unit = "1";
  if (ends_with(rest, "_seconds")) {
    rest.resize(rest.size() - 8);
    unit = "s";
  } else if (ends_with(rest, "_bytes")) {
    rest.resize(rest.size() - 6);
    unit = "By";
  }
  return {"latency_doctor." + rest, unit};
}

json otlp_metrics_request(const std::vector<prometheus::MetricFamily>& families, const Attributes& resource,
                          uint64_t start_unix_ns, uint64_t now_unix_ns) {
  constexpr int kCumulative = 2;  // AGGREGATION_TEMPORALITY_CUMULATIVE
  json metrics = json::array();
  for (const auto& family : families) {
    if (family.metric.empty()) continue;
    const OtelName name = otel_name(family.name);
    json m = {{"name", name.name}, {"description", family.help}, {"unit", name.unit}};
    json points = json::array();
    for (const auto& metric : family.metric) {
      json p = {{"attributes", label_attributes(metric.label)},
                {"startTimeUnixNano", u64s(start_unix_ns)},
                {"timeUnixNano", u64s(now_unix_ns)}};
      switch (family.type) {
        case prometheus::MetricType::Counter: p["asDouble"] = metric.counter.value; break;
        case prometheus::MetricType::Gauge: p["asDouble"] = metric.gauge.value; break;
        case prometheus::MetricType::Histogram: {
          json bounds = json::array();
          json counts = json::array();
          uint64_t below = 0;
          for (const auto& b : metric.histogram.bucket) {
            if (std::isfinite(b.upper_bound)) bounds.push_back(b.upper_bound);
            counts.push_back(u64s(b.cumulative_count - below));
            below = b.cumulative_count;
          }
          p["count"] = u64s(metric.histogram.sample_count);
          p["sum"] = metric.histogram.sample_sum;
          p["explicitBounds"] = bounds;
          p["bucketCounts"] = counts;
          break;
        }
        default: continue;  // the daemon registers no summaries or untyped metrics
      }
      if (family.type == prometheus::MetricType::Gauge) p.erase("startTimeUnixNano");
      points.push_back(std::move(p));
    }
    switch (family.type) {
      case prometheus::MetricType::Counter:
        m["sum"] = {{"dataPoints", points}, {"aggregationTemporality", kCumulative}, {"isMonotonic", true}};
        break;
      case prometheus::MetricType::Gauge: m["gauge"] = {{"dataPoints", points}}; break;
      case prometheus::MetricType::Histogram:
        m["histogram"] = {{"dataPoints", points}, {"aggregationTemporality", kCumulative}};
        break;
      default: continue;
    }
    metrics.push_back(std::move(m));
  }
  return {
      {"resourceMetrics",
       json::array({{{"resource", {{"attributes", otlp_attributes(resource)}}},
                     {"scopeMetrics", json::array({{{"scope", {{"name", "latency-doctor"}, {"version", LD_VERSION}}},
                                                    {"metrics", metrics}}})}}})}};
}

std::string random_hex_id(size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(raw.data() + got, bytes - got, 0);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got < bytes) {  // no entropy source: a clock-seeded fallback (ids need only be unique)
    uint64_t x = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) | 1;
    for (auto& b : raw) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      b = static_cast<unsigned char>(x);
    }
  }
  // An all-zero id is invalid in OTLP.
  bool zero = true;
  for (auto b : raw) zero = zero && b == 0;
  if (zero) raw[0] = 1;
  std::string out;
  for (auto b : raw) out += fmt::format("{:02x}", b);
  return out;
}

json otlp_traces_request(const std::vector<Span>& spans, const Attributes& resource) {
  constexpr int kInternal = 1;  // SPAN_KIND_INTERNAL
  json list = json::array();
  for (const auto& s : spans)
    list.push_back({{"traceId", random_hex_id(16)},
                    {"spanId", random_hex_id(8)},
                    {"name", s.name},
                    {"kind", kInternal},
                    {"startTimeUnixNano", u64s(s.start_unix_ns)},
                    {"endTimeUnixNano", u64s(std::max(s.end_unix_ns, s.start_unix_ns))},
                    {"attributes", otlp_attributes(s.attributes)}});
  return {{"resourceSpans",
           json::array({{{"resource", {{"attributes", otlp_attributes(resource)}}},
                         {"scopeSpans", json::array({{{"scope", {{"name", "latency-doctor"}, {"version", LD_VERSION}}},
                                                      {"spans", list}}})}}})}};
}

// ------------------------------------------------------------------ transport

OtlpClient::Url OtlpClient::parse_url(const std::string& endpoint) {
  Url url;
  std::string rest;
  if (endpoint.rfind("http://", 0) == 0) rest = endpoint.substr(7);
  else if (endpoint.rfind("https://", 0) == 0) {
    rest = endpoint.substr(8);
    url.https = true;
  } else
    throw std::invalid_argument(
        fmt::format("--otlp-endpoint {}: expected http://HOST:PORT or https://HOST:PORT "
                    "(an OTLP/HTTP receiver, e.g. http://127.0.0.1:4318)",
                    endpoint));
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  url.path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!url.path.empty() && url.path.back() == '/') url.path.pop_back();
  std::string port;
  if (!authority.empty() && authority[0] == '[') {
    auto close = authority.find(']');
    if (close == std::string::npos)
      throw std::invalid_argument(fmt::format("--otlp-endpoint {}: unclosed '['", endpoint));
    url.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':')
        throw std::invalid_argument(fmt::format("--otlp-endpoint {}: bad port", endpoint));
      port = authority.substr(close + 2);
    }
  } else {
    auto colon = authority.rfind(':');
    url.host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  if (url.host.empty()) throw std::invalid_argument(fmt::format("--otlp-endpoint {}: no host", endpoint));
  if (authority.find('@') != std::string::npos)
    throw std::invalid_argument(fmt::format("--otlp-endpoint {}: credentials in the URL are not supported", endpoint));
  if (port.empty()) url.port = url.https ? 443 : 80;
  else {
    char* end = nullptr;
    long p = std::strtol(port.c_str(), &end, 10);
    if (*end || p <= 0 || p > 65535)
      throw std::invalid_argument(fmt::format("--otlp-endpoint {}: bad port '{}'", endpoint, port));
    url.port = static_cast<int>(p);
  }
  return url;
}

OtlpClient::OtlpClient(const std::string& endpoint, int timeout_ms)
    : endpoint_(endpoint), url_(parse_url(endpoint)), timeout_ms_(timeout_ms) {}

namespace {

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

bool wait_fd(int fd, short events, std::chrono::steady_clock::time_point until) {
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, static_cast<int>(left));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

std::string post_plain(const OtlpClient::Url& url, const std::string& path, const std::string& body, int timeout_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int err = getaddrinfo(url.host.c_str(), std::to_string(url.port).c_str(), &hints, &found))
    return fmt::format("cannot resolve {}: {}", url.host, gai_strerror(err));
  std::string last_error = "no address";
  int fd = -1;
  for (addrinfo* a = found; a; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    if (errno == EINPROGRESS && wait_fd(fd, POLLOUT, until)) {
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0) break;
      last_error = std::strerror(err);
    } else {
      last_error = errno == EINPROGRESS ? "connect timed out" : std::strerror(errno);
    }
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) return fmt::format("cannot connect to {}:{}: {}", url.host, url.port, last_error);
  Socket sock(fd);
  const bool v6 = url.host.find(':') != std::string::npos;
  std::string request = fmt::format(
      "POST {}{} HTTP/1.1\r\nHost: {}{}{}:{}\r\nUser-Agent: latency-doctor/{}\r\nContent-Type: application/json\r\n"
      "Content-Length: {}\r\nConnection: close\r\n\r\n",
      url.path, path, v6 ? "[" : "", url.host, v6 ? "]" : "", url.port, LD_VERSION, body.size());
  request += body;
  size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_fd(fd, POLLOUT, until)) return "timed out sending";
      continue;
    }
    return fmt::format("sending failed: {}", std::strerror(errno));
  }
  std::string answer;
  char buf[4096];
  while (answer.find("\r\n") == std::string::npos || answer.size() < 12) {
    if (!wait_fd(fd, POLLIN, until)) return "timed out waiting for the answer";
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return fmt::format("reading the answer failed: {}", std::strerror(errno));
    }
    answer.append(buf, static_cast<size_t>(n));
    if (answer.size() > 65536) break;
  }
  // "HTTP/1.1 200 OK"
  if (answer.rfind("HTTP/", 0) != 0 || answer.size() < 12) return "not an HTTP answer";
  int status = std::atoi(answer.c_str() + answer.find(' ') + 1);
  if (status >= 200 && status < 300) return "";
  // Read a little of the body for the reason.
  for (int i = 0; i < 8 && answer.find("\r\n\r\n") == std::string::npos; ++i) {
    if (!wait_fd(fd, POLLIN, until)) break;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  std::string line = answer.substr(0, answer.find("\r\n"));
  return fmt::format("answered {}", line);
}

size_t discard(char*, size_t size, size_t n, void*) { return size * n; }

std::string post_curl(const std::string& url, const std::string& body, int timeout_ms) {
  const auto& curl = bench::curl_lib();  // throws with the fix when libcurl is missing
  static std::once_flag init;
  std::call_once(init, [&] { curl.global_init(CURL_GLOBAL_DEFAULT); });
  CURL* h = curl.easy_init();
  if (!h) return "libcurl could not make a handle";
  curl_slist* headers = curl.slist_append(nullptr, "Content-Type: application/json");
  curl.easy_setopt(h, CURLOPT_URL, url.c_str());
  curl.easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl.easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
  curl.easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl.easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_ms));
  curl.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl.easy_setopt(h, CURLOPT_WRITEFUNCTION, &discard);
  CURLcode rc = curl.easy_perform(h);
  long status = 0;
  curl.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  std::string error = rc != CURLE_OK                    ? curl.easy_strerror(rc)
                      : (status >= 200 && status < 300) ? ""
                                                        : fmt::format("answered HTTP {}", status);
  curl.slist_free_all(headers);
  curl.easy_cleanup(h);
  return error;
}

}  // namespace

std::string OtlpClient::post(const std::string& path, const std::string& json_body) const {
  try {
    if (url_.https)
      return post_curl(endpoint_ + (endpoint_.back() == '/' ? path.substr(1) : path), json_body, timeout_ms_);
    return post_plain(url_, path, json_body, timeout_ms_);
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace ld::exporter
