// SocketTimelineBuilder from synthetic event streams: no root, no BPF.
#include <algorithm>
#include <cstring>
#include <random>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/timeline.hpp"
#include "events.h"

namespace {

using ld::analysis::SocketTimelineBuilder;
using ld::model::Request;
using ld::model::Timeline;

constexpr uint64_t kMs = 1'000'000;
constexpr uint32_t kPid = 100;

using Event = std::variant<ld_sock_io, ld_h2_frames, ld_sock_close, ld_task_exit>;

// One HTTP/2 frame entry as the kernel's walk keeps it.
struct H2 {
  uint8_t type;
  uint32_t stream;
  uint8_t cls = 0;
  uint8_t flags = 0;
  uint32_t len = 40;
};

ld_hdr header(uint16_t type, uint16_t size, uint64_t ts, uint32_t tgid, uint32_t tid) {
  ld_hdr h{};
  h.type = type;
  h.size = size;
  h.cpu = 0;
  h.tgid = tgid;
  h.tid = tid;
  h.ts_ns = ts;
  return h;
}

// Builds an event stream the way the kernel side would report it. Times are in ms for
// readability; `sock` is the opaque socket id.
class Stream {
 public:
  explicit Stream(uint32_t tgid = kPid) : tgid_(tgid) {}

  Stream& recv(double t_ms, uint64_t sock, ld_payload_class cls, int64_t ret = 100) {
    return io(t_ms, sock, LD_DIR_RECV, cls, ret, LD_SC_READ);
  }
  Stream& send(double t_ms, uint64_t sock, ld_payload_class cls, int64_t ret = 50, ld_io_syscall sc = LD_SC_WRITE,
               uint8_t sse_events = 0) {
    if (sse_events == 0 && (cls == LD_PC_SSE_DATA || cls == LD_PC_HTTP_RESPONSE_SSE)) sse_events = 1;
    return io(t_ms, sock, LD_DIR_SEND, cls, ret, sc, sse_events);
  }
  // An HTTP/2 send or receive: the ld_sock_io record, then its frames.
  Stream& h2(double t_ms, uint64_t sock, uint8_t dir, std::vector<H2> frames, bool preface = false) {
    io(t_ms, sock, dir, LD_PC_H2, 100, dir == LD_DIR_SEND ? LD_SC_SENDMSG : LD_SC_RECVMSG);
    ld_h2_frames ev{};
    ev.hdr = header(LD_EV_H2_FRAMES, sizeof ev, ns(t_ms), tgid_, tid_);
    ev.sock_id = sock;
    ev.dir = dir;
    ev.preface = preface;
    ev.rport = 40000;
    ev.lport = 50051;
    for (const H2& f : frames) {
      ld_h2_frame& e = ev.f[ev.count++];
      e.stream_id = f.stream;
      e.type = f.type;
      e.cls = f.cls;
      e.flags = f.flags;
      e.len = f.len;
      e.messages = f.cls == LD_PC_GRPC_MESSAGE || f.cls == LD_PC_SSE_DATA ? 1 : 0;
    }
    events_.push_back(ev);
    return *this;
  }
  Stream& close(double t_ms, uint64_t sock) {
    ld_sock_close ev{};
    ev.hdr = header(LD_EV_SOCK_CLOSE, sizeof ev, ns(t_ms), tgid_, tid_);
    ev.sock_id = sock;
    events_.push_back(ev);
    return *this;
  }
  Stream& exit_process(double t_ms) {
    ld_task_exit ev{};
    ev.hdr = header(LD_EV_TASK_EXIT, sizeof ev, ns(t_ms), tgid_, tgid_);
    ev.is_process = 1;
    events_.push_back(ev);
    return *this;
  }
  Stream& thread(uint32_t tid) {
    tid_ = tid;
    return *this;
  }
  Stream& pid(uint32_t tgid) {
    tgid_ = tgid;
    return *this;
  }
  // The TCP state the next sends return with (ld_sock_io.tcp, .unsent).
  Stream& tcp_state(uint8_t tcp, uint32_t unsent) {
    tcp_ = tcp;
    unsent_ = unsent;
    return *this;
  }

  // A full llama.cpp-style streaming exchange: request, headers at once, tokens, usage, [DONE],
  // terminator. Token i is sent at first_token_ms + i * gap_ms.
  Stream& llama_exchange(double start_ms, uint64_t sock, double first_token_ms, int tokens, double gap_ms) {
    recv(start_ms, sock, LD_PC_HTTP_REQUEST, 300);
    send(start_ms + 0.1, sock, LD_PC_HTTP_RESPONSE, 120, LD_SC_SENDTO);
    double t = first_token_ms;
    for (int i = 0; i < tokens; ++i, t += gap_ms) send(t, sock, LD_PC_SSE_DATA, 80, LD_SC_SENDTO);
    send(t - gap_ms + 0.2, sock, LD_PC_SSE_DONE, 20, LD_SC_SENDTO);
    send(t - gap_ms + 0.3, sock, LD_PC_CHUNK_END, 5, LD_SC_SENDTO);
    return *this;
  }

  const std::vector<Event>& events() const { return events_; }

 private:
  static uint64_t ns(double t_ms) { return static_cast<uint64_t>(t_ms * 1e6 + 0.5); }

  Stream& io(double t_ms, uint64_t sock, uint8_t dir, uint8_t cls, int64_t ret, uint8_t sc, uint8_t sse_events = 0) {
    ld_sock_io ev{};
    ev.hdr = header(LD_EV_SOCK_IO, sizeof ev, ns(t_ms), tgid_, tid_);
    ev.sock_id = sock;
    ev.ret = ret;
    ev.fd = static_cast<uint32_t>(sock % 1000);
    ev.lport = 8000;
    ev.rport = 40000;
    ev.family = 2;
    ev.dir = dir;
    ev.syscall = sc;
    ev.cls = cls;
    ev.sse_events = sse_events;
    if (dir == LD_DIR_SEND) {
      ev.tcp = tcp_;
      ev.unsent = unsent_;
    }
    events_.push_back(ev);
    return *this;
  }

  uint8_t tcp_ = 0;
  uint32_t unsent_ = 0;
  uint32_t tgid_;
  uint32_t tid_ = 101;
  std::vector<Event> events_;
};

Timeline build(const std::vector<Event>& events) {
  SocketTimelineBuilder builder;
  for (const Event& ev : events) std::visit([&](const auto& e) { builder.add(e); }, ev);
  return builder.finish();
}

Timeline build(const Stream& s) { return build(s.events()); }

uint64_t ts_of(const Event& ev) {
  return std::visit([](const auto& e) { return e.hdr.ts_ns; }, ev);
}

// Delivery order as per-CPU ring buffers produce it: any record may arrive up to `window`
// later than records stamped after it.
std::vector<Event> shuffled_within(std::vector<Event> events, uint64_t window, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> jitter(0, window);
  std::vector<std::pair<uint64_t, Event>> keyed;
  for (const Event& ev : events) keyed.emplace_back(ts_of(ev) + jitter(rng), ev);
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Event> out;
  for (auto& [key, ev] : keyed) out.push_back(ev);
  return out;
}

void expect_same(const Timeline& a, const Timeline& b) {
  ASSERT_EQ(a.requests.size(), b.requests.size());
  for (size_t i = 0; i < a.requests.size(); ++i) {
    const Request& x = a.requests[i];
    const Request& y = b.requests[i];
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.start_ns, y.start_ns);
    EXPECT_EQ(x.end_ns, y.end_ns);
    EXPECT_EQ(x.input_bytes, y.input_bytes);
    EXPECT_EQ(x.token_ns, y.token_ns);
    EXPECT_EQ(x.token_tid, y.token_tid);
    EXPECT_EQ(x.complete, y.complete);
  }
  EXPECT_EQ(a.non_streaming_requests, b.non_streaming_requests);
  EXPECT_EQ(a.partial_requests, b.partial_requests);
  EXPECT_EQ(a.in_flight_requests, b.in_flight_requests);
  EXPECT_EQ(a.connections, b.connections);
  EXPECT_EQ(a.send_syscalls, b.send_syscalls);
}

TEST(TimelineRequest, TtftAndGaps) {
  Request r;
  r.start_ns = 10 * kMs;
  r.token_ns = {110 * kMs, 130 * kMs, 160 * kMs};
  EXPECT_DOUBLE_EQ(r.ttft_ms(), 100.0);
  EXPECT_EQ(r.gaps_ms(), (std::vector<double>{20.0, 30.0}));
  Request empty;
  EXPECT_TRUE(std::isnan(empty.ttft_ms()));
  EXPECT_TRUE(empty.gaps_ms().empty());
}

TEST(Timeline, LlamaCppHeadersBeforePrefillTtftFromRequestToFirstData) {
  Stream s;
  s.llama_exchange(0, 1, /*first token*/ 250, /*tokens*/ 4, /*gap*/ 40);
  s.close(500, 1);
  const Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 1u);
  const Request& r = t.requests[0];
  EXPECT_EQ(r.id, "100:c1#1");
  EXPECT_EQ(r.tgid, kPid);
  EXPECT_EQ(r.start_ns, 0u);
  EXPECT_DOUBLE_EQ(r.ttft_ms(), 250.0);  // not 0.1 ms (the headers)
  ASSERT_EQ(r.token_ns.size(), 4u);
  for (double gap : r.gaps_ms()) EXPECT_NEAR(gap, 40.0, 1e-6);
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.end_ns, static_cast<uint64_t>(370.3 * kMs + 0.5));  // the terminator, after [DONE]
  EXPECT_EQ(r.input_bytes, 300u);
  EXPECT_EQ(r.token_tid, std::vector<uint32_t>(4, 101));
  EXPECT_EQ(t.connections, 1u);
  EXPECT_EQ(t.non_streaming_requests, 0u);
  EXPECT_EQ(t.send_syscalls.at("sendto"), 4u);
}

TEST(Timeline, KeepAliveThreeRequestsOnOneConnection) {
  Stream s;
  s.llama_exchange(0, 7, 100, 3, 20);
  s.llama_exchange(1000, 7, 1300, 5, 10);
  s.llama_exchange(2000, 7, 2050, 2, 30);
  const Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 3u);
  EXPECT_EQ(t.requests[0].id, "100:c1#1");
  EXPECT_EQ(t.requests[1].id, "100:c1#2");
  EXPECT_EQ(t.requests[2].id, "100:c1#3");
  EXPECT_DOUBLE_EQ(t.requests[0].ttft_ms(), 100.0);
  EXPECT_DOUBLE_EQ(t.requests[1].ttft_ms(), 300.0);
  EXPECT_DOUBLE_EQ(t.requests[2].ttft_ms(), 50.0);
  EXPECT_EQ(t.requests[0].token_ns.size(), 3u);
  EXPECT_EQ(t.requests[1].token_ns.size(), 5u);
  EXPECT_EQ(t.requests[2].token_ns.size(), 2u);
  for (const Request& r : t.requests) EXPECT_TRUE(r.complete);
  EXPECT_EQ(t.connections, 1u);
}

TEST(Timeline, UvicornThreeWriteChunkFramingIsOneTokenEach) {
  Stream s;
  s.recv(0, 3, LD_PC_HTTP_REQUEST, 200);
  s.recv(0.5, 3, LD_PC_OTHER, 900);  // the JSON body
  s.send(1, 3, LD_PC_HTTP_RESPONSE, 150);
  for (int i = 0; i < 5; ++i) {
    const double t = 100 + i * 25;
    s.send(t, 3, LD_PC_CHUNK_FRAME, 4);
    s.send(t + 0.01, 3, LD_PC_SSE_DATA, 60);
    s.send(t + 0.02, 3, LD_PC_CHUNK_FRAME, 2);
  }
  s.send(300, 3, LD_PC_CHUNK_FRAME, 4);
  s.send(300.01, 3, LD_PC_SSE_DONE, 14);
  s.send(300.02, 3, LD_PC_CHUNK_FRAME, 2);
  s.send(300.03, 3, LD_PC_CHUNK_END, 5);
  const Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 1u);
  const Request& r = t.requests[0];
  EXPECT_EQ(r.token_ns.size(), 5u);
  EXPECT_NEAR(r.ttft_ms(), 100.01, 1e-6);
  for (double gap : r.gaps_ms()) EXPECT_NEAR(gap, 25.0, 1e-6);
  EXPECT_EQ(r.input_bytes, 1100u);
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.end_ns, 300030000u);
  EXPECT_EQ(t.send_syscalls.at("write"), 5u);
}

TEST(Timeline, HeadersAndFirstEventInOneSendIsAToken) {
  Stream s;
  s.recv(0, 3, LD_PC_HTTP_REQUEST);
  s.send(80, 3, LD_PC_HTTP_RESPONSE_SSE, 300, LD_SC_WRITEV);
  s.send(100, 3, LD_PC_SSE_DATA, 60, LD_SC_WRITEV, 3);  // three events batched in one write
  s.send(101, 3, LD_PC_SSE_DONE);
  const Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 1u);
  EXPECT_EQ(t.requests[0].token_ns.size(), 2u);
  EXPECT_DOUBLE_EQ(t.requests[0].ttft_ms(), 80.0);
  EXPECT_EQ(t.multi_event_sends, 1u);
  EXPECT_EQ(t.send_syscalls.at("writev"), 2u);
}

TEST(Timeline, ContentLessDataEventsAreNotTokens) {
  Stream s;
  s.recv(0, 3, LD_PC_HTTP_REQUEST);
  s.send(1, 3, LD_PC_HTTP_RESPONSE);
  s.send(10, 3, LD_PC_SSE_META);  // role-only first chunk: "delta":{}
  s.send(50, 3, LD_PC_SSE_DATA).send(70, 3, LD_PC_SSE_DATA);
  s.send(71, 3, LD_PC_SSE_META);  // usage summary: "choices":[]
  s.send(72, 3, LD_PC_SSE_DONE);
  const Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 1u);
  EXPECT_EQ(t.requests[0].token_ns.size(), 2u);
  EXPECT_DOUBLE_EQ(t.requests[0].ttft_ms(), 50.0);
  EXPECT_EQ(t.requests[0].end_ns, 72 * kMs);
}

TEST(Timeline, InterleavedConnections) {
  Stream s;
  // Two clients streaming at the same time on two sockets, tokens alternating.
  s.recv(0, 1, LD_PC_HTTP_REQUEST);
  s.recv(5, 2, LD_PC_HTTP_REQUEST);
  s.send(6, 1, LD_PC_HTTP_RESPONSE);
  s.send(7, 2, LD_PC_HTTP_RESPONSE);
  for (int i = 0; i < 4; ++i) {
    s.thread(201).send(100 + i * 20, 1, LD_PC_SSE_DATA);
    s.thread(202).send(110 + i * 20, 2, LD_PC_SSE_DATA);
  }
  s.send(200, 1, LD_PC_SSE_DONE).send(201, 2, LD_PC_SSE_DONE);
  const Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_EQ(t.requests[0].id, "100:c1#1");
  EXPECT_EQ(t.requests[1].id, "100:c2#1");
  EXPECT_DOUBLE_EQ(t.requests[0].ttft_ms(), 100.0);
  EXPECT_DOUBLE_EQ(t.requests[1].ttft_ms(), 105.0);
  EXPECT_EQ(t.requests[0].token_tid, std::vector<uint32_t>(4, 201));
  EXPECT_EQ(t.requests[1].token_tid, std::vector<uint32_t>(4, 202));
  for (const Request& r : t.requests) {
    for (double gap : r.gaps_ms()) EXPECT_NEAR(gap, 20.0, 1e-6);
  }
  EXPECT_EQ(t.connections, 2u);
}

TEST(Timeline, OutOfOrderDeliveryAcrossCpusGivesIdenticalResults) {
  Stream s;
  s.llama_exchange(0, 1, 50, 30, 3);  // 3 ms gaps: jitter of 2 ms reorders many neighbours
  s.llama_exchange(10, 2, 40, 40, 2.5);
  s.recv(20, 3, LD_PC_HTTP_REQUEST).send(21, 3, LD_PC_HTTP_RESPONSE).close(22, 3);
  s.close(400, 1);
  s.llama_exchange(401, 1, 420, 10, 4);  // the socket id reused right after its close
  s.exit_process(600);
  const Timeline reference = build(s);
  ASSERT_EQ(reference.requests.size(), 3u);
  EXPECT_EQ(reference.non_streaming_requests, 1u);
  for (unsigned seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    expect_same(reference, build(shuffled_within(s.events(), 2 * kMs, seed)));
  }
}

TEST(Timeline, ClientConnectionsAreIgnored) {
  Stream s;
  // The target calls an upstream (e.g. a proxy or a tool call): it sends the request line.
  s.send(0, 9, LD_PC_HTTP_REQUEST, 300);
  s.recv(50, 9, LD_PC_HTTP_RESPONSE, 200);
  s.recv(60, 9, LD_PC_SSE_DATA, 80);
  s.recv(70, 9, LD_PC_OTHER, 80);
  s.send(71, 9, LD_PC_SSE_DATA, 80);  // even an odd send on it does not count
  s.llama_exchange(100, 1, 150, 2, 10);
  const Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 1u);
  EXPECT_EQ(t.requests[0].id, "100:c1#1");
  EXPECT_EQ(t.connections, 1u);
  EXPECT_EQ(t.client_connections, 1u);
  EXPECT_EQ(t.send_syscalls.at("sendto"), 2u);
  EXPECT_EQ(t.send_syscalls.count("write"), 0u);
}

TEST(Timeline, PartialResponseAtTraceStartIsCountedNotMeasured) {
  Stream s;
  // The trace began while a response streamed: tokens with no request start.
  s.send(0, 4, LD_PC_SSE_DATA).send(20, 4, LD_PC_SSE_DATA).send(40, 4, LD_PC_SSE_DATA);
  s.send(41, 4, LD_PC_SSE_DONE).send(42, 4, LD_PC_CHUNK_END);
  // The next request on the same keep-alive connection is measured.
  s.llama_exchange(100, 4, 180, 3, 10);
  const Timeline t = build(s);
  EXPECT_EQ(t.partial_requests, 1u);
  ASSERT_EQ(t.requests.size(), 1u);
  EXPECT_EQ(t.requests[0].id, "100:c1#1");
  EXPECT_DOUBLE_EQ(t.requests[0].ttft_ms(), 80.0);
  EXPECT_EQ(t.requests[0].token_ns.size(), 3u);
}

TEST(Timeline, BodyTailBeforeTheFirstResponseIsNotARequest) {
  Stream s;
  // The trace began mid-upload: the last body read, then the answer.
  s.recv(0, 4, LD_PC_OTHER, 4000);
  s.send(10, 4, LD_PC_HTTP_RESPONSE).send(50, 4, LD_PC_SSE_DATA).send(60, 4, LD_PC_SSE_DATA);
  s.send(61, 4, LD_PC_SSE_DONE);
  const Timeline t = build(s);
  EXPECT_TRUE(t.requests.empty());
  EXPECT_EQ(t.partial_requests, 1u);
  EXPECT_EQ(t.connections, 1u);
}

TEST(Timeline, NonStreamingRequestIsCountedNotListed) {
  Stream s;
  s.recv(0, 5, LD_PC_HTTP_REQUEST, 80);    // GET /health
  s.send(1, 5, LD_PC_HTTP_RESPONSE, 120);  // Content-Length response
  s.recv(10, 5, LD_PC_HTTP_REQUEST, 300);  // keep-alive: next request is a stream
  s.send(11, 5, LD_PC_HTTP_RESPONSE);
  s.send(60, 5, LD_PC_SSE_DATA).send(70, 5, LD_PC_SSE_DATA).send(71, 5, LD_PC_SSE_DONE);
  s.recv(100, 5, LD_PC_HTTP_REQUEST, 80);  // another /health, then the client hangs up
  s.send(101, 5, LD_PC_HTTP_RESPONSE, 120);
  s.recv(200, 5, LD_PC_OTHER, 0);
  const Timeline t = build(s);
  EXPECT_EQ(t.non_streaming_requests, 2u);
  ASSERT_EQ(t.requests.size(), 1u);
  EXPECT_EQ(t.requests[0].id, "100:c1#2");
  EXPECT_DOUBLE_EQ(t.requests[0].ttft_ms(), 50.0);
}

TEST(Timeline, EagainReceivesAreIgnored) {
  Stream s;
  s.recv(0, 6, LD_PC_OTHER, -11);  // uvicorn polls before data is there
  s.recv(1, 6, LD_PC_HTTP_REQUEST, 250);
  s.recv(2, 6, LD_PC_OTHER, -11);
  s.send(3, 6, LD_PC_HTTP_RESPONSE);
  s.send(50, 6, LD_PC_SSE_DATA).send(60, 6, LD_PC_SSE_DATA);
  s.recv(61, 6, LD_PC_OTHER, -11);  // would start a new request if it counted
  s.send(70, 6, LD_PC_SSE_DATA).send(71, 6, LD_PC_SSE_DONE);
  s.send(72, 6, LD_PC_SSE_DATA, -32);  // EPIPE: nothing sent
  const Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 1u);
  EXPECT_DOUBLE_EQ(t.requests[0].ttft_ms(), 49.0);
  EXPECT_EQ(t.requests[0].token_ns.size(), 3u);
  EXPECT_EQ(t.requests[0].input_bytes, 250u);
  EXPECT_EQ(t.non_streaming_requests, 0u);
}

TEST(Timeline, SocketIdReusedAfterCloseIsANewConnection) {
  Stream s;
  s.recv(0, 8, LD_PC_HTTP_REQUEST).send(1, 8, LD_PC_HTTP_RESPONSE);
  s.send(30, 8, LD_PC_SSE_DATA).send(40, 8, LD_PC_SSE_DATA);  // no [DONE]: ends with the close
  s.close(50, 8);
  s.recv(60, 8, LD_PC_HTTP_REQUEST).send(61, 8, LD_PC_HTTP_RESPONSE);
  s.send(100, 8, LD_PC_SSE_DATA);
  const Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_EQ(t.requests[0].id, "100:c1#1");
  EXPECT_EQ(t.requests[1].id, "100:c2#1");
  EXPECT_TRUE(t.requests[0].complete);   // the server closed after its last byte
  EXPECT_FALSE(t.requests[1].complete);  // the trace ended mid-stream
  EXPECT_EQ(t.requests[0].token_ns.size(), 2u);
  EXPECT_EQ(t.requests[1].token_ns.size(), 1u);
  EXPECT_DOUBLE_EQ(t.requests[1].ttft_ms(), 40.0);
  EXPECT_EQ(t.connections, 2u);
}

TEST(Timeline, ProcessExitEndsItsConnectionsIncomplete) {
  Stream s;
  s.recv(0, 1, LD_PC_HTTP_REQUEST).send(1, 1, LD_PC_HTTP_RESPONSE);
  s.send(10, 1, LD_PC_SSE_DATA).send(20, 1, LD_PC_SSE_DATA);
  s.recv(5, 2, LD_PC_HTTP_REQUEST);                                       // no answer yet
  s.pid(200).recv(0, 1, LD_PC_HTTP_REQUEST).send(30, 1, LD_PC_SSE_DATA);  // another process
  s.pid(kPid).exit_process(25);
  s.send(40, 1, LD_PC_SSE_DATA);  // a late record after the exit cannot belong to it
  const Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_EQ(t.requests[0].id, "100:c1#1");
  EXPECT_FALSE(t.requests[0].complete);
  EXPECT_EQ(t.requests[0].token_ns.size(), 2u);
  EXPECT_EQ(t.requests[1].id, "200:c1#1");
  EXPECT_EQ(t.requests[1].tgid, 200u);
  EXPECT_EQ(t.non_streaming_requests, 1u);  // the unanswered one ended with the process
  EXPECT_EQ(t.in_flight_requests, 0u);
}

TEST(Timeline, ThreadExitDoesNotEndConnections) {
  Stream s;
  s.recv(0, 1, LD_PC_HTTP_REQUEST).send(10, 1, LD_PC_SSE_DATA);
  SocketTimelineBuilder builder;
  for (const Event& ev : s.events()) std::visit([&](const auto& e) { builder.add(e); }, ev);
  ld_task_exit thread_exit{};
  thread_exit.hdr = header(LD_EV_TASK_EXIT, sizeof thread_exit, 15 * kMs, kPid, 105);
  thread_exit.is_process = 0;
  builder.add(thread_exit);
  ld_sock_io more{};
  more.hdr = header(LD_EV_SOCK_IO, sizeof more, 20 * kMs, kPid, 101);
  more.sock_id = 1;
  more.ret = 40;
  more.dir = LD_DIR_SEND;
  more.cls = LD_PC_SSE_DATA;
  builder.add(more);
  const Timeline t = builder.finish();
  ASSERT_EQ(t.requests.size(), 1u);
  EXPECT_EQ(t.requests[0].token_ns.size(), 2u);
}

TEST(Timeline, RequestInFlightAtTraceEnd) {
  Stream s;
  s.recv(0, 1, LD_PC_HTTP_REQUEST);
  const Timeline t = build(s);
  EXPECT_TRUE(t.requests.empty());
  EXPECT_EQ(t.in_flight_requests, 1u);
  EXPECT_EQ(t.non_streaming_requests, 0u);
}

TEST(Timeline, UnclassifiedRequestAfterAResponseStartsANewRequest) {
  Stream s;
  s.llama_exchange(0, 1, 20, 2, 10);
  s.recv(100, 1, LD_PC_OTHER, 500);  // e.g. a method the kernel does not know
  s.send(101, 1, LD_PC_HTTP_RESPONSE).send(150, 1, LD_PC_SSE_DATA).send(151, 1, LD_PC_SSE_DONE);
  const Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_EQ(t.requests[1].id, "100:c1#2");
  EXPECT_DOUBLE_EQ(t.requests[1].ttft_ms(), 50.0);
  EXPECT_EQ(t.requests[1].input_bytes, 500u);
}

TEST(Timeline, PipelinedRequestsAreAnsweredInOrder) {
  Stream s;
  s.recv(0, 1, LD_PC_HTTP_REQUEST).recv(1, 1, LD_PC_HTTP_REQUEST);
  s.send(10, 1, LD_PC_HTTP_RESPONSE).send(20, 1, LD_PC_SSE_DATA).send(21, 1, LD_PC_SSE_DONE);
  s.send(30, 1, LD_PC_HTTP_RESPONSE).send(40, 1, LD_PC_SSE_DATA).send(41, 1, LD_PC_SSE_DONE);
  const Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_DOUBLE_EQ(t.requests[0].ttft_ms(), 20.0);
  EXPECT_DOUBLE_EQ(t.requests[1].ttft_ms(), 39.0);
}

TEST(Timeline, PeerEofMidStreamLeavesTheResponseIncomplete) {
  Stream s;
  s.recv(0, 1, LD_PC_HTTP_REQUEST).send(10, 1, LD_PC_SSE_DATA).send(20, 1, LD_PC_SSE_DATA);
  s.recv(25, 1, LD_PC_OTHER, 0);  // the client went away
  s.send(30, 1, LD_PC_SSE_DATA, -32);
  s.close(31, 1);
  const Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 1u);
  EXPECT_FALSE(t.requests[0].complete);
  EXPECT_EQ(t.requests[0].token_ns.size(), 2u);
  EXPECT_EQ(t.connections, 1u);
}

TEST(Timeline, SyscallNames) {
  EXPECT_EQ(ld::analysis::io_syscall_name(LD_SC_WRITE), "write");
  EXPECT_EQ(ld::analysis::io_syscall_name(LD_SC_SENDMSG), "sendmsg");
  EXPECT_EQ(ld::analysis::io_syscall_name(200), "syscall#200");
}

TEST(Timeline, EmptyInput) {
  SocketTimelineBuilder builder;
  const Timeline t = builder.finish();
  EXPECT_TRUE(t.requests.empty());
  EXPECT_EQ(t.connections, 0u);
}

}  // namespace

// The peer port is the client's (joins a client's token log exactly), and a send that
// carried several SSE events keeps its event count (TPOT per token vs ITL per chunk).
TEST(Timeline, RequestsKeepTheClientPortAndTheEventsPerSend) {
  Stream s;
  s.recv(0, 1, LD_PC_HTTP_REQUEST, 300)
      .send(100, 1, LD_PC_SSE_DATA)
      .send(150, 1, LD_PC_SSE_DATA, 240, LD_SC_WRITE, 3)
      .send(200, 1, LD_PC_SSE_DATA)
      .send(200.5, 1, LD_PC_SSE_DONE, 20);
  Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 1u);
  EXPECT_EQ(t.requests[0].client_port, 40000);
  EXPECT_EQ(t.requests[0].token_ns.size(), 3u);
  EXPECT_EQ(t.requests[0].token_events, (std::vector<uint16_t>{1, 3, 1}));

  Stream one_each;
  one_each.llama_exchange(0, 2, 100, 5, 40);
  Timeline u = build(one_each);
  ASSERT_EQ(u.requests.size(), 1u);
  EXPECT_TRUE(u.requests[0].token_events.empty());  // one event per send: nothing kept
}

namespace {

H2 headers(uint32_t stream, uint8_t flags = 0) { return H2{LD_H2_HEADERS, stream, 0, flags, 60}; }
H2 message(uint32_t stream, uint8_t flags = 0) { return H2{LD_H2_DATA, stream, LD_PC_GRPC_MESSAGE, flags, 33}; }
H2 trailers(uint32_t stream) { return H2{LD_H2_HEADERS, stream, 0, LD_H2_FLAG_END_STREAM, 20}; }

// A gRPC server-streaming call on an open channel: HEADERS + the request message in, response
// HEADERS with the first message, more messages, trailers.
void grpc_call(Stream& s, uint64_t sock, uint32_t stream, double start_ms, double first_ms, int tokens, double gap_ms) {
  s.h2(start_ms, sock, LD_DIR_RECV,
       {{LD_H2_HEADERS, stream, 0, 0, 200}, {LD_H2_DATA, stream, LD_PC_GRPC_MESSAGE, 1, 22}});
  s.h2(first_ms, sock, LD_DIR_SEND, {headers(stream), message(stream)});
  for (int i = 1; i < tokens; ++i) s.h2(first_ms + i * gap_ms, sock, LD_DIR_SEND, {message(stream)});
  s.h2(first_ms + (tokens - 1) * gap_ms + 0.1, sock, LD_DIR_SEND, {trailers(stream)});
}

}  // namespace

// One connection, two streams at once: each stream is its own request, its TTFT from its own
// HEADERS, its tokens only its own messages.
TEST(TimelineH2, StreamsOfOneConnectionAreRequests) {
  Stream s;
  s.h2(0, 7, LD_DIR_RECV, {}, true);
  grpc_call(s, 7, 1, 1, 50, 4, 20);
  grpc_call(s, 7, 3, 10, 80, 3, 20);
  Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_EQ(t.connections, 1u);
  const Request& a = t.requests[0];
  const Request& b = t.requests[1];
  EXPECT_EQ(a.id, "100:c1#1");
  EXPECT_EQ(b.id, "100:c1#2");
  EXPECT_DOUBLE_EQ(a.ttft_ms(), 49.0);
  EXPECT_DOUBLE_EQ(b.ttft_ms(), 70.0);
  EXPECT_EQ(a.token_ns.size(), 4u);
  EXPECT_EQ(b.token_ns.size(), 3u);
  EXPECT_TRUE(a.complete);
  EXPECT_TRUE(b.complete);
  EXPECT_EQ(a.input_bytes, 222u);
  EXPECT_EQ(a.client_port, 40000);
  EXPECT_EQ(t.send_syscalls.at("sendmsg"), 7u);
  for (double g : a.gaps_ms()) EXPECT_DOUBLE_EQ(g, 20.0);
}

// Several streams' messages in one send are a token of each.
TEST(TimelineH2, OneSendCarriesTokensOfSeveralStreams) {
  Stream t;
  t.h2(0, 7, LD_DIR_RECV, {H2{LD_H2_HEADERS, 1, 0, 0, 200}, H2{LD_H2_HEADERS, 3, 0, 0, 200}});
  t.h2(30, 7, LD_DIR_SEND, {headers(1), message(1), headers(3), message(3)});
  t.h2(50, 7, LD_DIR_SEND, {message(1), message(3)});
  t.h2(70, 7, LD_DIR_SEND, {message(1, LD_H2_FLAG_END_STREAM), message(3, LD_H2_FLAG_END_STREAM)});
  Timeline tl = build(t);
  ASSERT_EQ(tl.requests.size(), 2u);
  for (const Request& r : tl.requests) {
    EXPECT_EQ(r.token_ns.size(), 3u) << r.id;
    EXPECT_DOUBLE_EQ(r.ttft_ms(), 30.0);
    EXPECT_TRUE(r.complete);
  }
}

TEST(TimelineH2, AStreamBegunBeforeTheTraceIsPartial) {
  Stream s;
  s.h2(0, 7, LD_DIR_SEND, {message(5)}).h2(20, 7, LD_DIR_SEND, {message(5)}).h2(21, 7, LD_DIR_SEND, {trailers(5)});
  grpc_call(s, 7, 7, 30, 60, 2, 20);
  Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 1u);
  EXPECT_EQ(t.partial_requests, 1u);
  EXPECT_EQ(t.requests[0].token_ns.size(), 2u);
}

// The target as a gRPC client (a gateway's upstream call): not a served connection.
TEST(TimelineH2, ClientConnectionsAreIgnored) {
  Stream preface;
  preface.h2(0, 7, LD_DIR_SEND, {}, true).h2(1, 7, LD_DIR_SEND, {headers(1), message(1, LD_H2_FLAG_END_STREAM)});
  preface.h2(30, 7, LD_DIR_RECV, {headers(1), message(1)}).h2(50, 7, LD_DIR_RECV, {trailers(1)});
  Timeline a = build(preface);
  EXPECT_TRUE(a.requests.empty());
  EXPECT_EQ(a.client_connections, 1u);
  // Attached to a channel that was open already: no preface, but the target opened the stream.
  Stream open;
  open.h2(1, 8, LD_DIR_SEND, {headers(9), message(9, LD_H2_FLAG_END_STREAM)});
  open.h2(30, 8, LD_DIR_RECV, {headers(9), message(9)}).h2(50, 8, LD_DIR_RECV, {trailers(9)});
  Timeline b = build(open);
  EXPECT_TRUE(b.requests.empty());
  EXPECT_EQ(b.client_connections, 1u);
}

TEST(TimelineH2, ResetOrCloseLeavesAStreamIncomplete) {
  Stream s;
  s.h2(0, 7, LD_DIR_RECV, {H2{LD_H2_HEADERS, 1, 0, 0, 200}, H2{LD_H2_HEADERS, 3, 0, 0, 200}});
  s.h2(30, 7, LD_DIR_SEND, {headers(1), message(1), headers(3), message(3)});
  s.h2(40, 7, LD_DIR_RECV, {H2{LD_H2_RST_STREAM, 1, 0, 0, 4}});  // the client cancelled stream 1
  s.h2(50, 7, LD_DIR_SEND, {message(3)});
  s.close(60, 7);
  Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_FALSE(t.requests[0].complete);
  EXPECT_EQ(t.requests[0].token_ns.size(), 1u);
  EXPECT_FALSE(t.requests[1].complete);
  EXPECT_EQ(t.requests[1].token_ns.size(), 2u);
}

// HTTP/2 SSE (hypercorn, Envoy in front of a server): events in DATA frames; "[DONE]" and the
// final empty END_STREAM frame are not tokens; a request answered in one JSON body is not
// streaming.
TEST(TimelineH2, SseOverHttp2) {
  Stream s;
  s.h2(0, 7, LD_DIR_RECV, {H2{LD_H2_HEADERS, 1, 0, 0, 90}, H2{LD_H2_DATA, 1, LD_PC_OTHER, 1, 40}});
  s.h2(20, 7, LD_DIR_SEND, {headers(1)});
  s.h2(40, 7, LD_DIR_SEND, {H2{LD_H2_DATA, 1, LD_PC_SSE_DATA}});
  s.h2(60, 7, LD_DIR_SEND, {H2{LD_H2_DATA, 1, LD_PC_SSE_DATA}});
  s.h2(61, 7, LD_DIR_SEND, {H2{LD_H2_DATA, 1, LD_PC_SSE_DONE}});
  s.h2(62, 7, LD_DIR_SEND, {H2{LD_H2_DATA, 1, LD_PC_OTHER, LD_H2_FLAG_END_STREAM, 0}});
  s.h2(70, 7, LD_DIR_RECV, {H2{LD_H2_HEADERS, 3, 0, 0, 90}});
  s.h2(75, 7, LD_DIR_SEND, {headers(3), H2{LD_H2_DATA, 3, LD_PC_OTHER, LD_H2_FLAG_END_STREAM, 300}});
  Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 1u);
  EXPECT_EQ(t.requests[0].token_ns.size(), 2u);
  EXPECT_DOUBLE_EQ(t.requests[0].ttft_ms(), 40.0);
  EXPECT_TRUE(t.requests[0].complete);
  EXPECT_EQ(t.non_streaming_requests, 1u);
}

TEST(TimelineH2, OutOfOrderDeliveryGivesIdenticalResults) {
  Stream s;
  s.h2(0, 7, LD_DIR_RECV, {}, true);
  for (uint32_t k = 0; k < 6; ++k) grpc_call(s, 7, 1 + 2 * k, 10.0 * k, 10.0 * k + 40, 8, 15);
  const Timeline ordered = build(s);
  ASSERT_EQ(ordered.requests.size(), 6u);
  for (unsigned seed = 1; seed <= 5; ++seed) expect_same(ordered, build(shuffled_within(s.events(), 2 * kMs, seed)));
}

// Each token carries the TCP state its send returned with: Nagle on or off, bytes still queued.
TEST(Timeline, TokensCarryTheirSendsTcpState) {
  Stream s;
  s.recv(0, 7, LD_PC_HTTP_REQUEST, 300);
  s.tcp_state(LD_TCP_READ, 0).send(0.1, 7, LD_PC_HTTP_RESPONSE, 120);
  s.tcp_state(LD_TCP_READ, 80).send(30, 7, LD_PC_SSE_DATA, 80);  // queued behind the headers' ACK
  s.tcp_state(LD_TCP_READ, 0).send(40, 7, LD_PC_SSE_DATA, 80);
  s.tcp_state(LD_TCP_READ | LD_TCP_NODELAY, 80).send(50, 7, LD_PC_SSE_DATA, 80);  // a full window, not Nagle
  s.tcp_state(0, 0).send(60, 7, LD_PC_SSE_DATA, 80);                              // not read (an old trace)
  s.send(60.5, 7, LD_PC_SSE_DONE, 20);
  const Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 1u);
  const Request& r = t.requests[0];
  ASSERT_EQ(r.token_tcp.size(), 4u);
  EXPECT_TRUE(ld::model::held_by_nagle(r.token_tcp[0]));
  EXPECT_TRUE(ld::model::nagle_on(r.token_tcp[1]));
  EXPECT_FALSE(ld::model::held_by_nagle(r.token_tcp[1]));
  EXPECT_FALSE(ld::model::nagle_on(r.token_tcp[2]));
  EXPECT_FALSE(ld::model::held_by_nagle(r.token_tcp[2]));
  EXPECT_EQ(r.token_tcp[3], 0);
}

// HTTP/2: a token is a DATA frame; its TCP state is that of the send that carried it, whichever
// of the two records came first.
TEST(Timeline, Http2TokensCarryTheirSendsTcpState) {
  Stream s;
  s.h2(0, 9, LD_DIR_RECV, {H2{LD_H2_HEADERS, 1, 0, 0, 90}});
  s.tcp_state(LD_TCP_READ, 0).h2(10, 9, LD_DIR_SEND, {H2{LD_H2_HEADERS, 1, 0, 0, 40}});
  s.tcp_state(LD_TCP_READ, 45).h2(20, 9, LD_DIR_SEND, {H2{LD_H2_DATA, 1, LD_PC_GRPC_MESSAGE}});
  s.tcp_state(LD_TCP_READ | LD_TCP_NODELAY, 0).h2(30, 9, LD_DIR_SEND, {H2{LD_H2_DATA, 1, LD_PC_GRPC_MESSAGE}});
  s.h2(31, 9, LD_DIR_SEND, {H2{LD_H2_HEADERS, 1, 0, LD_H2_FLAG_END_STREAM, 20}});
  std::vector<Event> events = s.events();
  std::reverse(events.begin(), events.end());  // frames before their send's record
  const Timeline t = build(events);
  ASSERT_EQ(t.requests.size(), 1u);
  ASSERT_EQ(t.requests[0].token_tcp.size(), 2u);
  EXPECT_TRUE(ld::model::held_by_nagle(t.requests[0].token_tcp[0]));
  EXPECT_FALSE(ld::model::nagle_on(t.requests[0].token_tcp[1]));
}

// WebSocket: the upgrade request is answered by the 101 and is not a request; each client message
// is one, and the server's data frames until the next message (or the close) are its tokens.
TEST(Timeline, WebSocketMessagesAreRequestsAndServerFramesTheirTokens) {
  Stream s;
  s.recv(0, 7, LD_PC_HTTP_REQUEST, 250);  // GET /ws, Upgrade: websocket
  s.send(0.5, 7, LD_PC_HTTP_SWITCH, 130);
  s.recv(10, 7, LD_PC_WS_CLIENT, 60);
  for (int i = 0; i < 3; ++i) s.send(40 + 20 * i, 7, LD_PC_WS_MESSAGE, 40);
  s.recv(200, 7, LD_PC_OTHER, 6);  // a ping
  s.recv(300, 7, LD_PC_WS_CLIENT, 80);
  for (int i = 0; i < 2; ++i) s.send(330 + 20 * i, 7, LD_PC_WS_MESSAGE, 40);
  s.close(400, 7);
  const Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_EQ(t.requests[0].id, "100:c1#1");
  EXPECT_EQ(t.requests[1].id, "100:c1#2");
  EXPECT_DOUBLE_EQ(t.requests[0].ttft_ms(), 30.0);
  EXPECT_EQ(t.requests[0].token_ns.size(), 3u);
  EXPECT_EQ(t.requests[0].input_bytes, 66u);
  EXPECT_EQ(t.requests[1].token_ns.size(), 2u);
  EXPECT_TRUE(t.requests[0].complete);
  EXPECT_TRUE(t.requests[1].complete);
  EXPECT_EQ(t.non_streaming_requests, 0u);
  EXPECT_EQ(t.connections, 1u);
}

// A connection upgraded before the trace: its first client frame makes it WebSocket; frames sent
// before that answered a message the trace did not see.
TEST(Timeline, WebSocketUpgradedBeforeTheTrace) {
  Stream s;
  s.send(0, 9, LD_PC_WS_MESSAGE, 40);
  s.send(20, 9, LD_PC_WS_MESSAGE, 40);
  s.recv(50, 9, LD_PC_WS_CLIENT, 60);
  s.send(70, 9, LD_PC_WS_MESSAGE, 40);
  s.send(90, 9, LD_PC_WS_MESSAGE, 40);
  const Timeline t = build(s);
  ASSERT_EQ(t.requests.size(), 1u);
  EXPECT_EQ(t.requests[0].token_ns.size(), 2u);
  EXPECT_DOUBLE_EQ(t.requests[0].ttft_ms(), 20.0);
  EXPECT_FALSE(t.requests[0].complete);  // the trace ended before a next message or a close
}
