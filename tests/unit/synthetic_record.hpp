// A record as a probe would write it, for the analysis's unit tests: the header filled in, the
// rest zero for the test to set.
#pragma once

#include <cstdint>

#include "events.h"

template <class T>
T synthetic_record(uint16_t type, uint32_t tgid, uint32_t tid, uint64_t ts) {
  T r{};
  r.hdr.type = type;
  r.hdr.size = sizeof(T);
  r.hdr.tgid = tgid;
  r.hdr.tid = tid;
  r.hdr.ts_ns = ts;
  return r;
}
