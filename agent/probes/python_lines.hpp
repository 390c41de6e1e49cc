// The line a CPython frame executes, from its code object's line table and the instruction it
// is at: the decoders of CPython's two line-table formats (3.10's co_linetable of (byte delta,
// line delta) pairs; 3.11's location table, PEP 657). Header-only and free of libbpf so that
// the unit tier tests it on tables the real interpreters wrote.
//
// The table is what the perf probe copied in the kernel: its first LD_PY_LINETABLE_LEN bytes
// (bpf/perf_maps.h), so an instruction past what they cover has no line (-1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

namespace ld::probes {

// Lines are summed in 64 bits from deltas the table (bytes copied from the target) chooses: a
// corrupt or truncated table must not overflow; a sum out of int's range has no line (-1).
inline int line_or_none(int64_t line) {
  return line < 0 || line > std::numeric_limits<int>::max() ? -1 : static_cast<int>(line);
}

// 3.10 (PEP 626's co_linetable): pairs of (unsigned byte delta, signed line delta); a line
// delta of -128 means "no line"; a zero line delta only extends the previous range. `byte_offset`
// is f_lasti * 2 (f_lasti counts 2-byte code units).
inline int python310_line(int firstlineno, const uint8_t* table, size_t len, int64_t byte_offset) {
  if (byte_offset < 0) return firstlineno;
  int64_t line = firstlineno;
  int64_t start = 0, end = 0;
  int64_t range_line = -1;
  for (size_t i = 0; i + 1 < len; i += 2) {
    const uint8_t sdelta = table[i];
    const int8_t ldelta = static_cast<int8_t>(table[i + 1]);
    start = end;
    end = start + sdelta;
    if (ldelta == -128) {
      range_line = -1;
    } else {
      line += ldelta;
      range_line = line;
    }
    if (byte_offset >= start && byte_offset < end) return range_line < 0 ? -1 : line_or_none(range_line);
  }
  return -1;
}

// 3.11+ (the location table): entries of a first byte 1CCCCLLL (C: the form, L: length - 1 in
// code units) and the form's varints. Forms 0-9: same line (one column byte); 10-12: the line
// + 0/1/2 (two column bytes); 13: line delta as a signed varint, no columns; 14: line delta,
// end-line delta, two columns, all varints; 15: no location. `instr` counts code units.
inline int python311_line(int firstlineno, const uint8_t* table, size_t len, int64_t instr) {
  if (instr < 0) return firstlineno;
  size_t i = 0;
  auto varint = [&]() -> uint32_t {
    uint32_t value = 0, shift = 0;
    while (i < len) {
      const uint8_t b = table[i++];
      value |= uint32_t(b & 63) << shift;
      shift += 6;
      if (!(b & 64) || shift > 30) break;
    }
    return value;
  };
  auto svarint = [&]() -> int32_t {
    const uint32_t u = varint();
    return (u & 1) ? -int32_t(u >> 1) : int32_t(u >> 1);
  };
  int64_t line = firstlineno;
  int64_t start = 0;
  while (i < len) {
    const uint8_t first = table[i++];
    if (!(first & 128)) continue;  // not an entry's first byte: resynchronise
    const int code = (first >> 3) & 15;
    const int64_t length = (first & 7) + 1;
    bool has_line = true;
    if (code == 15) {
      has_line = false;
    } else if (code == 14) {
      line += svarint();
      varint();  // end line delta
      varint();  // start column
      varint();  // end column
    } else if (code == 13) {
      line += svarint();
    } else if (code >= 10) {
      line += code - 10;
      i += 2;  // start and end column
    } else {
      i += 1;  // column byte
    }
    if (instr >= start && instr < start + length) return has_line ? line_or_none(line) : -1;
    start += length;
  }
  return -1;
}

// `version`: 0x030a for 3.10, ... `instr` in code units (-1: not started: the first line).
inline int python_line(uint32_t version, int firstlineno, const uint8_t* table, size_t len, int64_t instr) {
  if (version < 0x030a) return -1;
  if (version == 0x030a) return python310_line(firstlineno, table, len, instr < 0 ? instr : instr * 2);
  return python311_line(firstlineno, table, len, instr);
}

}  // namespace ld::probes
