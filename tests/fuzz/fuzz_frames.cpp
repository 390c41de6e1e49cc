// libFuzzer target: any bytes as a CPython line table (the bytes the perf probe copies from a
// target's memory: python_lines.hpp) and as the frame records of a trace (ld_cpu_frames,
// ld_ustack, ld_pystack) fed to the evidence store and the frames analysis. Neither may crash,
// read out of bounds or hang; a line is -1 or a value the table could reach.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "analysis/evidence.hpp"
#include "analysis/frames.hpp"
#include "events.h"
#include "model/frames.hpp"
#include "probes/python_lines.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const int first = static_cast<int8_t>(data[0]) * 1000;
  const int64_t instr = static_cast<int64_t>(data[1]) * 4 - 8;
  for (uint32_t version : {0x030au, 0x030bu, 0x030cu, 0x030du}) {
    const int line = ld::probes::python_line(version, first, data + 2, size - 2, instr);
    (void)line;
  }
  // The same bytes as a stream of records, each prefixed by its 2-byte size.
  ld::analysis::EvidenceStore store;
  std::vector<uint8_t> rec;
  for (size_t at = 2; at + 2 <= size;) {
    size_t len = data[at] | (size_t(data[at + 1]) << 8);
    at += 2;
    len = std::min(len, size - at);
    rec.assign(std::max<size_t>(len, sizeof(ld_hdr)), 0);
    std::memcpy(rec.data(), data + at, len);
    at += len;
    auto* hdr = reinterpret_cast<ld_hdr*>(rec.data());
    hdr->type = LD_EV_CPU_FRAMES + data[at % size] % 3;  // the frame records only
    store.add(*hdr, len < sizeof(ld_hdr) ? sizeof(ld_hdr) : len);
  }
  store.finish();
  ld::model::Report report;
  ld::model::Outlier o;
  o.kind = ld::model::WindowKind::kTpot;
  o.tid = 0;
  for (const auto& [tid, t] : store.threads()) o.tid = tid;
  o.start_mono_ns = 0;
  o.end_mono_ns = ~0ULL;
  report.outliers.push_back(o);
  ld::analysis::attach_frames(report, store);
  (void)ld::model::summarize_frames(report);
  return 0;
}
