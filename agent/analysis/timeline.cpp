#include "analysis/timeline.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <limits>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "analysis/timeline_segments.hpp"
#include "events.h"
#include "util/big_vector.hpp"

namespace ld::analysis {

using namespace model;
using namespace timeline_detail;

std::string io_syscall_name(unsigned syscall) {
  switch (syscall) {
    case LD_SC_READ: return "read";
    case LD_SC_WRITE: return "write";
    case LD_SC_READV: return "readv";
    case LD_SC_WRITEV: return "writev";
    case LD_SC_SENDTO: return "sendto";
    case LD_SC_RECVFROM: return "recvfrom";
    case LD_SC_SENDMSG: return "sendmsg";
    case LD_SC_RECVMSG: return "recvmsg";
    default: return "syscall#" + std::to_string(syscall);
  }
}

namespace {

// The target is the HTTP client on this connection: it sends request lines or receives status
// lines. Such connections (a proxy's upstream, a health checker) are not measured.
bool is_client_segment(const Segment& seg) {
  for (const Item& ev : seg.ios) {
    if (ev.kind == ItemKind::kH2Frame) {
      if (ev.dir == LD_DIR_SEND && ev.syscall == kH2Preface) return true;
      continue;
    }
    if (ev.dir == LD_DIR_SEND && ev.cls == LD_PC_HTTP_REQUEST) return true;
    if (ev.dir == LD_DIR_RECV && is_status_line_class(ev.cls)) return true;
  }
  return false;
}

// The per-connection state machine. Requests wait in `pending_` in arrival order: HTTP/1.1
// answers in order, so the front is the one the sends belong to (this also copes with the rare
// pipelining client). Sends seen while no request is known belong to a response whose request
// arrived before the trace began ("orphan"); its tokens count as a partial request.
class ConnectionMachine {
 public:
  explicit ConnectionMachine(const Segment& seg) : result_(result_for(seg)) {}

  void on_event(const Item& ev) {
    if (!websocket_ && starts_websocket(ev)) begin_websocket(ev);
    if (websocket_) {
      on_websocket(ev);
    } else if (ev.dir == LD_DIR_RECV) {
      on_recv(ev);
    } else {
      on_send(ev);
    }
  }

  SegmentResult finish(EndReason why) {
    close_orphan();
    while (!pending_.empty()) finalize_front(why);
    result_.served = served_;
    return std::move(result_);
  }

 private:
  struct Pending {
    Request request;
    uint64_t n = 0;
    bool response_started = false;  // a status line or a token was sent for it
    bool ended = false;             // "[DONE]" or the chunked terminator was sent
  };

  // WebSocket (RFC 6455): the connection switches when the target answers 101, or (a connection
  // upgraded before the trace) when a client's masked frame arrives. Each client message is a
  // request; the server's data frames until the next one are its tokens. Nothing marks a
  // response's end, so the next message or the close ends it.
  static bool starts_websocket(const Item& ev) {
    return (ev.dir == LD_DIR_SEND && ev.cls == LD_PC_HTTP_SWITCH) ||
           (ev.dir == LD_DIR_RECV && ev.cls == LD_PC_WS_CLIENT);
  }

  void begin_websocket(const Item& ev) {
    websocket_ = served_ = true;
    close_orphan();
    if (ev.cls == LD_PC_HTTP_SWITCH) {
      // The upgrade request is answered by the 101: not a streaming request, and not counted.
      requests_started_ -= pending_.size();
      pending_.clear();
    }
    while (!pending_.empty()) finalize_front(EndReason::kNextResponse);
  }

  void on_websocket(const Item& ev) {
    if (ev.dir == LD_DIR_RECV) {
      if (ev.cls == LD_PC_WS_CLIENT) {
        while (!pending_.empty()) finalize_front(EndReason::kNextResponse);
        start_request(ev);
      } else if (!pending_.empty()) {
        pending_.back().request.input_bytes += static_cast<uint64_t>(ev.ret);  // continuation, control
      }
      return;
    }
    if (ev.cls != LD_PC_WS_MESSAGE) return;
    count_token_send(ev);
    if (pending_.empty()) {  // answering a message from before the trace
      orphan_open_ = true;
      ++orphan_tokens_;
      return;
    }
    Pending& p = pending_.front();
    p.request.end_ns = std::max(p.request.end_ns, ev.ts);
    p.response_started = true;
    add_token(p.request, ev);
  }

  static void add_token(Request& r, const Item& ev) {
    r.token_ns.push_back(ev.ts);
    r.token_tid.push_back(ev.tid);
    r.token_tcp.push_back(ev.tcp);
    // Events per send are kept only once a send carries several (rare: most servers send one).
    auto& events = r.token_events;
    if (ev.sse_events > 1 && events.empty()) events.assign(r.token_ns.size() - 1, 1);
    if (!events.empty()) events.push_back(std::max<uint16_t>(1, ev.sse_events));
  }

  void on_recv(const Item& ev) {
    if (ev.cls == LD_PC_HTTP_REQUEST) {
      served_ = true;
      on_request_line(ev);
      return;
    }
    if (!pending_.empty()) {
      Pending& last = pending_.back();
      // The body of a request arrives after its request line, before any answer.
      if (!last.ended && last.request.token_ns.empty()) {
        last.request.input_bytes += static_cast<uint64_t>(ev.ret);
        return;
      }
    }
    // Bytes after a finished (or streaming) response: a request whose first bytes the kernel
    // could not classify (unknown method, request line split across reads). Before the
    // connection is known to be served this may be the tail of a request that began before the
    // trace: ignore it.
    if (served_) {
      close_orphan();
      start_request(ev);
    }
  }

  void on_request_line(const Item& ev) {
    close_orphan();
    while (!pending_.empty() && pending_.front().ended) finalize_front(EndReason::kNextResponse);
    // Keep-alive without an end marker (Content-Length body): the next request ends it.
    if (pending_.size() == 1 && pending_.front().response_started) {
      finalize_front(EndReason::kNextResponse);
    }
    start_request(ev);
  }

  void start_request(const Item& ev) {
    Pending p;
    p.n = ++requests_started_;
    p.request.tgid = result_.tgid;
    p.request.start_ns = ev.ts;
    p.request.input_bytes = static_cast<uint64_t>(ev.ret);
    p.request.client_port = ev.rport;
    pending_.push_back(std::move(p));
  }

  void on_send(const Item& ev) {
    if (is_token_class(ev.cls)) count_token_send(ev);
    if (is_token_class(ev.cls) || is_status_line_class(ev.cls)) served_ = true;
    Pending* answering = request_answered_by(ev.cls);
    if (answering == nullptr) {
      on_orphan_send(ev);
    } else {
      apply_send(*answering, ev);
    }
  }

  // The pending request a send of class `cls` belongs to (nullptr: none known).
  Pending* request_answered_by(uint8_t cls) {
    const bool opens_content = is_status_line_class(cls) || is_token_class(cls);
    if (!pending_.empty() && pending_.front().ended && opens_content) {
      finalize_front(EndReason::kNextResponse);
    } else if (pending_.size() > 1 && is_status_line_class(cls) && pending_.front().response_started) {
      // A second status line while requests queue: the front's body had no end marker.
      finalize_front(EndReason::kNextResponse);
    }
    // Framing after "[DONE]" (the chunked terminator) still belongs to the ended response.
    return pending_.empty() ? nullptr : &pending_.front();
  }

  void apply_send(Pending& p, const Item& ev) {
    p.request.end_ns = std::max(p.request.end_ns, ev.ts);
    if (p.ended) return;  // trailing framing of a finished response
    if (is_status_line_class(ev.cls)) p.response_started = true;
    if (is_token_class(ev.cls)) {
      p.response_started = true;
      add_token(p.request, ev);
    }
    if (is_end_marker_class(ev.cls)) {
      p.ended = true;
      p.request.complete = true;
    }
  }

  void on_orphan_send(const Item& ev) {
    if (is_status_line_class(ev.cls)) {
      close_orphan();
      orphan_open_ = true;
    }
    if (is_token_class(ev.cls)) {
      orphan_open_ = true;
      ++orphan_tokens_;
    }
    if (is_end_marker_class(ev.cls)) close_orphan();
  }

  void close_orphan() {
    if (orphan_open_ && orphan_tokens_ > 0) ++result_.partial;
    orphan_open_ = false;
    orphan_tokens_ = 0;
  }

  void count_token_send(const Item& ev) {
    ++result_.send_syscalls[ev.syscall];
    if (ev.sse_events > 1) ++result_.multi_event_sends;
  }

  void finalize_front(EndReason why) {
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    const bool answered = p.response_started || p.ended;
    if (answered && !p.request.complete) {
      p.request.complete = why == EndReason::kNextResponse || why == EndReason::kClose;
    }
    if (!p.request.token_ns.empty()) {
      result_.requests.push_back(Numbered{p.n, std::move(p.request)});
    } else if (why == EndReason::kTraceEnd && !answered) {
      ++result_.in_flight;
    } else {
      // Includes a response whose headers went out but whose first token had not when the
      // trace ended (llama.cpp sends headers before prefill): indistinguishable from a
      // non-streaming answer with a Content-Length body.
      ++result_.non_streaming;
    }
  }

  SegmentResult result_;
  std::deque<Pending> pending_;
  uint64_t requests_started_ = 0;
  bool served_ = false;
  bool websocket_ = false;
  bool orphan_open_ = false;
  uint64_t orphan_tokens_ = 0;
};

SegmentResult run_segment(const Segment& seg) {
  if (is_client_segment(seg)) {
    SegmentResult r;
    r.tgid = seg.tgid;
    r.client = true;
    return r;
  }
  if (is_h2_segment(seg)) return run_h2_segment(seg);
  ConnectionMachine machine(seg);
  for (const Item& ev : seg.ios) machine.on_event(ev);
  return machine.finish(seg.end);
}

// Splits one socket's time-ordered events at closes, peer EOFs and process exits.
std::vector<Segment> split_segments(const SocketKey& key, const util::BigVector<Item>& items) {
  std::vector<Segment> segments;
  Segment current;
  bool open = false;
  auto begin_if_needed = [&](uint64_t ts) {
    if (open) return;
    current = Segment{};
    current.tgid = key.first;
    current.sock_id = key.second;
    current.first_ts = ts;
    open = true;
  };
  auto end_with = [&](EndReason why) {
    if (!open) return;
    current.end = why;
    segments.push_back(std::move(current));
    open = false;
  };
  for (const Item& ev : items) {
    switch (ev.kind) {
      case ItemKind::kClose: end_with(EndReason::kClose); break;
      case ItemKind::kProcessExit: end_with(EndReason::kProcessExit); break;
      case ItemKind::kH2Frame:
        begin_if_needed(ev.ts);
        current.ios.push_back(ev);
        break;
      case ItemKind::kIo:
        if (ev.dir == LD_DIR_RECV && ev.ret == 0) {
          end_with(EndReason::kPeerEof);
        } else if (ev.ret > 0) {  // -EAGAIN and other errors moved no bytes
          begin_if_needed(ev.ts);
          current.ios.push_back(ev);
        }
        break;
    }
  }
  end_with(EndReason::kTraceEnd);
  return segments;
}

// Connections are numbered per process in the order they started, so ids do not depend on
// the order records arrived in.
void assign_request_ids(std::vector<SegmentResult>& served) {
  std::sort(served.begin(), served.end(), [](const SegmentResult& a, const SegmentResult& b) {
    return std::tie(a.tgid, a.first_ts, a.sock_id) < std::tie(b.tgid, b.first_ts, b.sock_id);
  });
  uint32_t tgid = 0;
  uint64_t conn = 0;
  for (size_t i = 0; i < served.size(); ++i) {
    if (i == 0 || served[i].tgid != tgid) {
      tgid = served[i].tgid;
      conn = 0;
    }
    ++conn;
    for (Numbered& r : served[i].requests) {
      r.request.id = std::to_string(tgid) + ":c" + std::to_string(conn) + "#" + std::to_string(r.n);
      r.request.index_on_connection = static_cast<uint32_t>(r.n);
    }
  }
}

}  // namespace

struct SocketTimelineBuilder::Impl {
  // Only sockets that have shown HTTP/SSE traffic are kept: events of a socket that so far
  // carried only unclassified bytes (IPC between an API process and its engine, database
  // connections, the stress workload) can never change a request, and keeping them would make
  // memory grow with the event rate instead of with the number of requests.
  std::map<SocketKey, util::BigVector<Item>> sockets;
  struct KeyHash {
    size_t operator()(const SocketKey& k) const noexcept {
      return std::hash<uint64_t>{}(k.second * 0x9E3779B97F4A7C15ULL ^ k.first);
    }
  };
  std::unordered_map<SocketKey, util::BigVector<Item>*, KeyHash> index;  // into `sockets`
  uint64_t unclassified_dropped = 0;
  uint64_t h2_unseen_frames = 0;                            // HTTP/2 sends or receives with frames past the bytes read
  std::map<uint32_t, std::vector<uint64_t>> process_exits;  // tgid -> exit times
  bool finished = false;
};

SocketTimelineBuilder::SocketTimelineBuilder() : impl_(std::make_unique<Impl>()) {}
SocketTimelineBuilder::~SocketTimelineBuilder() = default;

void SocketTimelineBuilder::add(const ld_sock_io& ev) {
  Item item;
  item.ts = ev.hdr.ts_ns;
  item.ret = ev.ret;
  item.tid = ev.hdr.tid;
  item.kind = ItemKind::kIo;
  item.dir = ev.dir;
  item.syscall = ev.syscall;
  item.cls = ev.cls;
  item.sse_events = ev.sse_events;
  item.tcp = tcp_bits(ev);
  item.rport = ev.rport;
  SocketKey key{ev.hdr.tgid, ev.sock_id};
  // Found through a hash index (the ordered map is for finish(), which walks sockets in order):
  // a search of the map per event was ~5% of reading a trace. Map values never move.
  auto found = impl_->index.find(key);
  if (found == impl_->index.end()) {
    if (ev.cls == LD_PC_OTHER) {
      impl_->unclassified_dropped++;
      return;
    }
    auto* items = &impl_->sockets.emplace(key, util::BigVector<Item>{}).first->second;
    found = impl_->index.emplace(key, items).first;
  }
  found->second->push_back(item);
}

void SocketTimelineBuilder::add(const ld_h2_frames& ev) {
  const SocketKey key{ev.hdr.tgid, ev.sock_id};
  auto found = impl_->index.find(key);
  if (found == impl_->index.end()) {
    auto* items = &impl_->sockets.emplace(key, util::BigVector<Item>{}).first->second;
    found = impl_->index.emplace(key, items).first;
  }
  if (ev.more) impl_->h2_unseen_frames++;
  auto item_of = [&](uint8_t type) {
    Item item;
    item.ts = ev.hdr.ts_ns;
    item.tid = ev.hdr.tid;
    item.kind = ItemKind::kH2Frame;
    item.dir = ev.dir;
    item.syscall = type;
    item.rport = ev.rport;
    return item;
  };
  if (ev.preface) found->second->push_back(item_of(kH2Preface));
  const unsigned count = std::min<unsigned>(ev.count, LD_H2_MAX_FRAMES);
  for (unsigned i = 0; i < count; ++i) {
    const ld_h2_frame& f = ev.f[i];
    Item item = item_of(f.type);
    item.ret = f.stream_id;
    item.cls = f.cls;
    item.sse_events = f.messages;
    item.h2 = static_cast<uint32_t>(f.flags) << 24 | std::min<uint32_t>(f.len, 0xFFFFFF);
    found->second->push_back(item);
  }
}

void SocketTimelineBuilder::add(const ld_sock_close& ev) {
  Item item;
  item.ts = ev.hdr.ts_ns;
  item.tid = ev.hdr.tid;
  item.kind = ItemKind::kClose;
  auto it = impl_->index.find({ev.hdr.tgid, ev.sock_id});
  if (it != impl_->index.end()) it->second->push_back(item);  // else: never interesting
}

void SocketTimelineBuilder::add(const ld_task_exit& ev) {
  if (ev.is_process == 0) return;  // a worker thread ending does not end connections
  impl_->process_exits[ev.hdr.tgid].push_back(ev.hdr.ts_ns);
}

Timeline SocketTimelineBuilder::finish() {
  Timeline timeline;
  if (impl_->finished) return timeline;
  impl_->finished = true;

  std::vector<SegmentResult> served;
  for (auto& [key, items] : impl_->sockets) {
    auto exits = impl_->process_exits.find(key.first);
    if (exits != impl_->process_exits.end()) {
      for (uint64_t ts : exits->second) {
        Item exit_item;
        exit_item.ts = ts;
        exit_item.kind = ItemKind::kProcessExit;
        items.push_back(exit_item);
      }
    }
    // Stable: records with equal stamps keep their arrival order. Usually already in order.
    auto by_time = [](const Item& a, const Item& b) { return a.ts < b.ts; };
    if (!std::is_sorted(items.begin(), items.end(), by_time)) std::stable_sort(items.begin(), items.end(), by_time);
    for (const Segment& seg : split_segments(key, items)) {
      SegmentResult r = run_segment(seg);
      if (r.client) {
        ++timeline.client_connections;
        continue;
      }
      // Partial responses and counters come from served connections only; the check is cheap
      // and keeps garbage (an unclassified socket) out of every number.
      if (!r.served) continue;
      served.push_back(std::move(r));
    }
    util::BigVector<Item>().swap(items);  // release as we go
  }

  assign_request_ids(served);
  timeline.connections = served.size();
  timeline.h2_unseen_frames = impl_->h2_unseen_frames;
  for (SegmentResult& r : served) {
    timeline.non_streaming_requests += r.non_streaming;
    timeline.partial_requests += r.partial;
    timeline.in_flight_requests += r.in_flight;
    timeline.multi_event_sends += r.multi_event_sends;
    for (size_t nr = 0; nr < r.send_syscalls.size(); ++nr)
      if (r.send_syscalls[nr])
        timeline.send_syscalls[io_syscall_name(static_cast<unsigned>(nr))] += r.send_syscalls[nr];
    for (Numbered& n : r.requests) timeline.requests.push_back(std::move(n.request));
  }
  std::sort(timeline.requests.begin(), timeline.requests.end(), [](const Request& a, const Request& b) {
    return std::tie(a.start_ns, a.tgid, a.id) < std::tie(b.start_ns, b.tgid, b.id);
  });
  return timeline;
}

}  // namespace ld::analysis
