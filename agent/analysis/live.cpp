#include "analysis/live.hpp"

#include "analysis/record_view.hpp"
#include "events.h"
#include "util/time.hpp"

namespace ld::analysis {

std::optional<LiveSample> LiveWatch::observe(const ld_hdr& rec, size_t size) {
  if (rec.type == LD_EV_SOCK_CLOSE) {
    if (auto* c = record_as<ld_sock_close>(rec, size)) streams_.erase(c->sock_id);
    return std::nullopt;
  }
  const auto* io_rec = rec.type == LD_EV_SOCK_IO ? record_as<ld_sock_io>(rec, size) : nullptr;
  if (!io_rec) return std::nullopt;
  const ld_sock_io& io = *io_rec;
  Stream& s = streams_[io.sock_id];
  if (io.dir == LD_DIR_RECV && io.cls == LD_PC_HTTP_REQUEST) {
    s = Stream{rec.ts_ns, 0, 0};
    return std::nullopt;
  }
  const bool token = io.dir == LD_DIR_SEND && (io.cls == LD_PC_SSE_DATA || io.cls == LD_PC_HTTP_RESPONSE_SSE);
  if (!token) {
    if (io.dir == LD_DIR_SEND && (io.cls == LD_PC_SSE_DONE || io.cls == LD_PC_CHUNK_END)) s = Stream{};
    return std::nullopt;
  }
  std::optional<LiveSample> sample;
  const uint64_t since = s.tokens == 0 ? s.request_ns : s.last_token_ns;
  if (since && rec.ts_ns > since)
    sample = LiveSample{s.tokens == 0, util::ns_to_ms(rec.ts_ns - since), rec.ts_ns, s.request_ns, s.tokens, rec.tid,
                        io.lport};
  s.last_token_ns = rec.ts_ns;
  s.tokens++;
  return sample;
}

uint64_t LiveWatch::oldest_open_request_ns() const {
  uint64_t oldest = 0;
  for (const auto& [sock, s] : streams_)
    if (s.request_ns && (!oldest || s.request_ns < oldest)) oldest = s.request_ns;
  return oldest;
}

}  // namespace ld::analysis
