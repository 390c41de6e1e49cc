// The first tokens and gaps of the live views (top, attach --live) as the records are read,
// from the socket records alone (and the tls probe's, given to their ciphertext as the report
// gives them: TlsJoin).
// A deliberately small model of the timeline: per socket (per HTTP/2 stream), the last request
// received and the last token sent; no reordering across CPUs (records may come a few ms late, so a gap can
// be off by that much; the report's numbers are the exact ones).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "analysis/tls_join.hpp"

struct ld_hdr;

namespace ld::analysis {

// A first token or a gap between tokens, as the record that ended it was read.
struct LiveSample {
  bool first_token = false;  // a TTFT, else a gap before token `token_index`
  double ms = 0;
  uint64_t end_ns = 0;      // CLOCK_MONOTONIC of the token's send
  uint64_t request_ns = 0;  // of its stream's request line (0 when it came before the records)
  uint64_t token_index = 0;
  uint32_t tid = 0;
  uint16_t port = 0;  // the server's local port
};

class LiveWatch {
 public:
  LiveWatch(double ttft_limit_ms, double gap_limit_ms) : ttft_limit_ms_(ttft_limit_ms), gap_limit_ms_(gap_limit_ms) {}
  // The TLS join calls back into it: it stays where it was made.
  LiveWatch(const LiveWatch&) = delete;
  LiveWatch& operator=(const LiveWatch&) = delete;
  // The first token or gap this record ends, if it ends one.
  std::optional<LiveSample> observe(const ld_hdr& rec, size_t size);
  // Over the limits: a first token that feels stuck, a gap that breaks the sentence.
  bool slow(const LiveSample& s) const { return s.ms > (s.first_token ? ttft_limit_ms_ : gap_limit_ms_); }
  // When the oldest stream still open received its request (0 when none is open).
  uint64_t oldest_open_request_ns() const;

 private:
  // A socket record as the join passes it on; a token's sample into sample_.
  void on_io(const ld_sock_io& io);
  // The streams of an HTTP/2 send or receive; of several tokens in one send, the longest wait.
  void on_h2(const ld_h2_frames& h2);
  void on_token(uint64_t sock_id, uint32_t stream, const ld_hdr& hdr, uint16_t port);

  struct Stream {
    uint64_t request_ns = 0;  // request line received, no token yet
    uint64_t last_token_ns = 0;
    uint64_t tokens = 0;
  };
  double ttft_limit_ms_;
  double gap_limit_ms_;
  using StreamKey = std::pair<uint64_t, uint32_t>;  // socket id, HTTP/2 stream (0 for HTTP/1)
  std::map<StreamKey, Stream> streams_;
  std::optional<LiveSample> sample_;  // what the record being observed ended
  TlsJoin tls_{[this](const ld_sock_io& io) { on_io(io); }, [this](const ld_h2_frames& h2) { on_h2(h2); }};
};

}  // namespace ld::analysis
