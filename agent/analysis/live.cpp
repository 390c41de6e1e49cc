#include "analysis/live.hpp"

#include <fmt/format.h>

#include "analysis/record_view.hpp"
#include "events.h"
#include "util/time.hpp"

namespace ld::analysis {

std::string LiveWatch::on_record(const ld_hdr& rec, size_t size) {
  if (rec.type == LD_EV_SOCK_CLOSE) {
    if (auto* c = record_as<ld_sock_close>(rec, size)) streams_.erase(c->sock_id);
    return "";
  }
  const auto* io_rec = rec.type == LD_EV_SOCK_IO ? record_as<ld_sock_io>(rec, size) : nullptr;
  if (!io_rec) return "";
  const ld_sock_io& io = *io_rec;
  Stream& s = streams_[io.sock_id];
  if (io.dir == LD_DIR_RECV && io.cls == LD_PC_HTTP_REQUEST) {
    s = Stream{rec.ts_ns, 0, 0};
    return "";
  }
  const bool token = io.dir == LD_DIR_SEND && (io.cls == LD_PC_SSE_DATA || io.cls == LD_PC_HTTP_RESPONSE_SSE);
  if (!token) {
    if (io.dir == LD_DIR_SEND && (io.cls == LD_PC_SSE_DONE || io.cls == LD_PC_CHUNK_END)) s = Stream{};
    return "";
  }
  std::string line;
  if (s.tokens == 0 && s.request_ns && rec.ts_ns > s.request_ns) {
    const double ttft = util::ns_to_ms(rec.ts_ns - s.request_ns);
    if (ttft > ttft_limit_ms_)
      line = fmt::format("live: slow first token {:.0f} ms (tid {}, port {})", ttft, rec.tid, io.lport);
  } else if (s.last_token_ns && rec.ts_ns > s.last_token_ns) {
    const double gap = util::ns_to_ms(rec.ts_ns - s.last_token_ns);
    if (gap > gap_limit_ms_)
      line =
          fmt::format("live: slow gap {:.0f} ms before token {} (tid {}, port {})", gap, s.tokens, rec.tid, io.lport);
  }
  s.last_token_ns = rec.ts_ns;
  s.tokens++;
  return line;
}

}  // namespace ld::analysis
