// ld-sample-server: a tiny HTTP/1.1 "LLM" that streams OpenAI-style SSE completions.
//
// It is the target latency-doctor is tested against, so its behaviour must be predictable:
//  * prefill and per-token "compute" are a fixed amount of CPU WORK (a calibrated busy loop), not
//    sleeps, so CPU contention stretches TTFT/TPOT exactly like it would on a real server;
//  * --wire chooses which real server's socket-write pattern to mimic (syscall, framing, when the
//    response headers go out), because the agent has to understand all of them.
// Every knob lives in Options and in the kOptionSpecs table below (parsing and --help both come
// from that table), so fault knobs can be added in one place.
//
// Only libc + pthreads: the little JSON needed (top-level "max_tokens") is scanned by hand. With
// --gpu-lib the batch engine drives a GPU through a CUDA runtime loaded with dlopen() at run time.

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

// ------------------------------------------------------------------------------------ options

enum class Wire { openai, llamacpp, uvicorn, rust, msg };
enum class HeadersAt { wire_default, request, first_token };

struct Options {
  int port = 0;
  double prefill_ms_per_kb = 0;
  double prefill_base_ms = 0;
  double token_ms = 40;
  long tokens = 30;
  Wire wire = Wire::openai;
  HeadersAt headers_at = HeadersAt::wire_default;
  bool plain = false;
  bool close_after_stream = false;
  bool nagle = false;
  double idle_timeout_s = 60;
  // Fault knobs: each injects one cause of the attribution vocabulary, with ground truth.
  std::string fault;              // "" | kv_alloc | disk_io | lock | batch | cold_start | gpu_slow | host_stall
  long fault_every = 10;          // disk_io/batch: every Nth token of the process; gpu_slow/host_stall: Nth step
  double fault_ms = 300;          // lock: hold time; batch: wait; cold_start: init CPU work
  double fault_period_ms = 1000;  // lock: the metrics thread takes the lock this often
  long fault_mib = 256;           // kv_alloc/cold_start: MiB touched; disk_io: MiB written per fsync
  double fault_min_kb = 2;        // kv_alloc: only request bodies of at least this many KiB
  std::string fault_file = "/tmp/ld-sample-server.log";
  long listen_backlog = 128;
  double accept_delay_ms = 0;
  // A noisy neighbour: a separate process ("noisy-neighbour") whose threads all spin together
  // for --neighbour-burst-ms every --neighbour-period-ms, like a batch job sharing the host.
  long neighbour_threads = 0;
  double neighbour_burst_ms = 500;
  double neighbour_period_ms = 3000;
  // --engine batch: llama-server's threads. One engine thread runs every stream's tokens as
  // batched steps on a pool of --engine-threads workers (a new request's prefill in the same
  // step, stalling every stream); the connection threads wait on a condition variable, a
  // second at a time, for their next token.
  std::string engine;  // "" (each connection computes its own tokens) | batch
  long engine_threads = 2;
  double prefill_chunk_ms = 0;  // batch: prefill at most this much per step (chunked prefill); 0 = all
  // --gpu-lib: each batch step is a GPU step through the CUDA runtime at that path: the host
  // prepares the step (--gpu-cpu-ms of CPU), queues --gpu-kernels kernels of --gpu-kernel-us
  // each and waits for them with cudaStreamSynchronize. Prefill is GPU time in that mode.
  std::string gpu_lib;
  double gpu_cpu_ms = 1;
  long gpu_kernels = 8;
  double gpu_kernel_us = 2000;
  bool help = false;
};

struct OptionSpec {
  const char* name;
  const char* metavar;  // nullptr: a flag without a value
  const char* help;
  std::function<bool(Options&, const char*)> set;  // false: value rejected
};

bool parse_double(const char* s, double lo, double hi, double& out) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) return false;
  out = v;
  return true;
}

bool parse_long(const char* s, long lo, long hi, long& out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

bool parse_wire(const char* s, Wire& out) {
  std::string_view v(s);
  if (v == "openai") out = Wire::openai;
  else if (v == "llamacpp") out = Wire::llamacpp;
  else if (v == "uvicorn") out = Wire::uvicorn;
  else if (v == "rust") out = Wire::rust;
  else if (v == "msg") out = Wire::msg;
  else return false;
  return true;
}

const std::vector<OptionSpec>& option_specs() {
  static const std::vector<OptionSpec> specs = {
      {"--port", "N", "TCP port on 127.0.0.1; 0 = ephemeral (default 0)",
       [](Options& o, const char* v) {
         long p = 0;
         if (!parse_long(v, 0, 65535, p)) return false;
         o.port = static_cast<int>(p);
         return true;
       }},
      {"--prefill-base-ms", "F", "fixed prefill work per request, ms of CPU (default 0)",
       [](Options& o, const char* v) { return parse_double(v, 0, 1e7, o.prefill_base_ms); }},
      {"--prefill-ms-per-kb", "F", "prefill work per KiB of request body, ms of CPU (default 0)",
       [](Options& o, const char* v) { return parse_double(v, 0, 1e7, o.prefill_ms_per_kb); }},
      {"--token-ms", "F", "work per generated token, ms of CPU (default 40)",
       [](Options& o, const char* v) { return parse_double(v, 0, 1e7, o.token_ms); }},
      {"--tokens", "N", "tokens per completion when the body has no max_tokens (default 30)",
       [](Options& o, const char* v) { return parse_long(v, 0, 1000000, o.tokens); }},
      {"--wire", "MODE",
       "openai|llamacpp|uvicorn|rust|msg: which server's socket-write pattern to mimic (default openai; "
       "msg = sendmsg() and recvmsg(), as Python 3.12+ asyncio transports flush queued writes)",
       [](Options& o, const char* v) { return parse_wire(v, o.wire); }},
      {"--headers-at", "WHEN",
       "request|first-token: when response headers are sent (default: first-token for openai, "
       "request for the others)",
       [](Options& o, const char* v) {
         std::string_view s(v);
         if (s == "request") o.headers_at = HeadersAt::request;
         else if (s == "first-token") o.headers_at = HeadersAt::first_token;
         else return false;
         return true;
       }},
      {"--plain", nullptr, "no chunked encoding: Connection: close, raw SSE body, server closes after [DONE]",
       [](Options& o, const char*) { return o.plain = true; }},
      {"--close-after-stream", nullptr, "close the (advertised keep-alive) connection after each stream",
       [](Options& o, const char*) { return o.close_after_stream = true; }},
      {"--nagle", nullptr, "leave Nagle's algorithm on (default: TCP_NODELAY like real servers)",
       [](Options& o, const char*) { return o.nagle = true; }},
      {"--idle-timeout-s", "F", "close keep-alive connections idle this long (default 60)",
       [](Options& o, const char* v) { return parse_double(v, 0.001, 1e6, o.idle_timeout_s); }},
      {"--fault", "NAME",
       "inject a latency fault: kv_alloc (bodies >= --fault-min-kb touch --fault-mib MiB of fresh "
       "memory before prefill), disk_io (every --fault-every tokens append 128 KiB records to "
       "--fault-file, fdatasync after each, for --fault-ms), lock (a metrics thread holds the token lock --fault-ms "
       "every "
       "--fault-period-ms), batch (every --fault-every tokens wait --fault-ms for a batch that never "
       "fills), cold_start (the first request initialises: --fault-mib MiB + --fault-ms CPU), "
       "gpu_slow (--gpu-lib: every --fault-every steps queue --fault-ms more GPU work, a GPU-bound "
       "slow step), host_stall (--gpu-lib: every --fault-every steps the engine thread burns "
       "--fault-ms of CPU before launching, the GPU idle meanwhile: a slow sampler or detokenizer)",
       [](Options& o, const char* v) {
         std::string_view f(v);
         if (f != "kv_alloc" && f != "disk_io" && f != "lock" && f != "batch" && f != "cold_start" && f != "gpu_slow" &&
             f != "host_stall")
           return false;
         o.fault = v;
         return true;
       }},
      {"--fault-every", "N",
       "tokens between two disk_io/batch faults, engine steps between two gpu_slow/host_stall faults "
       "(default 10)",
       [](Options& o, const char* v) { return parse_long(v, 1, 1000000, o.fault_every); }},
      {"--fault-ms", "F",
       "lock hold / batch wait / disk_io logging time / cold-start CPU work / gpu_slow extra GPU "
       "time / host_stall CPU work, ms (default 300)",
       [](Options& o, const char* v) { return parse_double(v, 0, 1e7, o.fault_ms); }},
      {"--fault-period-ms", "F", "lock: how often the metrics thread takes the lock (default 1000)",
       [](Options& o, const char* v) { return parse_double(v, 1, 1e7, o.fault_period_ms); }},
      {"--fault-mib", "N", "kv_alloc/cold_start memory, disk_io bytes per fsync, MiB (default 256)",
       [](Options& o, const char* v) { return parse_long(v, 1, 65536, o.fault_mib); }},
      {"--fault-min-kb", "F", "kv_alloc: smallest request body that allocates, KiB (default 2)",
       [](Options& o, const char* v) { return parse_double(v, 0, 1e7, o.fault_min_kb); }},
      {"--fault-file", "PATH", "disk_io: the log file written and fsynced",
       [](Options& o, const char* v) {
         o.fault_file = v;
         return !o.fault_file.empty();
       }},
      {"--listen-backlog", "N", "listen(2) backlog (default 128)",
       [](Options& o, const char* v) { return parse_long(v, 0, 65535, o.listen_backlog); }},
      {"--accept-delay-ms", "F", "sleep after each accept, ms: a slow accept loop (default 0)",
       [](Options& o, const char* v) { return parse_double(v, 0, 1e6, o.accept_delay_ms); }},
      {"--neighbour-threads", "N",
       "start a noisy neighbour: a separate process (comm noisy-neighbour) with N threads that "
       "spin together in bursts, at normal priority (default 0: none)",
       [](Options& o, const char* v) { return parse_long(v, 0, 256, o.neighbour_threads); }},
      {"--neighbour-burst-ms", "F", "noisy neighbour: length of each burst, ms (default 500)",
       [](Options& o, const char* v) { return parse_double(v, 1, 1e7, o.neighbour_burst_ms); }},
      {"--neighbour-period-ms", "F", "noisy neighbour: one burst every this many ms (default 3000)",
       [](Options& o, const char* v) { return parse_double(v, 1, 1e7, o.neighbour_period_ms); }},
      {"--engine", "MODE",
       "batch: one engine thread computes every stream's tokens in batched steps on --engine-threads "
       "workers, new prefills in the same step; connection threads wait for their tokens on a "
       "condition variable in a 1 s timed loop, as llama-server's HTTP threads do (default: each "
       "connection thread computes its own tokens)",
       [](Options& o, const char* v) {
         o.engine = v;
         return o.engine == "batch";
       }},
      {"--engine-threads", "N", "batch: worker threads a step's work is split over (default 2)",
       [](Options& o, const char* v) { return parse_long(v, 1, 64, o.engine_threads); }},
      {"--prefill-chunk-ms", "F",
       "batch: prefill at most this many ms of work per step, so running streams keep their pace "
       "(chunked prefill; default 0: a whole prefill in one step)",
       [](Options& o, const char* v) { return parse_double(v, 0, 1e7, o.prefill_chunk_ms); }},
      {"--gpu-lib", "PATH",
       "batch: run each step on a GPU through the CUDA runtime library at PATH (libcudart.so.12, "
       "dlopen()ed as PyTorch and ggml load it): --gpu-cpu-ms of host CPU preparing the step, the "
       "GPU idle meanwhile, then --gpu-kernels cudaLaunchKernel calls back to back, then "
       "cudaStreamSynchronize; a step takes gpu-cpu-ms + kernels * kernel-us. Prefill is GPU time "
       "(1 ms of --prefill-* = 1 ms more of the step's kernels); --token-ms and --engine-threads "
       "are not used (default: none, steps are CPU work)",
       [](Options& o, const char* v) {
         o.gpu_lib = v;
         return !o.gpu_lib.empty();
       }},
      {"--gpu-cpu-ms", "F", "gpu: host CPU per step before its launches, ms (default 1)",
       [](Options& o, const char* v) { return parse_double(v, 0, 1e7, o.gpu_cpu_ms); }},
      {"--gpu-kernels", "N", "gpu: kernel launches per step (default 8)",
       [](Options& o, const char* v) { return parse_long(v, 1, 100000, o.gpu_kernels); }},
      {"--gpu-kernel-us", "F", "gpu: GPU time of each kernel, microseconds (default 2000)",
       [](Options& o, const char* v) { return parse_double(v, 1, 1e7, o.gpu_kernel_us); }},
      {"--help", nullptr, "show this help", [](Options& o, const char*) { return o.help = true; }},
  };
  return specs;
}

void print_help(FILE* out) {
  std::fprintf(out,
               "usage: ld-sample-server [options]\n"
               "HTTP/1.1 SSE completion server on 127.0.0.1 (POST /v1/completions,\n"
               "POST /v1/chat/completions, GET /health). Prefill (base + per_kb * body KiB) and\n"
               "every token (--token-ms) are fixed CPU work calibrated at startup, so the first\n"
               "token costs prefill + one token. \"max_tokens\" in the JSON body overrides "
               "--tokens.\n\noptions:\n");
  for (const auto& s : option_specs()) {
    std::string lhs = std::string(s.name) + (s.metavar ? std::string(" ") + s.metavar : "");
    std::fprintf(out, "  %-24s %s\n", lhs.c_str(), s.help);
  }
}

// Options that only mean something together: a GPU without the batch engine has no steps to run.
std::optional<std::string> check_combination(const Options& o) {
  if (!o.gpu_lib.empty() && o.engine != "batch") return "--gpu-lib needs --engine batch";
  if ((o.fault == "gpu_slow" || o.fault == "host_stall") && o.gpu_lib.empty())
    return "--fault " + o.fault + " needs --gpu-lib";
  return std::nullopt;
}

// Returns an error message, or nullopt on success. Accepts "--name value" and "--name=value".
std::optional<std::string> parse_args(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::optional<std::string> inline_value;
    if (auto eq = arg.find('='); eq != std::string::npos) {
      inline_value = arg.substr(eq + 1);
      arg.resize(eq);
    }
    const auto& specs = option_specs();
    auto it = std::find_if(specs.begin(), specs.end(), [&](const OptionSpec& s) { return arg == s.name; });
    if (it == specs.end()) return "unknown option " + arg + " (see --help)";
    std::string value;
    if (it->metavar) {
      if (inline_value) value = *inline_value;
      else if (i + 1 < argc) value = argv[++i];
      else return arg + " needs a value " + it->metavar;
    } else if (inline_value) {
      return arg + " takes no value";
    }
    if (!it->set(o, value.c_str())) return "bad value for " + arg + ": '" + value + "'";
  }
  return check_combination(o);
}

HeadersAt effective_headers_at(const Options& o) {
  if (o.headers_at != HeadersAt::wire_default) return o.headers_at;
  // vLLM's OpenAI server (and the real API) answer once the first token exists; llama.cpp,
  // uvicorn/Starlette and hyper send the headers as soon as the handler starts streaming.
  return o.wire == Wire::openai ? HeadersAt::first_token : HeadersAt::request;
}

// ------------------------------------------------------------------------------------ globals

std::atomic<bool> g_stop{false};
std::atomic<uint64_t> g_completion_id{0};

extern "C" void on_signal(int) { g_stop.store(true); }

uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// ------------------------------------------------------------------------------------ CPU work

// One unit of work: a dependent multiply-add through a volatile, so the compiler can neither
// vectorise nor delete it and its duration depends only on getting CPU time.
void spin(uint64_t iterations) {
  volatile uint64_t acc = 1;
  for (uint64_t i = 0; i < iterations; ++i) acc = acc * 6364136223846793005ull + i;
}

uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Iterations per millisecond of CPU, best (max) of several runs of `run_ms` each: the idle-machine
// rate. Runs are timed with this thread's CPU clock, not the wall clock, so a machine that is
// busy at startup (other builds, other tests) cannot deflate the rate through preemption; the
// max still filters out cache and frequency warm-up.
double calibrate_iterations_per_ms(int runs, double run_ms) {
  constexpr uint64_t kBlock = 100000;  // ~0.1 ms: keeps the clock syscall's share negligible
  spin(kBlock);                        // warm up caches and clock frequency
  double best = 0;
  for (int r = 0; r < runs; ++r) {
    uint64_t iterations = 0;
    const uint64_t t0 = thread_cpu_ns();
    uint64_t elapsed = 0;
    do {
      spin(kBlock);
      iterations += kBlock;
      elapsed = thread_cpu_ns() - t0;
    } while (elapsed < static_cast<uint64_t>(run_ms * 1e6));
    best = std::max(best, static_cast<double>(iterations) / (static_cast<double>(elapsed) / 1e6));
  }
  return best;
}

double g_iterations_per_ms = 0;

// `ms` milliseconds of idle-machine CPU work; under contention it takes longer, which is the
// point. Runs in ~1 ms slices so shutdown is not held up by a long prefill.
void burn_ms(double ms) {
  if (ms <= 0) return;
  auto remaining = static_cast<uint64_t>(std::llround(ms * g_iterations_per_ms));
  const auto slice = std::max<uint64_t>(1, static_cast<uint64_t>(g_iterations_per_ms));
  while (remaining > 0 && !g_stop.load(std::memory_order_relaxed)) {
    uint64_t n = std::min(remaining, slice);
    spin(n);
    remaining -= n;
  }
}

// ------------------------------------------------------------------------------------ JSON scan

// Just enough JSON to validate a request body and pull out a top-level "max_tokens".
class JsonScanner {
 public:
  explicit JsonScanner(std::string_view s) : s_(s) {}

  // Body must be one JSON object. On success `max_tokens` is set if present (and not null).
  bool scan_request(std::optional<long>& max_tokens, std::string& error) {
    skip_ws();
    if (!eat('{')) return fail(error, "body is not a JSON object");
    skip_ws();
    if (!eat('}')) {
      for (;;) {
        std::string key;
        skip_ws();
        if (!parse_string(&key)) return fail(error, "bad object key");
        skip_ws();
        if (!eat(':')) return fail(error, "expected ':'");
        skip_ws();
        if (key == "max_tokens") {
          if (!parse_max_tokens(max_tokens)) return fail(error, "bad max_tokens");
        } else if (!skip_value(0)) {
          return fail(error, "bad JSON value");
        }
        skip_ws();
        if (eat('}')) break;
        if (!eat(',')) return fail(error, "expected ',' or '}'");
      }
    }
    skip_ws();
    if (i_ != s_.size()) return fail(error, "trailing data after JSON object");
    return true;
  }

 private:
  static constexpr int kMaxDepth = 64;  // a deeply nested body must not blow the stack

  static bool fail(std::string& error, const char* what) {
    error = what;
    return false;
  }
  bool eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat_literal(std::string_view lit) {
    if (s_.substr(i_, lit.size()) != lit) return false;
    i_ += lit.size();
    return true;
  }
  static bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

  // Decodes simple escapes into `out` (if given); \uXXXX is validated and kept verbatim.
  bool parse_string(std::string* out) {
    if (!eat('"')) return false;
    while (i_ < s_.size()) {
      char c = s_[i_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        if (out) out->push_back(c);
        continue;
      }
      if (i_ >= s_.size()) return false;
      char e = s_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          if (out) out->push_back(e);
          break;
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't':
          if (out) out->push_back('?');
          break;
        case 'u':
          if (i_ + 4 > s_.size()) return false;
          for (int k = 0; k < 4; ++k)
            if (!is_hex(s_[i_ + k])) return false;
          if (out) out->append("\\u").append(s_.substr(i_, 4));
          i_ += 4;
          break;
        default: return false;
      }
    }
    return false;
  }

  // Returns the number's text; empty on a malformed number.
  std::string_view parse_number() {
    const size_t start = i_;
    auto digits = [&] {
      size_t d = i_;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
      return i_ - d;
    };
    eat('-');
    if (eat('0')) {
      // no leading zeros
    } else if (digits() == 0) {
      return {};
    }
    if (eat('.') && digits() == 0) return {};
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (!eat('+')) eat('-');
      if (digits() == 0) return {};
    }
    return s_.substr(start, i_ - start);
  }

  bool parse_max_tokens(std::optional<long>& out) {
    if (eat_literal("null")) return true;
    std::string_view num = parse_number();
    if (num.empty() || num.size() > 9) return false;
    if (num.find_first_not_of("0123456789") != std::string_view::npos) return false;
    out = std::strtol(std::string(num).c_str(), nullptr, 10);
    return *out <= 1000000;
  }

  bool skip_value(int depth) {
    if (depth > kMaxDepth || i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '"') return parse_string(nullptr);
    if (c == '{' || c == '[') return skip_container(depth);
    if (c == 't') return eat_literal("true");
    if (c == 'f') return eat_literal("false");
    if (c == 'n') return eat_literal("null");
    return !parse_number().empty();
  }

  bool skip_container(int depth) {
    const char close = s_[i_] == '{' ? '}' : ']';
    const bool object = close == '}';
    ++i_;
    skip_ws();
    if (eat(close)) return true;
    for (;;) {
      skip_ws();
      if (object) {
        if (!parse_string(nullptr)) return false;
        skip_ws();
        if (!eat(':')) return false;
        skip_ws();
      }
      if (!skip_value(depth + 1)) return false;
      skip_ws();
      if (eat(close)) return true;
      if (!eat(',')) return false;
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};

// ------------------------------------------------------------------------------------ socket I/O

// The wire modes differ in which syscall carries the bytes and how a chunk is split up.
class WireWriter {
 public:
  WireWriter(int fd, Wire wire) : fd_(fd), wire_(wire) {}

  // Writes `pieces` the way the mimicked server would: openai = one send(), llamacpp = one
  // sendto(), uvicorn = one write() per piece, rust = one writev() over all pieces, msg = one
  // sendmsg() over all pieces.
  bool emit(std::initializer_list<std::string_view> pieces) {
    switch (wire_) {
      case Wire::openai: return send_all(join(pieces), false);
      case Wire::llamacpp: return send_all(join(pieces), true);
      case Wire::uvicorn:
        for (auto p : pieces)
          if (!write_all(p)) return false;
        return true;
      case Wire::rust: return gather_write_all(pieces, false);
      case Wire::msg: return gather_write_all(pieces, true);
    }
    return false;
  }

 private:
  static std::string join(std::initializer_list<std::string_view> pieces) {
    std::string out;
    for (auto p : pieces) out.append(p);
    return out;
  }

  bool send_all(std::string_view data, bool use_sendto) {
    while (!data.empty()) {
      ssize_t n = use_sendto ? ::sendto(fd_, data.data(), data.size(), MSG_NOSIGNAL, nullptr, 0)
                             : ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  bool write_all(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  bool gather_write_all(std::initializer_list<std::string_view> pieces, bool use_sendmsg) {
    std::vector<iovec> iov;
    for (auto p : pieces)
      if (!p.empty()) iov.push_back({const_cast<char*>(p.data()), p.size()});
    size_t first = 0;
    while (first < iov.size()) {
      ssize_t n;
      if (use_sendmsg) {
        msghdr msg{};
        msg.msg_iov = iov.data() + first;
        msg.msg_iovlen = iov.size() - first;
        n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
      } else {
        n = ::writev(fd_, iov.data() + first, static_cast<int>(iov.size() - first));
      }
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      // Advance past what a partial writev took.
      auto left = static_cast<size_t>(n);
      while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
      if (first < iov.size()) {
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
        iov[first].iov_len -= left;
      }
    }
    return true;
  }

  int fd_;
  Wire wire_;
};

// Error replies always use plain send(): they are not part of any mimicked wire pattern.
void send_simple(int fd, int status, const char* reason, std::string_view body, bool close) {
  std::string r = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                  "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
                  (close ? "Connection: close\r\n" : "") + "\r\n";
  r.append(body);
  WireWriter(fd, Wire::openai).emit({r});
}

// Closes without losing the last response: a close() with unread input sends RST, which can
// destroy our 400 reply before the client reads it. So: FIN, drain briefly, close.
void lingering_shutdown(int fd) {
  ::shutdown(fd, SHUT_WR);
  char buf[4096];
  const uint64_t deadline = mono_ns() + 200'000'000ull;
  size_t drained = 0;
  while (mono_ns() < deadline && drained < (1u << 20)) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) break;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
}

// ------------------------------------------------------------------------------------ HTTP

struct Request {
  std::string method, path, version;
  std::string body;
  bool keep_alive = true;
};

enum class ReadStatus { ok, closed, bad, too_large };

constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr size_t kMaxBodyBytes = 64 * 1024 * 1024;

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Appends whatever recv() (or recvmsg(), for the msg wire) returns; false on EOF, error, idle
// timeout or shutdown.
bool recv_more(int fd, std::string& buf, Wire wire) {
  char tmp[16384];
  for (;;) {
    ssize_t n;
    if (wire == Wire::msg) {
      iovec iov{tmp, sizeof tmp};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      n = ::recvmsg(fd, &msg, 0);
    } else {
      n = ::recv(fd, tmp, sizeof tmp, 0);
    }
    if (n < 0 && errno == EINTR && !g_stop.load()) continue;
    if (n <= 0) return false;
    buf.append(tmp, static_cast<size_t>(n));
    return true;
  }
}

struct HeaderInfo {
  std::optional<size_t> content_length;
  bool chunked_body = false;
  bool expect_continue = false;
  std::string connection;
};

// Parses the request line and headers (without the final CRLFCRLF). False = malformed.
bool parse_head(std::string_view head, Request& req, HeaderInfo& info, std::string& error) {
  size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    error = "malformed request line";
    return false;
  }
  req.method = line.substr(0, sp1);
  req.path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  req.version = line.substr(sp2 + 1);
  if (req.method.empty() || req.path.empty() || req.path[0] != '/' ||
      (req.version != "HTTP/1.1" && req.version != "HTTP/1.0")) {
    error = "malformed request line";
    return false;
  }
  while (eol != std::string_view::npos) {
    size_t start = eol + 2;
    eol = head.find("\r\n", start);
    std::string_view h = head.substr(start, eol == std::string_view::npos ? eol : eol - start);
    size_t colon = h.find(':');
    if (colon == 0 || colon == std::string_view::npos || h.front() == ' ' || h.front() == '\t') {
      error = "malformed header line";
      return false;
    }
    std::string name = lower(h.substr(0, colon));
    std::string_view value = trim(h.substr(colon + 1));
    if (name == "content-length") {
      if (value.empty() || value.size() > 12 || value.find_first_not_of("0123456789") != std::string_view::npos) {
        error = "bad Content-Length";
        return false;
      }
      size_t len = std::stoull(std::string(value));
      if (info.content_length && *info.content_length != len) {
        error = "conflicting Content-Length";
        return false;
      }
      info.content_length = len;
    } else if (name == "transfer-encoding") {
      info.chunked_body = true;
    } else if (name == "expect") {
      info.expect_continue = lower(value) == "100-continue";
    } else if (name == "connection") {
      info.connection = lower(value);
    }
  }
  if (req.version == "HTTP/1.1") req.keep_alive = info.connection.find("close") == std::string::npos;
  else req.keep_alive = info.connection.find("keep-alive") != std::string::npos;
  return true;
}

// Reads one request from `pending` + the socket; leftover bytes (pipelining) stay in `pending`.
ReadStatus read_request(int fd, std::string& pending, Request& req, std::string& error, Wire wire) {
  size_t head_end;
  while ((head_end = pending.find("\r\n\r\n")) == std::string::npos) {
    if (pending.size() > kMaxHeaderBytes) {
      error = "request head too large";
      return ReadStatus::bad;
    }
    if (!recv_more(fd, pending, wire)) {
      if (pending.empty()) return ReadStatus::closed;
      error = "incomplete request";
      return ReadStatus::bad;
    }
  }
  HeaderInfo info;
  if (!parse_head(std::string_view(pending).substr(0, head_end), req, info, error)) return ReadStatus::bad;
  if (info.chunked_body) {
    error = "chunked request bodies are not supported; send Content-Length";
    return ReadStatus::bad;
  }
  const size_t body_len = info.content_length.value_or(0);
  if (body_len > kMaxBodyBytes) {
    error = "request body too large";
    return ReadStatus::too_large;
  }
  const size_t total = head_end + 4 + body_len;
  if (info.expect_continue && pending.size() < total)  // else curl stalls a second for the body
    WireWriter(fd, Wire::openai).emit({"HTTP/1.1 100 Continue\r\n\r\n"});
  while (pending.size() < total) {
    if (!recv_more(fd, pending, wire)) {
      error = "incomplete request body";
      return ReadStatus::bad;
    }
  }
  req.body = pending.substr(head_end + 4, body_len);
  pending.erase(0, total);
  return ReadStatus::ok;
}

// ------------------------------------------------------------------------------------ streaming

std::string token_event(const std::string& id, bool last) {
  return "data: {\"id\":\"" + id +
         "\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"tok\","
         "\"finish_reason\":" +
         (last ? "\"length\"" : "null") + "}]}\n\n";
}

// llama.cpp ends with a usage-only event (OpenAI's stream_options.include_usage shape).
std::string usage_event(const std::string& id, size_t body_bytes, long completion_tokens) {
  const long prompt_tokens = static_cast<long>((body_bytes + 3) / 4);
  return "data: {\"id\":\"" + id + "\",\"object\":\"text_completion\",\"choices\":[],\"usage\":{" +
         "\"prompt_tokens\":" + std::to_string(prompt_tokens) +
         ",\"completion_tokens\":" + std::to_string(completion_tokens) +
         ",\"total_tokens\":" + std::to_string(prompt_tokens + completion_tokens) + "}}\n\n";
}

std::string response_head(const Options& o) {
  std::string h = "HTTP/1.1 200 OK\r\n";
  switch (o.wire) {
    case Wire::openai: h += "Server: ld-sample-server\r\n"; break;
    case Wire::llamacpp: h += "Server: llama.cpp\r\n"; break;
    case Wire::uvicorn: h += "server: uvicorn\r\n"; break;
    case Wire::rust:
    case Wire::msg: break;
  }
  h += "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n";
  h += o.plain ? "Connection: close\r\n" : "Transfer-Encoding: chunked\r\n";
  return h + "\r\n";
}

class SseStream {
 public:
  SseStream(int fd, const Options& o) : o_(o), w_(fd, o.wire) {}

  bool headers() {
    sent_headers_ = true;
    return w_.emit({response_head(o_)});
  }
  bool headers_sent() const { return sent_headers_; }

  // One SSE event: raw with --plain, else one HTTP chunk [size line, event, CRLF].
  bool event(const std::string& ev) {
    if (o_.plain) return w_.emit({ev});
    char size_line[32];
    std::snprintf(size_line, sizeof size_line, "%zx\r\n", ev.size());
    return w_.emit({size_line, ev, "\r\n"});
  }

  bool finish() { return o_.plain || w_.emit({"0\r\n\r\n"}); }

 private:
  const Options& o_;
  WireWriter w_;
  bool sent_headers_ = false;
};

// ------------------------------------------------------------------------------------ faults

std::mutex g_token_lock;  // taken by every token (counters), and by the metrics thread
std::atomic<uint64_t> g_tokens_sent{0};
std::atomic<bool> g_initialised{false};
std::mutex g_init_mu;

// Fresh anonymous memory touched page by page: the page faults and the kernel's page zeroing
// are the cost, as when a KV cache is allocated at request time.
void touch_fresh_memory(size_t bytes, bool keep) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return;
  auto* bytes_p = static_cast<volatile char*>(p);
  for (size_t off = 0; off < bytes; off += 4096) bytes_p[off] = 1;
  if (!keep) ::munmap(p, bytes);
}

// A logger that makes every record durable: 128 KiB appended, then fdatasync, for --fault-ms of
// wall time (at least one record). Each flush waits for the device, which is what makes a
// synchronous logger hurt; timing it keeps the fault's size the same on fast and slow disks.
void write_and_fsync(const Options& o) {
  static std::mutex mu;
  std::lock_guard<std::mutex> g(mu);
  int fd = ::open(o.fault_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return;
  static const std::string record(128 << 10, 'x');
  const uint64_t until = mono_ns() + static_cast<uint64_t>(o.fault_ms * 1e6);
  do {
    if (::write(fd, record.data(), record.size()) < 0) break;
    ::fdatasync(fd);
  } while (mono_ns() < until);
  ::close(fd);
}

void wait_for_batch(double ms) {
  static std::mutex mu;
  static std::condition_variable never_filled;
  std::unique_lock<std::mutex> lock(mu);
  never_filled.wait_for(lock, std::chrono::microseconds(static_cast<long>(ms * 1000)));
}

void cold_start_once(const Options& o) {
  if (g_initialised.load()) return;
  std::lock_guard<std::mutex> g(g_init_mu);
  if (g_initialised.load()) return;
  touch_fresh_memory(static_cast<size_t>(o.fault_mib) << 20, true);  // "weights", kept
  burn_ms(o.fault_ms);
  g_initialised.store(true);
}

void metrics_thread(const Options& o) {
  while (!g_stop.load()) {
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long>(o.fault_period_ms * 1000)));
    std::lock_guard<std::mutex> g(g_token_lock);
    burn_ms(o.fault_ms);  // "collecting metrics" while holding the server's lock
  }
}

// Per token: the bookkeeping every token does, and the per-token faults.
void after_token_work(const Options& o) {
  uint64_t n;
  {
    std::lock_guard<std::mutex> g(g_token_lock);
    n = g_tokens_sent.fetch_add(1) + 1;
  }
  if (n % static_cast<uint64_t>(o.fault_every) != 0) return;
  if (o.fault == "disk_io") write_and_fsync(o);
  else if (o.fault == "batch") wait_for_batch(o.fault_ms);
}

// ------------------------------------------------------------------------------------ GPU

// The CUDA runtime API's types and the two calls a step makes, as cuda_runtime_api.h declares
// them: the library is called through these, so they must match its ABI.
struct dim3 {
  unsigned int x = 1, y = 1, z = 1;
};
using cudaStream_t = void*;
using cudaLaunchKernel_t = int (*)(const void* func, dim3 grid, dim3 block, void** args, size_t shmem,
                                   cudaStream_t stream);
using cudaStreamSynchronize_t = int (*)(cudaStream_t stream);

struct CudaRuntime {
  cudaLaunchKernel_t launch_kernel = nullptr;
  cudaStreamSynchronize_t stream_synchronize = nullptr;
};
CudaRuntime g_cuda;

// Loaded with dlopen(), never linked: real servers get CUDA at run time (PyTorch's wheels,
// ggml's backend loader), so the library appears in the process after it started, which is
// what the agent's uprobes have to cope with. Returns an error message, or nullopt.
std::optional<std::string> load_cuda_runtime(const std::string& path) {
  void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept open for the process's life
  if (!lib) return std::string("cannot load ") + path + ": " + ::dlerror();
  g_cuda.launch_kernel = reinterpret_cast<cudaLaunchKernel_t>(::dlsym(lib, "cudaLaunchKernel"));
  g_cuda.stream_synchronize = reinterpret_cast<cudaStreamSynchronize_t>(::dlsym(lib, "cudaStreamSynchronize"));
  if (!g_cuda.launch_kernel || !g_cuda.stream_synchronize)
    return path + " lacks cudaLaunchKernel or cudaStreamSynchronize";
  return std::nullopt;
}

// The kernel's handle: a CUDA runtime takes a host-side stub's address; the stand-in library
// only needs a stable pointer.
void decode_kernel_stub() {}

// A failed call is reported once (the first), not per token.
void report_cuda_error(const char* call, int err) {
  static std::atomic<bool> reported{false};
  if (err != 0 && !reported.exchange(true)) std::fprintf(stderr, "ld-sample-server: %s returned %d\n", call, err);
}

// Queues `kernels` kernels that run `total_us` microseconds of GPU time in all (the stand-in
// runs a kernel gridDim.x microseconds), split evenly, the remainder on the first ones so the sum
// is exact. Back to back on the default stream: each launch only queues work.
void launch_kernels(long kernels, uint64_t total_us) {
  const auto n = static_cast<uint64_t>(kernels);
  for (uint64_t k = 0; k < n; ++k) {
    dim3 grid;
    const uint64_t us = total_us / n + (k < total_us % n ? 1 : 0);
    grid.x = static_cast<unsigned int>(std::clamp<uint64_t>(us, 1, UINT32_MAX));  // gridDim.x is 32 bits
    const dim3 block;
    void* args[] = {nullptr};
    report_cuda_error("cudaLaunchKernel", g_cuda.launch_kernel(reinterpret_cast<const void*>(&decode_kernel_stub), grid,
                                                               block, args, 0, nullptr));
  }
}

// One GPU step of the batch engine, llama.cpp's shape: the host prepares the batch and builds
// the graph on the CPU while the GPU idles, then launches the kernels and waits for them. So a
// step takes CPU + GPU time, the two never overlapping, which keeps each one's share plain.
// `extra_gpu_ms` (prefill, a gpu_slow fault) lengthens the kernels: a bigger batch makes every
// layer slower, not the model deeper.
void gpu_step(const Options& o, double extra_gpu_ms) {
  burn_ms(o.gpu_cpu_ms);
  const double gpu_us = static_cast<double>(o.gpu_kernels) * o.gpu_kernel_us + extra_gpu_ms * 1000;
  launch_kernels(o.gpu_kernels, static_cast<uint64_t>(std::llround(gpu_us)));
  report_cuda_error("cudaStreamSynchronize", g_cuda.stream_synchronize(nullptr));
}

// ------------------------------------------------------------------------------------ batch engine

// One stream of the batch engine: the engine fills `ready`, the connection thread takes from it.
struct Slot {
  long tokens = 0;          // to make
  double prefill_left = 0;  // ms of prefill work not done yet
  std::mutex mu;
  std::condition_variable cv;
  std::deque<long> ready;  // token indexes made and not yet sent
};

// A step's work split over the workers; the engine thread waits for all of them (llama.cpp's
// ggml thread pool inside one llama_decode).
class WorkerPool {
 public:
  explicit WorkerPool(long threads) {
    for (long i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  // `ms` of CPU work in all, in equal parts.
  void run(double ms) {
    std::unique_lock l(mu_);
    share_ms_ = ms / static_cast<double>(workers_.size());
    pending_ = workers_.size();
    ++generation_;
    cv_.notify_all();
    done_cv_.wait(l, [this] { return pending_ == 0; });
  }

 private:
  void work() {
    uint64_t seen = 0;
    while (true) {
      double ms;
      {
        std::unique_lock l(mu_);
        cv_.wait(l, [&] { return generation_ != seen; });
        seen = generation_;
        ms = share_ms_;
      }
      burn_ms(ms);
      std::lock_guard l(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  uint64_t generation_ = 0;
  size_t pending_ = 0;
  double share_ms_ = 0;
  std::vector<std::thread> workers_;
};

class BatchEngine {
 public:
  // GPU steps use no workers: no idle pool threads beside the engine thread.
  explicit BatchEngine(const Options& o) : o_(o), pool_(o.gpu_lib.empty() ? o.engine_threads : 0) {
    std::thread([this] { loop(); }).detach();
  }
  void submit(std::shared_ptr<Slot> slot) {
    std::lock_guard l(mu_);
    slots_.push_back(std::move(slot));
    cv_.notify_one();
  }

 private:
  // One step: the prefills still due (a chunk each with --prefill-chunk-ms), then one token for
  // every stream whose prefill is done, computed together.
  void loop() {
    ::prctl(PR_SET_NAME, "engine-loop", 0, 0, 0);
    while (!g_stop.load()) {
      std::vector<std::shared_ptr<Slot>> batch;
      {
        std::unique_lock l(mu_);
        cv_.wait_for(l, std::chrono::milliseconds(200), [this] { return !slots_.empty(); });
        batch = slots_;
      }
      if (batch.empty()) continue;
      double work = 0;
      bool decoding = false;
      for (auto& s : batch) {
        if (s->prefill_left > 0) {
          const double chunk =
              o_.prefill_chunk_ms > 0 ? std::min(o_.prefill_chunk_ms, s->prefill_left) : s->prefill_left;
          s->prefill_left -= chunk;
          work += chunk;
        } else {
          decoding = true;
        }
      }
      if (!o_.gpu_lib.empty()) {
        run_gpu_step(work);
      } else {
        if (decoding) work += o_.token_ms;
        pool_.run(work);
      }
      for (auto& s : batch) {
        if (s->prefill_left > 0) continue;
        if (!o_.fault.empty()) after_token_work(o_);
        std::lock_guard l(s->mu);
        s->ready.push_back(s->tokens--);
        s->cv.notify_one();
      }
      std::lock_guard l(mu_);
      std::erase_if(slots_, [](const auto& s) { return s->tokens <= 0; });
    }
  }
  // `prefill_ms` of prefill work is GPU time here. The GPU faults count steps, not tokens: a
  // step is what the GPU runs, whatever the number of streams in it.
  void run_gpu_step(double prefill_ms) {
    const bool fault_step = ++gpu_steps_ % static_cast<uint64_t>(o_.fault_every) == 0;
    if (fault_step && o_.fault == "host_stall") burn_ms(o_.fault_ms);  // before any launch: the GPU idles
    const double slow_ms = fault_step && o_.fault == "gpu_slow" ? o_.fault_ms : 0;
    gpu_step(o_, prefill_ms + slow_ms);
  }
  const Options& o_;
  WorkerPool pool_;
  uint64_t gpu_steps_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Slot>> slots_;
};

BatchEngine& batch_engine(const Options& o) {
  static auto* engine = new BatchEngine(o);  // leaked on purpose: detached threads use it
  return *engine;
}

// The connection thread's side: waits for each token the way llama-server's HTTP threads do,
// on a condition variable in a 1 s timed loop.
bool stream_batched(SseStream& s, const std::string& id, long n, double prefill_ms, const Options& o) {
  auto slot = std::make_shared<Slot>();
  slot->tokens = n;
  slot->prefill_left = prefill_ms;
  batch_engine(o).submit(slot);
  for (long i = 0; i < n; ++i) {
    {
      std::unique_lock l(slot->mu);
      while (slot->ready.empty()) {
        if (g_stop.load()) return false;
        slot->cv.wait_for(l, std::chrono::seconds(1));
      }
      slot->ready.pop_front();
    }
    if (!s.headers_sent() && !s.headers()) return false;
    if (!s.event(token_event(id, i + 1 == n))) return false;
  }
  return true;
}

// Serves one completion. Returns whether the connection may serve another request.
bool stream_completion(int fd, const Request& req, const Options& o) {
  std::optional<long> max_tokens;
  std::string error;
  if (!req.body.empty() && !JsonScanner(req.body).scan_request(max_tokens, error)) {
    send_simple(fd, 400, "Bad Request", "bad request: " + error + "\n", true);
    return false;
  }
  const long n = max_tokens.value_or(o.tokens);
  const std::string id = "cmpl-" + std::to_string(g_completion_id.fetch_add(1) + 1);
  SseStream s(fd, o);
  const bool early_headers = effective_headers_at(o) == HeadersAt::request;

  if (early_headers && !s.headers()) return false;
  if (o.fault == "cold_start") cold_start_once(o);
  if (o.fault == "kv_alloc" && static_cast<double>(req.body.size()) >= o.fault_min_kb * 1024)
    touch_fresh_memory(static_cast<size_t>(o.fault_mib) << 20, false);
  const double prefill_ms = o.prefill_base_ms + o.prefill_ms_per_kb * static_cast<double>(req.body.size()) / 1024.0;
  if (o.engine == "batch") {
    if (!stream_batched(s, id, n, prefill_ms, o)) return false;
  } else {
    burn_ms(prefill_ms);
  }
  for (long i = 0; o.engine.empty() && i < n; ++i) {
    burn_ms(o.token_ms);
    if (!o.fault.empty()) after_token_work(o);
    if (g_stop.load()) return false;
    if (!s.headers_sent() && !s.headers()) return false;
    if (!s.event(token_event(id, i + 1 == n))) return false;
  }
  if (!s.headers_sent() && !s.headers()) return false;
  if (o.wire == Wire::llamacpp && !s.event(usage_event(id, req.body.size(), n))) return false;
  if (!s.event("data: [DONE]\n\n") || !s.finish()) return false;
  return !o.plain && !o.close_after_stream && req.keep_alive;
}

// Routes one request. Returns whether to keep the connection.
bool handle_request(int fd, const Request& req, const Options& o) {
  std::string path = req.path.substr(0, req.path.find('?'));
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (req.method == "POST") return stream_completion(fd, req, o);
    send_simple(fd, 405, "Method Not Allowed", "use POST\n", !req.keep_alive);
    return req.keep_alive;
  }
  if (path == "/health") {
    if (req.method == "GET") send_simple(fd, 200, "OK", "ok", !req.keep_alive);
    else send_simple(fd, 405, "Method Not Allowed", "use GET\n", !req.keep_alive);
    return req.keep_alive;
  }
  send_simple(fd, 404, "Not Found", "not found\n", !req.keep_alive);
  return req.keep_alive;
}

// ------------------------------------------------------------------------------------ connections

// Open connection sockets, so shutdown can wake threads blocked in recv(). Leaked on purpose:
// detached threads may still touch it while static destructors run.
struct Registry {
  std::mutex mu;
  std::set<int> fds;
  std::atomic<int> active{0};
};
Registry& registry() {
  static auto* r = new Registry;
  return *r;
}

void serve_connection(int fd, const Options& o) {
  std::string pending;
  while (!g_stop.load()) {
    Request req;
    std::string error;
    ReadStatus st = read_request(fd, pending, req, error, o.wire);
    if (st == ReadStatus::closed) break;
    if (st != ReadStatus::ok) {
      if (st == ReadStatus::too_large) send_simple(fd, 413, "Payload Too Large", error + "\n", true);
      else send_simple(fd, 400, "Bad Request", "bad request: " + error + "\n", true);
      lingering_shutdown(fd);
      break;
    }
    if (!handle_request(fd, req, o)) {
      lingering_shutdown(fd);
      break;
    }
  }
  std::lock_guard lock(registry().mu);
  registry().fds.erase(fd);
  ::close(fd);  // under the lock: shutdown_all() must never touch a reused fd number
  registry().active.fetch_sub(1);
}

void configure_socket(int fd, const Options& o) {
  int one = 1;
  if (!o.nagle) ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(o.idle_timeout_s);
  tv.tv_usec = static_cast<suseconds_t>((o.idle_timeout_s - std::floor(o.idle_timeout_s)) * 1e6);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

void spawn_connection(int fd, const Options& o) {
  constexpr int kMaxConnections = 512;
  if (registry().active.load() >= kMaxConnections) {
    send_simple(fd, 503, "Service Unavailable", "too many connections\n", true);
    ::close(fd);
    return;
  }
  {
    std::lock_guard lock(registry().mu);
    registry().fds.insert(fd);
    registry().active.fetch_add(1);
  }
  try {
    std::thread(serve_connection, fd, std::cref(o)).detach();
  } catch (const std::system_error&) {
    std::lock_guard lock(registry().mu);
    registry().fds.erase(fd);
    registry().active.fetch_sub(1);
    ::close(fd);
  }
}

// Wakes every connection thread and waits (bounded) for them to finish.
void shutdown_all() {
  {
    std::lock_guard lock(registry().mu);
    for (int fd : registry().fds) ::shutdown(fd, SHUT_RDWR);
  }
  const uint64_t deadline = mono_ns() + 3'000'000'000ull;
  while (registry().active.load() > 0 && mono_ns() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

// Returns the listening socket on 127.0.0.1 (never any other address), or -1.
int listen_loopback(int port, int& bound_port, int backlog) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return -1;
  }
  bound_port = ntohs(addr.sin_port);
  return fd;
}

void accept_loop(int lfd, const Options& o) {
  while (!g_stop.load()) {
    pollfd p{lfd, POLLIN, 0};
    int r = ::poll(&p, 1, 200);  // the timeout re-checks g_stop if a signal hit another thread
    if (r <= 0) continue;
    int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    configure_socket(fd, o);
    spawn_connection(fd, o);
    if (o.accept_delay_ms > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long>(o.accept_delay_ms * 1000)));
  }
}

// The noisy neighbour's threads: each burst starts at the same moment in every thread (a
// multiple of the period since `t0`), so together they take every CPU they can get.
[[noreturn]] void neighbour_main(const Options& o) {
  ::prctl(PR_SET_NAME, "noisy-neighbour", 0, 0, 0);
  const uint64_t t0 = mono_ns();
  const auto period = static_cast<uint64_t>(o.neighbour_period_ms * 1e6);
  const auto burst = static_cast<uint64_t>(std::min(o.neighbour_burst_ms, o.neighbour_period_ms) * 1e6);
  auto spin_in_bursts = [=] {
    volatile uint64_t sink = 0;
    for (uint64_t k = 1;; ++k) {
      const uint64_t start = t0 + k * period - burst;  // the first burst ends one period in
      while (mono_ns() < start)
        std::this_thread::sleep_for(std::chrono::microseconds(std::max<uint64_t>(1, (start - mono_ns()) / 1000)));
      while (mono_ns() < start + burst) sink = sink + 1;
    }
  };
  for (long i = 1; i < o.neighbour_threads; ++i) std::thread(spin_in_bursts).detach();
  spin_in_bursts();
  std::_Exit(0);
}

// Forks the neighbour before the server starts any thread; it dies with the server.
pid_t start_neighbour(const Options& o) {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;  // the server (or -1: no neighbour)
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (::getppid() != parent) std::_Exit(0);  // the server died before prctl
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
  neighbour_main(o);
}

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: let poll() return early
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // write()/writev() to a gone client must not kill us
}

}  // namespace

int main(int argc, char** argv) {
  static Options opts;  // static: detached connection threads hold a reference
  if (auto err = parse_args(argc, argv, opts)) {
    std::fprintf(stderr, "ld-sample-server: %s\n", err->c_str());
    return 2;
  }
  if (opts.help) {
    print_help(stdout);
    return 0;
  }
  install_signal_handlers();
  const pid_t neighbour = opts.neighbour_threads > 0 ? start_neighbour(opts) : 0;
  if (neighbour > 0)
    std::fprintf(stderr, "ld-sample-server: noisy neighbour pid %d: %ld threads spin %.0f ms every %.0f ms\n",
                 static_cast<int>(neighbour), opts.neighbour_threads, opts.neighbour_burst_ms,
                 opts.neighbour_period_ms);

  constexpr int kRuns = 5;
  constexpr double kRunMs = 20;
  g_iterations_per_ms = calibrate_iterations_per_ms(kRuns, kRunMs);
  std::fprintf(stderr,
               "ld-sample-server: calibration %.0f iterations/ms of CPU "
               "(best of %d x %.0f ms of thread CPU time)\n",
               g_iterations_per_ms, kRuns, kRunMs);

  if (!opts.gpu_lib.empty()) {  // after the neighbour's fork: a CUDA library may start threads
    if (auto err = load_cuda_runtime(opts.gpu_lib)) {
      std::fprintf(stderr, "ld-sample-server: %s\n", err->c_str());
      return 2;
    }
    std::fprintf(stderr, "ld-sample-server: GPU steps through %s: %.2f ms CPU, then %ld kernels of %.0f us\n",
                 opts.gpu_lib.c_str(), opts.gpu_cpu_ms, opts.gpu_kernels, opts.gpu_kernel_us);
  }

  int port = 0;
  int lfd = listen_loopback(opts.port, port, static_cast<int>(opts.listen_backlog));
  if (lfd < 0) {
    std::fprintf(stderr, "ld-sample-server: cannot listen on 127.0.0.1:%d: %s\n", opts.port, std::strerror(errno));
    return 1;
  }
  std::printf("listening on 127.0.0.1:%d\n", port);
  std::fflush(stdout);

  if (opts.fault == "lock") std::thread(metrics_thread, std::cref(opts)).detach();
  accept_loop(lfd, opts);
  ::close(lfd);
  shutdown_all();
  if (neighbour > 0) {
    ::kill(neighbour, SIGKILL);
    ::waitpid(neighbour, nullptr, 0);
  }
  std::fprintf(stderr, "ld-sample-server: stopped\n");
  return 0;
}
