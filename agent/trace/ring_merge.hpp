// The records of the per-CPU ring buffers (bpf/common.bpf.h, ld_rings) handed on in time order.
// Each ring is in its CPU's order; one drain reads the rings one after another, so without a
// merge a request received on one CPU could reach the analysis after the token sends its
// thread made on another. A drain stages every ring's records here, then delivers them by
// ld_hdr::ts_ns up to a watermark (when the drain began): a record stamped later was written
// while the rings were being read, and another ring may still hold an older one, so it waits
// for the next drain.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "events.h"

namespace ld::trace {

class RingMerge {
 public:
  using Sink = std::function<void(const ld_hdr& record, size_t size)>;

  explicit RingMerge(size_t rings = 0) : rings_(rings) {}

  // Copies one record (its ld_hdr::size bytes, checked by the caller) of ring `ring`.
  void add(size_t ring, const ld_hdr& record);
  // Hands on, oldest first, every staged record stamped at or before `watermark` (a ring's
  // records keep their order: ties and a ring's own small disorders stay as written); returns
  // how many. UINT64_MAX delivers everything.
  size_t deliver(uint64_t watermark, const Sink& sink);
  size_t held() const;

 private:
  struct Ring {
    std::vector<uint64_t> words;  // records back to back, each padded to 8 bytes (ld_hdr's alignment)
    size_t head = 0;              // word index of the first record not delivered
  };
  std::vector<Ring> rings_;
};

}  // namespace ld::trace
