#include "analysis/tls_join.hpp"

#include <algorithm>

#include "util/time.hpp"

namespace ld::analysis {
namespace {

// A plaintext write older than this when its thread next sends went out another way (another
// thread's send, a connection closed meanwhile): it does not name that send.
constexpr uint64_t kWriteToSendNs = util::kNsPerSec;
// Writes kept per thread at most between two sends (a thread that writes TLS and sends nothing).
constexpr size_t kMaxWrites = 64;

bool is_status_line(uint8_t cls) { return cls == LD_PC_HTTP_RESPONSE || cls == LD_PC_HTTP_RESPONSE_SSE; }
bool is_token(uint8_t cls) { return cls == LD_PC_SSE_DATA || cls == LD_PC_HTTP_RESPONSE_SSE; }

}  // namespace

// Passes on the thread's held receive; `claimed`: a TLS read said what it carried.
void TlsJoin::release(Thread& t, bool claimed) {
  if (!t.held) return;
  if (claimed) tls_sockets_.insert(t.held->sock_id);
  if (claimed || !tls_sockets_.count(t.held->sock_id)) out_(*t.held);
  else ++dropped_;
  t.held.reset();
}

// The class of what the writes carried, as the kernel would have classified their bytes in one
// send: a status line with a token is a status line and token; else the first write's class
// that says something; SSE events summed.
void TlsJoin::give_writes(Thread& t, ld_sock_io& send) {
  std::erase_if(t.writes, [&](const ld_tls_io& w) { return w.hdr.ts_ns + kWriteToSendNs < send.hdr.ts_ns; });
  if (t.writes.empty()) return;
  bool status = false, token = false;
  uint8_t first = LD_PC_OTHER;
  unsigned events = 0;
  for (const ld_tls_io& w : t.writes) {
    status |= is_status_line(w.cls);
    token |= is_token(w.cls);
    if (first == LD_PC_OTHER) first = w.cls;
    events += w.sse_events;
  }
  send.cls = status && token ? static_cast<uint8_t>(LD_PC_HTTP_RESPONSE_SSE) : first;
  send.sse_events = static_cast<uint8_t>(std::min(events, 255u));
  t.writes.clear();
  const Carrier to{send.sock_id, send.hdr.ts_ns, send.rport, send.lport};
  for (const ld_h2_frames& h2 : t.h2_writes)
    if (h2.hdr.ts_ns + kWriteToSendNs >= send.hdr.ts_ns) emit_frames(h2, to, send.hdr.ts_ns);
  t.h2_writes.clear();
  tls_sockets_.insert(send.sock_id);
  ++joined_;
}

void TlsJoin::on_sock(const ld_sock_io& io) {
  auto it = threads_.find(io.hdr.tid);
  Thread* t = it == threads_.end() ? nullptr : &it->second;
  if (t) release(*t);
  const bool unclassified = io.cls == LD_PC_OTHER;
  if (io.dir == LD_DIR_RECV && unclassified && io.ret > 0) {
    (t ? *t : threads_[io.hdr.tid]).held = io;
    return;
  }
  if (io.dir == LD_DIR_SEND && unclassified && t && !t->writes.empty()) {
    ld_sock_io joined = io;
    give_writes(*t, joined);
    out_(joined);
  } else {
    out_(io);
  }
  // Nothing left of the thread: forget it (a server may start a thread per request).
  if (t && t->idle()) threads_.erase(it);
}

void TlsJoin::on_tls(const ld_tls_io& tls) {
  ++plaintext_records_;
  Thread& t = threads_[tls.hdr.tid];
  if (tls.dir == LD_DIR_SEND) {
    if (t.writes.size() < kMaxWrites) t.writes.push_back(tls);
    return;
  }
  // A read's plaintext of no class is still data (a request body in a record of its own).
  const bool claimed = t.held && t.held->hdr.ts_ns <= tls.hdr.ts_ns;
  if (claimed && tls.cls != LD_PC_OTHER) {
    t.held->cls = tls.cls;
    t.held->sse_events = tls.sse_events;
    ++joined_;
  }
  if (claimed) carrier_of_ssl_[tls.ssl_id] = {t.held->sock_id, t.held->hdr.ts_ns, t.held->rport, t.held->lport};
  if (tls.cls == LD_PC_H2) last_read_[tls.hdr.tid] = {tls.ssl_id, claimed ? t.held->hdr.ts_ns : 0};
  release(t, claimed);
  if (t.idle()) threads_.erase(tls.hdr.tid);
}

void TlsJoin::on_tls_frames(const ld_h2_frames& h2) {
  if (h2.dir == LD_DIR_SEND) {
    Thread& t = threads_[h2.hdr.tid];
    if (t.h2_writes.size() < kMaxWrites) t.h2_writes.push_back(h2);
    return;
  }
  // A read's frames: at the receive its plaintext was given to (just before, on this thread), or
  // at the read itself, on its connection's socket, when OpenSSL had the bytes already.
  auto read = last_read_.find(h2.hdr.tid);
  if (read == last_read_.end()) return;
  const LastRead last = read->second;
  last_read_.erase(read);
  auto carrier = carrier_of_ssl_.find(last.ssl_id);
  if (carrier == carrier_of_ssl_.end()) return;
  emit_frames(h2, carrier->second, last.claimed_ns ? last.claimed_ns : h2.hdr.ts_ns);
}

void TlsJoin::emit_frames(ld_h2_frames h2, const Carrier& to, uint64_t ts_ns) {
  if (!out_frames_) return;
  h2.hdr.ts_ns = ts_ns;
  h2.sock_id = to.sock_id;
  h2.rport = to.rport;
  h2.lport = to.lport;
  h2.tls = 0;  // now a socket's, as the sock probe's
  out_frames_(h2);
}

void TlsJoin::on_close(uint64_t sock_id) {
  // A receive held on it (the close_notify alert before the close) is judged while the socket is
  // still known: before the close, and as TLS.
  for (auto it = threads_.begin(); it != threads_.end();) {
    if (it->second.held && it->second.held->sock_id == sock_id) release(it->second);
    it = it->second.idle() ? threads_.erase(it) : std::next(it);
  }
  tls_sockets_.erase(sock_id);
  std::erase_if(carrier_of_ssl_, [&](const auto& kv) { return kv.second.sock_id == sock_id; });
}

void TlsJoin::finish() {
  for (auto& [tid, t] : threads_) release(t);
}

}  // namespace ld::analysis
