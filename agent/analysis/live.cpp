#include "analysis/live.hpp"

#include "analysis/record_view.hpp"
#include "events.h"
#include "util/time.hpp"

namespace ld::analysis {

std::optional<LiveSample> LiveWatch::observe(const ld_hdr& rec, size_t size) {
  sample_.reset();
  if (rec.type == LD_EV_SOCK_CLOSE) {
    if (auto* c = record_as<ld_sock_close>(rec, size)) {
      streams_.erase(c->sock_id);
      tls_.on_close(c->sock_id);
    }
  } else if (rec.type == LD_EV_SOCK_IO) {
    if (auto* io = record_as<ld_sock_io>(rec, size)) tls_.on_sock(*io);
  } else if (rec.type == LD_EV_TLS_IO) {
    if (auto* tls = record_as<ld_tls_io>(rec, size)) tls_.on_tls(*tls);
  }
  return sample_;
}

void LiveWatch::on_io(const ld_sock_io& io) {
  Stream& s = streams_[io.sock_id];
  if (io.dir == LD_DIR_RECV && io.cls == LD_PC_HTTP_REQUEST) {
    s = Stream{io.hdr.ts_ns, 0, 0};
    return;
  }
  const bool token = io.dir == LD_DIR_SEND && (io.cls == LD_PC_SSE_DATA || io.cls == LD_PC_HTTP_RESPONSE_SSE);
  if (!token) {
    if (io.dir == LD_DIR_SEND && (io.cls == LD_PC_SSE_DONE || io.cls == LD_PC_CHUNK_END)) s = Stream{};
    return;
  }
  const uint64_t since = s.tokens == 0 ? s.request_ns : s.last_token_ns;
  if (since && io.hdr.ts_ns > since)
    sample_ = LiveSample{
        s.tokens == 0, util::ns_to_ms(io.hdr.ts_ns - since), io.hdr.ts_ns, s.request_ns, s.tokens, io.hdr.tid,
        io.lport};
  s.last_token_ns = io.hdr.ts_ns;
  s.tokens++;
}

uint64_t LiveWatch::oldest_open_request_ns() const {
  uint64_t oldest = 0;
  for (const auto& [sock, s] : streams_)
    if (s.request_ns && (!oldest || s.request_ns < oldest)) oldest = s.request_ns;
  return oldest;
}

}  // namespace ld::analysis
