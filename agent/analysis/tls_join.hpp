// Gives the class of a TLS write's or read's plaintext (ld_tls_io, the tls probe) to the
// ciphertext send or receive (ld_sock_io) that carried it, so that a server terminating TLS
// itself gets the same request and token timeline as a plain one.
//
// The tls probe names no socket; the thread does. OpenSSL's socket BIO sends the ciphertext
// inside SSL_write and receives it inside SSL_read; a memory BIO (Python's asyncio) hands the
// ciphertext to the socket right after SSL_write returns, and reads it from the socket right
// before SSL_read. Either way, on one thread:
//  - the plaintext writes since that thread's last send are what its next send carries (one
//    send may carry several: an event loop coalesces writes);
//  - a read's plaintext arrived in that thread's last receive before the read returned: the
//    request arrives when its last ciphertext bytes do.
// So a receive the kernel could not classify (ciphertext, or a plain body) is held until its
// thread's next event says what it was; classified ones pass at once. The timeline sorts each
// connection's events by time, so holding one changes no order it sees. A receive on a
// connection known to be TLS that no read claimed carried no data (a handshake message, the
// client's close_notify alert): it is dropped, or the timeline would read it as a request.
// HTTP/2 inside TLS: the tls probe also lists a plaintext's frames (ld_h2_frames, tls = 1); they
// go out with the socket, time and ports of the send or receive their plaintext is given to.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "events.h"

namespace ld::analysis {

class TlsJoin {
 public:
  using Out = std::function<void(const ld_sock_io&)>;
  using OutFrames = std::function<void(const ld_h2_frames&)>;
  explicit TlsJoin(Out out, OutFrames out_frames = {}) : out_(std::move(out)), out_frames_(std::move(out_frames)) {}

  void on_sock(const ld_sock_io& io);
  void on_tls(const ld_tls_io& tls);
  // The HTTP/2 frames of a TLS plaintext (h2.tls = 1), after its ld_tls_io.
  void on_tls_frames(const ld_h2_frames& h2);
  // The socket closed: its id may name a new connection (plain or not) next.
  void on_close(uint64_t sock_id);
  // Passes on every receive still held.
  void finish();

  uint64_t plaintext_records() const { return plaintext_records_; }
  uint64_t joined() const { return joined_; }    // ciphertext sends and receives given a class
  uint64_t dropped() const { return dropped_; }  // TLS receives no read claimed

 private:
  struct Thread {
    std::vector<ld_tls_io> writes;        // plaintext written since the thread's last send
    std::vector<ld_h2_frames> h2_writes;  // the HTTP/2 frames of those writes
    std::optional<ld_sock_io> held;       // its last unclassified receive
    bool idle() const { return writes.empty() && h2_writes.empty() && !held; }
  };
  // Where a TLS connection's plaintext goes: its socket, as the last read given a receive said.
  struct Carrier {
    uint64_t sock_id = 0;
    uint64_t ts_ns = 0;  // of that receive
    uint16_t rport = 0;
    uint16_t lport = 0;
  };
  void release(Thread& t, bool claimed = false);
  void give_writes(Thread& t, ld_sock_io& send);
  void emit_frames(ld_h2_frames h2, const Carrier& to, uint64_t ts_ns);

  Out out_;
  OutFrames out_frames_;
  std::unordered_map<uint32_t, Thread> threads_;
  std::unordered_map<uint64_t, Carrier> carrier_of_ssl_;  // ssl_id -> its socket, from its reads
  struct LastRead {
    uint64_t ssl_id = 0;
    uint64_t claimed_ns = 0;  // the receive it claimed (0: none, OpenSSL had the bytes)
  };
  std::unordered_map<uint32_t, LastRead> last_read_;  // tid -> its last TLS read of HTTP/2
  std::unordered_set<uint64_t> tls_sockets_;          // sock_ids that carried a joined send or receive
  uint64_t plaintext_records_ = 0;
  uint64_t joined_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace ld::analysis
