#include "analysis/live.hpp"

#include <algorithm>

#include "analysis/record_view.hpp"
#include "events.h"
#include "util/time.hpp"

namespace ld::analysis {

std::optional<LiveSample> LiveWatch::observe(const ld_hdr& rec, size_t size) {
  sample_.reset();
  if (rec.type == LD_EV_SOCK_CLOSE) {
    if (auto* c = record_as<ld_sock_close>(rec, size)) {
      streams_.erase(streams_.lower_bound({c->sock_id, 0}), streams_.upper_bound({c->sock_id, UINT32_MAX}));
      tls_.on_close(c->sock_id);
    }
  } else if (rec.type == LD_EV_SOCK_IO) {
    if (auto* io = record_as<ld_sock_io>(rec, size)) tls_.on_sock(*io);
  } else if (rec.type == LD_EV_H2_FRAMES) {
    if (auto* h2 = record_as<ld_h2_frames>(rec, size)) {
      if (h2->tls) tls_.on_tls_frames(*h2);
      else on_h2(*h2);
    }
  } else if (rec.type == LD_EV_TLS_IO) {
    if (auto* tls = record_as<ld_tls_io>(rec, size)) tls_.on_tls(*tls);
  }
  return sample_;
}

void LiveWatch::on_io(const ld_sock_io& io) {
  if (io.cls == LD_PC_H2) return;  // its streams come in the ld_h2_frames record after it
  Stream& s = streams_[{io.sock_id, 0}];
  if (io.dir == LD_DIR_RECV && io.cls == LD_PC_HTTP_REQUEST) {
    s = Stream{io.hdr.ts_ns, 0, 0};
    return;
  }
  const bool token = io.dir == LD_DIR_SEND && (io.cls == LD_PC_SSE_DATA || io.cls == LD_PC_HTTP_RESPONSE_SSE);
  if (!token) {
    if (io.dir == LD_DIR_SEND && (io.cls == LD_PC_SSE_DONE || io.cls == LD_PC_CHUNK_END)) s = Stream{};
    return;
  }
  on_token(io.sock_id, 0, io.hdr, io.lport);
}

void LiveWatch::on_h2(const ld_h2_frames& h2) {
  std::optional<LiveSample> longest;
  for (unsigned i = 0; i < std::min<unsigned>(h2.count, LD_H2_MAX_FRAMES); ++i) {
    const ld_h2_frame& f = h2.f[i];
    const StreamKey key{h2.sock_id, f.stream_id};
    if (h2.dir == LD_DIR_RECV) {
      if (f.type == LD_H2_HEADERS && !streams_.count(key)) streams_[key] = Stream{h2.hdr.ts_ns, 0, 0};
      if (f.type == LD_H2_RST_STREAM) streams_.erase(key);
      continue;
    }
    if (f.type == LD_H2_DATA && (f.cls == LD_PC_GRPC_MESSAGE || f.cls == LD_PC_SSE_DATA)) {
      on_token(h2.sock_id, f.stream_id, h2.hdr, h2.lport);
      if (sample_ && (!longest || sample_->ms > longest->ms)) longest = sample_;
    }
    if ((f.flags & LD_H2_FLAG_END_STREAM) || f.type == LD_H2_RST_STREAM) streams_.erase(key);
  }
  sample_ = longest;
}

void LiveWatch::on_token(uint64_t sock_id, uint32_t stream, const ld_hdr& hdr, uint16_t port) {
  Stream& s = streams_[{sock_id, stream}];
  const uint64_t since = s.tokens == 0 ? s.request_ns : s.last_token_ns;
  sample_.reset();
  if (since && hdr.ts_ns > since)
    sample_ =
        LiveSample{s.tokens == 0, util::ns_to_ms(hdr.ts_ns - since), hdr.ts_ns, s.request_ns, s.tokens, hdr.tid, port};
  s.last_token_ns = hdr.ts_ns;
  s.tokens++;
}

uint64_t LiveWatch::oldest_open_request_ns() const {
  uint64_t oldest = 0;
  for (const auto& [sock, s] : streams_)
    if (s.request_ns && (!oldest || s.request_ns < oldest)) oldest = s.request_ns;
  return oldest;
}

}  // namespace ld::analysis
