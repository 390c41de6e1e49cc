#include "trace/ring_merge.hpp"

#include <cstring>

namespace ld::trace {
namespace {

size_t words_of(size_t bytes) { return (bytes + sizeof(uint64_t) - 1) / sizeof(uint64_t); }

const ld_hdr* at(const std::vector<uint64_t>& words, size_t index) {
  return reinterpret_cast<const ld_hdr*>(words.data() + index);
}

}  // namespace

void RingMerge::add(size_t ring, const ld_hdr& record) {
  if (ring >= rings_.size()) rings_.resize(ring + 1);
  auto& words = rings_[ring].words;
  size_t index = words.size();
  words.resize(index + words_of(record.size), 0);
  std::memcpy(words.data() + index, &record, record.size);
}

size_t RingMerge::deliver(uint64_t watermark, const Sink& sink) {
  size_t delivered = 0;
  while (true) {
    // The ring whose next record is oldest; rings are few (one per CPU), so a scan.
    Ring* oldest = nullptr;
    uint64_t oldest_ts = 0;
    for (auto& r : rings_) {
      if (r.head >= r.words.size()) continue;
      uint64_t ts = at(r.words, r.head)->ts_ns;
      if (ts <= watermark && (!oldest || ts < oldest_ts)) {
        oldest = &r;
        oldest_ts = ts;
      }
    }
    if (!oldest) break;
    const ld_hdr* rec = at(oldest->words, oldest->head);
    oldest->head += words_of(rec->size);
    sink(*rec, rec->size);
    ++delivered;
  }
  for (auto& r : rings_) {
    if (r.head >= r.words.size()) {
      r.words.clear();
    } else if (r.head) {
      r.words.erase(r.words.begin(), r.words.begin() + static_cast<std::ptrdiff_t>(r.head));
    }
    r.head = 0;
  }
  return delivered;
}

size_t RingMerge::held() const {
  size_t n = 0;
  for (const auto& r : rings_)
    for (size_t i = r.head; i < r.words.size(); i += words_of(at(r.words, i)->size)) ++n;
  return n;
}

}  // namespace ld::trace
