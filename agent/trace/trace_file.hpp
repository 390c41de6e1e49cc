// .ldtrace: the recorded event stream plus the facts needed to analyse it.
//
// Layout (all integers little-endian):
//   file header : "LDTRACE\0" | u32 format_version | u32 header_len | header JSON (header_len bytes) | u32 crc32(header
//   JSON) chunk*      : "LDCK" | u32 kind | u32 compressed_len | u32 raw_len | u32 crc32(compressed bytes) | compressed
//   bytes (zlib)
// Chunk kinds: 1 = EVENTS (raw_len bytes of concatenated event records, each starting with
// struct ld_hdr from bpf/events.h, `size` giving its length); 2 = TRAILER (JSON, written once at
// the end: probe counters, end time).
// The writer writes a chunk as soon as it has one, so a kill -9 loses at most the chunk being
// filled. The reader never trusts a length: a truncated or corrupt chunk ends with a warning that
// names its byte offset, and reading resumes at the next chunk magic if one can be found.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

struct ld_hdr;

namespace ld::trace {

inline constexpr uint32_t kFormatVersion = 1;

class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class TraceWriter {
 public:
  // Creates (truncates) `path` with mode 0600 (also forced on an existing regular file; a FIFO
  // or device such as /dev/null keeps its mode) and writes the file header.
  // Throws TraceError with a one-line reason (path + strerror) on failure. `header` must be a
  // JSON object (null is written as {}); chunk_bytes is the raw size that triggers a chunk.
  TraceWriter(const std::string& path, const nlohmann::json& header, size_t chunk_bytes = 256 * 1024);
  ~TraceWriter();  // flushes what is buffered; never throws
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Appends one event record (len == hdr->size). Writes a chunk when the buffer reaches
  // chunk_bytes. Throws TraceError on a write error.
  void append(const void* record, size_t len);
  // Writes what is buffered as one chunk now (e.g. on a timer so a quiet trace still lands).
  void flush();
  // Flushes and writes the TRAILER chunk (a JSON object; null is written as {}).
  // Further appends are an error.
  void finish(const nlohmann::json& trailer);

  // Records and bytes that have reached the file (header included in bytes); records still
  // buffered for the chunk being filled are not counted until that chunk is written.
  uint64_t records_written() const;
  uint64_t bytes_written() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct ReadSummary {
  nlohmann::json header;   // the file header JSON
  nlohmann::json trailer;  // null when the trace has none (agent killed)
  uint64_t records = 0;    // records delivered to the sink
  uint64_t chunks_ok = 0;
  uint64_t chunks_bad = 0;
  // One line each, e.g. "trace.ldtrace: chunk at byte 1234: CRC mismatch; skipped" or
  // "trace.ldtrace: truncated at byte 5678 (last 90 bytes unreadable); the trace ends there".
  std::vector<std::string> warnings;
};

// `rec` sits in 8-aligned storage holding the whole record (rec.size bytes, zero-padded to at
// least 256), valid only during the call. Types are not checked: unknown ones are delivered too.
using RecordSink = std::function<void(const ld_hdr& rec)>;

// Reads a whole trace, calling `sink` for every well-formed record in file order.
// Throws TraceError only when nothing can be read (missing file, not a trace, unsupported
// version, header corrupt). Everything else becomes a warning in ReadSummary.
ReadSummary read_trace(const std::string& path, const RecordSink& sink);
// The same over bytes in memory (used by the fuzzer and tests); `name` is used in messages.
ReadSummary read_trace_bytes(const uint8_t* data, size_t size, const std::string& name, const RecordSink& sink);

}  // namespace ld::trace
