// A typed view of an event record (bpf/events.h), or nullptr when the record is too short for
// its type: the one size check every record reader needs before it looks inside.
#pragma once

#include <cstddef>

struct ld_hdr;

namespace ld::analysis {

template <typename T>
const T* record_as(const ld_hdr& rec, size_t size) {
  return size >= sizeof(T) ? reinterpret_cast<const T*>(&rec) : nullptr;
}

}  // namespace ld::analysis
