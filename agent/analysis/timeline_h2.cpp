// The HTTP/2 side of the socket timeline: one connection's streams as requests.
#include <algorithm>
#include <map>
#include <set>

#include "analysis/timeline_segments.hpp"

namespace ld::analysis::timeline_detail {

using model::Request;

namespace {

// An HTTP/2 connection: requests are streams, answered in any order. Streams the target opened
// itself (its first frame on them a send) are the target's own requests as a client; a stream
// only seen from the middle (begun before the trace) counts as partial when it carried tokens.
class H2ConnectionMachine {
 public:
  explicit H2ConnectionMachine(const Segment& seg) : result_(result_for(seg)) {}

  void on_event(const Item& ev) {
    if (ev.kind == ItemKind::kIo) {
      if (ev.dir == LD_DIR_SEND) send_at_[ev.ts] = {ev.syscall, ev.tcp};
      return;
    }
    if (ev.kind != ItemKind::kH2Frame || ev.syscall == kH2Preface) return;
    const auto stream = static_cast<uint32_t>(ev.ret);
    if (ev.dir == LD_DIR_RECV) {
      on_recv(ev, stream);
    } else {
      on_send(ev, stream);
    }
  }

  SegmentResult finish(EndReason why) {
    while (!open_.empty()) finalize(open_.begin(), why);
    // A send's record and its frames' share a stamp; either may come first.
    for (uint64_t ts : token_sends_) {
      auto sc = send_at_.find(ts);
      ++result_.send_syscalls[sc == send_at_.end() ? uint8_t{LD_SC_WRITE} : sc->second.syscall];
    }
    for (Numbered& n : result_.requests) {
      std::vector<uint8_t>& tcp = n.request.token_tcp;
      tcp.clear();
      for (uint64_t ts : n.request.token_ns) {
        auto sc = send_at_.find(ts);
        tcp.push_back(sc == send_at_.end() ? uint8_t{0} : sc->second.tcp);
      }
    }
    result_.partial += partial_streams_.size();
    result_.served = served_;
    result_.client = client_ && !served_;
    return std::move(result_);
  }

 private:
  struct Stream {
    Request request;
    uint64_t n = 0;
    bool response_started = false;
  };
  using Open = std::map<uint32_t, Stream>::iterator;

  static uint32_t payload_len(const Item& ev) { return ev.h2 & 0xFFFFFF; }
  static bool ends_stream(const Item& ev) { return (ev.h2 >> 24) & LD_H2_FLAG_END_STREAM; }

  void on_recv(const Item& ev, uint32_t stream) {
    auto it = open_.find(stream);
    if (sent_first_.count(stream)) {
      if (ev.syscall == LD_H2_HEADERS) client_ = true;  // the answer to the target's own request
      return;
    }
    if (ev.syscall == LD_H2_RST_STREAM) {
      if (it != open_.end()) finalize(it, EndReason::kPeerEof);
      return;
    }
    if (it != open_.end()) {
      it->second.request.input_bytes += payload_len(ev);
      return;
    }
    if (ev.syscall != LD_H2_HEADERS) return;  // the body of a stream begun before the trace
    served_ = true;
    Stream st;
    st.n = ++requests_started_;
    st.request.tgid = result_.tgid;
    st.request.start_ns = ev.ts;
    st.request.input_bytes = payload_len(ev);
    st.request.client_port = ev.rport;
    open_.emplace(stream, std::move(st));
  }

  void on_send(const Item& ev, uint32_t stream) {
    const bool token = ev.syscall == LD_H2_DATA && is_h2_token_class(ev.cls);
    if (sent_first_.count(stream)) return;  // the target's own request (its body)
    if (token) {
      token_sends_.insert(ev.ts);
      if (ev.sse_events > 1) ++result_.multi_event_sends;
    }
    auto it = open_.find(stream);
    if (it == open_.end()) {
      if (token) {
        partial_streams_.insert(stream);
        served_ = true;
      } else if (ev.syscall == LD_H2_HEADERS && !partial_streams_.count(stream)) {
        sent_first_.insert(stream);  // a stream the target opened, or answered from before the trace
      }
      return;
    }
    Stream& st = it->second;
    st.request.end_ns = std::max(st.request.end_ns, ev.ts);
    if (ev.syscall == LD_H2_RST_STREAM) {
      finalize(it, EndReason::kPeerEof);
      return;
    }
    st.response_started = true;
    if (token) {
      st.request.token_ns.push_back(ev.ts);
      st.request.token_tid.push_back(ev.tid);
      auto& events = st.request.token_events;
      if (ev.sse_events > 1 && events.empty()) events.assign(st.request.token_ns.size() - 1, 1);
      if (!events.empty()) events.push_back(std::max<uint16_t>(1, ev.sse_events));
    }
    if (ends_stream(ev) || (ev.syscall == LD_H2_DATA && ev.cls == LD_PC_SSE_DONE)) {
      st.request.complete = true;
      finalize(it, EndReason::kNextResponse);
    }
  }

  // A stream ends complete only on its END_STREAM (or "[DONE]"): a close or reset cuts it.
  void finalize(Open it, EndReason why) {
    Stream st = std::move(it->second);
    open_.erase(it);
    if (!st.request.token_ns.empty()) {
      result_.requests.push_back(Numbered{st.n, std::move(st.request)});
    } else if (why == EndReason::kTraceEnd && !st.response_started) {
      ++result_.in_flight;
    } else {
      ++result_.non_streaming;
    }
  }

  SegmentResult result_;
  std::map<uint32_t, Stream> open_;
  std::set<uint32_t> sent_first_;       // streams whose first frame seen was the target's send
  std::set<uint32_t> partial_streams_;  // tokens on streams whose request came before the trace
  std::set<uint64_t> token_sends_;      // stamps of sends that carried a token
  struct Send {
    uint8_t syscall = 0;
    uint8_t tcp = 0;  // model::TcpSendBits
  };
  std::map<uint64_t, Send> send_at_;  // each send's syscall and TCP state, by stamp
  uint64_t requests_started_ = 0;
  bool served_ = false;
  bool client_ = false;
};

}  // namespace

bool is_h2_segment(const Segment& seg) {
  return std::any_of(seg.ios.begin(), seg.ios.end(), [](const Item& ev) { return ev.kind == ItemKind::kH2Frame; });
}

SegmentResult run_h2_segment(const Segment& seg) {
  H2ConnectionMachine machine(seg);
  for (const Item& ev : seg.ios) machine.on_event(ev);
  return machine.finish(seg.end);
}

}  // namespace ld::analysis::timeline_detail
