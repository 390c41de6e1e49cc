#include "host/reader_class.hpp"

namespace ld::host {

ReaderClass::ReaderClass(uint64_t ring_bytes) : ring_bytes_(ring_bytes) {}

ReaderClass::Class ReaderClass::after_drain(uint64_t now_ns, uint64_t bytes) {
  if (window_start_ns_ == 0 || now_ns < window_start_ns_) window_start_ns_ = now_ns;
  window_bytes_ += bytes;
  // A drain that found 1/16 of the ring waiting (the kernel side's wake-up mark), or a window
  // already past the limit: the reader is needed now, not when a CPU is spare.
  if (bytes >= ring_bytes_ / 16 || window_bytes_ > idle_rate_limit()) {
    quiet_windows_ = 0;
    class_ = Class::batch;
  }
  const uint64_t elapsed = now_ns - window_start_ns_;
  if (elapsed >= kWindowNs) {
    // Bytes a second over the window just ended (a long poll makes a long window).
    const double rate = static_cast<double>(window_bytes_) * 1e9 / static_cast<double>(elapsed);
    if (rate <= static_cast<double>(idle_rate_limit())) {
      if (++quiet_windows_ >= kQuietWindows) class_ = Class::idle;
    } else {
      quiet_windows_ = 0;
      class_ = Class::batch;
    }
    window_start_ns_ = now_ns;
    window_bytes_ = 0;
  }
  return class_;
}

}  // namespace ld::host
