// .ldtrace writer/reader: round trips, kill -9 survivability, and a reader that stays sane on
// truncated or corrupted files (every cut offset, every single-bit flip).
#include "trace/trace_file.hpp"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "events.h"

namespace {

using ld::trace::ReadSummary;
using ld::trace::TraceError;
using ld::trace::TraceWriter;
using Bytes = std::vector<uint8_t>;
using Records = std::vector<Bytes>;

// A scratch directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/ld_trace_test.XXXXXX";
    const char* p = mkdtemp(tmpl);
    if (p == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A record of `size` bytes: a valid ld_hdr followed by a payload derived from `seed`.
Bytes make_record(uint16_t type, uint16_t size, uint32_t seed) {
  Bytes r(size);
  ld_hdr h{};
  h.type = type;
  h.size = size;
  h.cpu = seed % 7;
  h.tgid = 1000 + seed;
  h.tid = 2000 + seed;
  h.ts_ns = 1'000'000'000ull + seed * 1000ull;
  std::memcpy(r.data(), &h, sizeof h);
  for (size_t i = sizeof h; i < size; ++i) r[i] = static_cast<uint8_t>(seed * 31 + i);
  return r;
}

// Sizes cycle through 24..~300 so records straddle every alignment inside a chunk.
Records make_records(size_t n, uint32_t first_seed = 0) {
  Records out;
  for (size_t i = 0; i < n; ++i) {
    auto seed = static_cast<uint32_t>(first_seed + i);
    uint16_t size = static_cast<uint16_t>(sizeof(ld_hdr) + (seed * 37) % 280);
    out.push_back(make_record(LD_EV_SOCK_IO + seed % 3, size, seed));
  }
  return out;
}

Bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

struct Read {
  ReadSummary sum;
  Records records;
};

// Copies every delivered record; also checks the reader's alignment promise.
ld::trace::RecordSink collect(Records& out) {
  return [&out](const ld_hdr& rec) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(&rec) % 8, 0u);
    const auto* p = reinterpret_cast<const uint8_t*>(&rec);
    out.emplace_back(p, p + rec.size);
  };
}

Read read_bytes(const Bytes& b, size_t len) {
  Read r;
  r.sum = ld::trace::read_trace_bytes(b.data(), len, "t.ldtrace", collect(r.records));
  return r;
}
Read read_bytes(const Bytes& b) { return read_bytes(b, b.size()); }

uint32_t get_u32(const Bytes& b, size_t off) {
  return b[off] | b[off + 1] << 8 | b[off + 2] << 16 | static_cast<uint32_t>(b[off + 3]) << 24;
}

// Offsets where the header ends and where each chunk ends, parsed the way the format says.
std::vector<size_t> boundaries(const Bytes& b) {
  std::vector<size_t> out{16 + get_u32(b, 12) + 4};
  while (out.back() < b.size()) out.push_back(out.back() + 20 + get_u32(b, out.back() + 8));
  return out;
}

bool is_prefix(const Records& part, const Records& all) {
  return part.size() <= all.size() && std::equal(part.begin(), part.end(), all.begin());
}

bool is_subsequence(const Records& part, const Records& all) {
  size_t j = 0;
  for (const auto& r : part) {
    while (j < all.size() && all[j] != r) ++j;
    if (j == all.size()) return false;
    ++j;
  }
  return true;
}

// Writes `chunks` groups of `per_chunk` records, one flush() per group, plus a trailer.
Bytes small_trace(const TempDir& dir, size_t chunks, size_t per_chunk, Records* all) {
  std::string path = dir.file("small.ldtrace");
  TraceWriter w(path, {{"host", "test"}}, 1 << 20);
  for (size_t c = 0; c < chunks; ++c) {
    for (const auto& r : make_records(per_chunk, static_cast<uint32_t>(c * per_chunk))) {
      w.append(r.data(), r.size());
      all->push_back(r);
    }
    w.flush();
  }
  w.finish({{"end_ns", 42}});
  return read_file(path);
}

// A hand-built chunk, for contents the writer refuses to produce.
Bytes make_chunk(uint32_t kind, const Bytes& raw) {
  uLongf clen = compressBound(raw.size());
  Bytes out(20 + clen);
  EXPECT_EQ(compress2(out.data() + 20, &clen, raw.data(), raw.size(), 1), Z_OK);
  out.resize(20 + clen);
  uint32_t crc = static_cast<uint32_t>(crc32(0, out.data() + 20, static_cast<uInt>(clen)));
  uint32_t fields[4] = {kind, static_cast<uint32_t>(clen), static_cast<uint32_t>(raw.size()), crc};
  std::memcpy(out.data(), "LDCK", 4);
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 4; ++k) out[4 + 4 * i + k] = static_cast<uint8_t>(fields[i] >> (8 * k));
  return out;
}

// Just the file header, from the real writer.
Bytes header_only(const TempDir& dir) {
  std::string path = dir.file("hdr.ldtrace");
  { TraceWriter w(path, {{"host", "test"}}); }
  return read_file(path);
}

void append(Bytes& to, const Bytes& from) { to.insert(to.end(), from.begin(), from.end()); }

Bytes concat(const Records& rs) {
  Bytes out;
  for (const auto& r : rs) append(out, r);
  return out;
}

// ---------------------------------------------------------------- round trips

TEST(TraceFile, RoundTripManyRecordsAcrossManyChunks) {
  TempDir dir;
  std::string path = dir.file("rt.ldtrace");
  Records recs = make_records(5000);
  recs.push_back(make_record(LD_EV_SOCK_IO, 0xffff, 7));  // the largest record a u16 allows
  recs.push_back(make_record(LD_EV_TASK_EXIT, sizeof(ld_hdr), 8));
  nlohmann::json header = {{"host", "box"}, {"pids", {1, 2, 3}}};
  nlohmann::json trailer = {{"end_ns", 123456789}, {"dropped", 0}};
  {
    TraceWriter w(path, header, 4096);
    for (const auto& r : recs) w.append(r.data(), r.size());
    w.finish(trailer);
    EXPECT_EQ(w.records_written(), recs.size());
    EXPECT_EQ(w.bytes_written(), std::filesystem::file_size(path));
  }
  Records got;
  ReadSummary s = ld::trace::read_trace(path, collect(got));
  EXPECT_TRUE(s.warnings.empty()) << s.warnings.front();
  EXPECT_EQ(s.records, recs.size());
  EXPECT_EQ(got, recs);
  EXPECT_EQ(s.header, header);
  EXPECT_EQ(s.trailer, trailer);
  EXPECT_GT(s.chunks_ok, 100u);  // many EVENTS chunks plus the trailer
  EXPECT_EQ(s.chunks_bad, 0u);
}

TEST(TraceFile, NullHeaderAndTrailerReadBackAsEmptyObjects) {
  TempDir dir;
  std::string path = dir.file("null.ldtrace");
  {
    TraceWriter w(path, {});
    w.finish({});
  }
  ReadSummary s = ld::trace::read_trace(path, nullptr);
  EXPECT_EQ(s.header, nlohmann::json::object());
  EXPECT_EQ(s.trailer, nlohmann::json::object());  // present: the trace was finished
  EXPECT_TRUE(s.warnings.empty());
}

TEST(TraceFile, UnknownRecordTypesAreDelivered) {
  TempDir dir;
  std::string path = dir.file("types.ldtrace");
  Records recs = {make_record(0, 24, 1), make_record(999, 100, 2), make_record(0xffff, 31, 3),
                  make_record(LD_EV_TYPE_MAX, 64, 4)};
  {
    TraceWriter w(path, {{"v", 1}});
    for (const auto& r : recs) w.append(r.data(), r.size());
  }
  Records got;
  ReadSummary s = ld::trace::read_trace(path, collect(got));
  EXPECT_EQ(got, recs);
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_TRUE(s.trailer.is_null());
}

// The reader reuses one buffer: a short record after a long one must still see zeros up to 256
// bytes, not the long record's tail.
TEST(TraceFile, ShortRecordsAreZeroPaddedAfterLongerOnes) {
  TempDir dir;
  std::string path = dir.file("pad.ldtrace");
  Records recs = {make_record(1, 300, 1), make_record(1, 24, 2),  make_record(1, 200, 3),
                  make_record(1, 40, 4),  make_record(1, 255, 5), make_record(1, 32, 6)};
  {
    TraceWriter w(path, {});
    for (const auto& r : recs) w.append(r.data(), r.size());
  }
  size_t checked = 0;
  ld::trace::read_trace(path, [&](const ld_hdr& rec) {
    const auto* p = reinterpret_cast<const uint8_t*>(&rec);
    for (size_t i = rec.size; i < 256; ++i) ASSERT_EQ(p[i], 0) << "record " << checked << " byte " << i;
    ++checked;
  });
  EXPECT_EQ(checked, recs.size());
}

// ---------------------------------------------------------------- writer behaviour

TEST(TraceFile, FileModeIs0600EvenWhenItPreexistedAs0644) {
  TempDir dir;
  std::string fresh = dir.file("fresh.ldtrace");
  std::string old = dir.file("old.ldtrace");
  write_file(old, Bytes(1000, 'x'));
  ASSERT_EQ(chmod(old.c_str(), 0644), 0);
  { TraceWriter a(fresh, {}), b(old, {}); }
  struct stat st {};
  ASSERT_EQ(stat(fresh.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(stat(old.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_LT(st.st_size, 1000);  // truncated, not appended to
  EXPECT_NO_THROW(ld::trace::read_trace(old, nullptr));
}

// "-o /dev/null" or a FIFO: the writer must not chmod what is not a regular file (as root it
// could), and the reader must handle a non-mmappable source.
TEST(TraceFile, FifoKeepsItsModeAndStreamsThrough) {
  TempDir dir;
  std::string fifo = dir.file("pipe");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  ASSERT_EQ(chmod(fifo.c_str(), 0644), 0);
  Records recs = make_records(300);
  Records got;
  ReadSummary s;
  std::thread reader([&] { s = ld::trace::read_trace(fifo, collect(got)); });
  {
    TraceWriter w(fifo, {{"host", "pipe"}}, 2048);
    for (const auto& r : recs) w.append(r.data(), r.size());
    w.finish({{"end_ns", 1}});
  }
  reader.join();
  EXPECT_EQ(got, recs);
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_EQ(s.trailer, (nlohmann::json{{"end_ns", 1}}));
  struct stat st {};
  ASSERT_EQ(stat(fifo.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
}

TEST(TraceFile, WithoutFinishFlushedRecordsSurviveAndTrailerIsNull) {
  TempDir dir;
  std::string path = dir.file("killed.ldtrace");
  Records recs = make_records(160);
  Bytes at_kill;
  {
    TraceWriter w(path, {{"host", "h"}}, 1 << 20);  // big chunks: only flush() writes
    for (size_t i = 0; i < 100; ++i) w.append(recs[i].data(), recs[i].size());
    w.flush();
    for (size_t i = 100; i < 150; ++i) w.append(recs[i].data(), recs[i].size());
    w.flush();
    for (size_t i = 150; i < 160; ++i) w.append(recs[i].data(), recs[i].size());
    EXPECT_EQ(w.records_written(), 150u);
    // What a kill -9 right now would leave: write(2) already put the chunks in the file.
    at_kill = read_file(path);
  }
  Read r = read_bytes(at_kill);
  EXPECT_TRUE(r.sum.warnings.empty());
  EXPECT_EQ(r.records, Records(recs.begin(), recs.begin() + 150));
  EXPECT_TRUE(r.sum.trailer.is_null());

  // The destructor flushed the last 10, still without a trailer.
  Records got;
  ReadSummary s = ld::trace::read_trace(path, collect(got));
  EXPECT_EQ(got, recs);
  EXPECT_TRUE(s.trailer.is_null());
}

TEST(TraceFile, WriterRejectsMisuse) {
  TempDir dir;
  TraceWriter w(dir.file("misuse.ldtrace"), {});
  Bytes rec = make_record(1, 40, 1);
  EXPECT_THROW(w.append(rec.data(), 39), TraceError);  // len disagrees with hdr.size
  EXPECT_THROW(w.append(rec.data(), 10), TraceError);  // shorter than ld_hdr
  EXPECT_THROW(TraceWriter(dir.file("arr.ldtrace"), nlohmann::json::array()), TraceError);
  w.append(rec.data(), rec.size());
  w.finish({});
  EXPECT_THROW(w.append(rec.data(), rec.size()), TraceError);
  EXPECT_THROW(w.finish({}), TraceError);
}

TEST(TraceFile, CreateFailureNamesPathAndReason) {
  std::string path = "/nonexistent-dir-ld/x.ldtrace";
  try {
    TraceWriter w(path, {});
    FAIL() << "no throw";
  } catch (const TraceError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot create " + path + ": No such file or directory");
  }
}

// ---------------------------------------------------------------- not a trace

std::string read_error(const std::string& path) {
  try {
    ld::trace::read_trace(path, nullptr);
  } catch (const TraceError& e) {
    return e.what();
  }
  return "no error";
}

TEST(TraceFile, WrongMagicMissingFileAndDirectoryThrow) {
  TempDir dir;
  std::string txt = dir.file("notes.txt");
  write_file(txt, Bytes{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '\n'});
  EXPECT_EQ(read_error(txt), txt + ": not a latency-doctor trace (bad magic)");
  std::string empty = dir.file("empty");
  write_file(empty, {});
  EXPECT_EQ(read_error(empty), empty + ": not a latency-doctor trace (bad magic)");
  std::string missing = dir.file("missing.ldtrace");
  EXPECT_EQ(read_error(missing), "cannot read " + missing + ": No such file or directory");
  EXPECT_EQ(read_error(dir.file("")), "cannot read " + dir.file("") + ": Is a directory");
}

TEST(TraceFile, NewerVersionThrows) {
  TempDir dir;
  std::string path = dir.file("v2.ldtrace");
  { TraceWriter w(path, {{"host", "h"}}); }
  Bytes b = read_file(path);
  b[8] = 2;  // u32 version, little-endian; not covered by the header CRC
  write_file(path, b);
  EXPECT_EQ(read_error(path), path + ": trace format version 2 is newer than this latency-doctor supports (1)");
}

TEST(TraceFile, CorruptHeaderThrows) {
  TempDir dir;
  Bytes b = header_only(dir);
  b[20] ^= 0x01;  // inside the header JSON
  EXPECT_THROW(read_bytes(b), TraceError);
  Bytes c = header_only(dir);
  c[12] = 0xff, c[13] = 0xff, c[14] = 0xff, c[15] = 0x7f;  // header_len far beyond the file
  EXPECT_THROW(read_bytes(c), TraceError);
}

// ---------------------------------------------------------------- damage

TEST(TraceFile, TruncationAtEveryOffsetYieldsAPrefix) {
  TempDir dir;
  Records all;
  Bytes b = small_trace(dir, 5, 12, &all);
  std::vector<size_t> bounds = boundaries(b);
  ASSERT_EQ(bounds.back(), b.size());
  size_t last_count = 0;
  for (size_t cut = 0; cut <= b.size(); ++cut) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    if (cut < bounds.front()) {  // inside the file header: nothing is readable
      EXPECT_THROW(read_bytes(b, cut), TraceError);
      continue;
    }
    Read r = read_bytes(b, cut);
    EXPECT_TRUE(is_prefix(r.records, all));
    EXPECT_GE(r.records.size(), last_count);
    last_count = r.records.size();
    size_t chunk_start = *std::prev(std::upper_bound(bounds.begin(), bounds.end(), cut));
    if (chunk_start == cut) {
      EXPECT_TRUE(r.sum.warnings.empty());
    } else {
      ASSERT_EQ(r.sum.warnings.size(), 1u);
      EXPECT_EQ(r.sum.warnings[0], "t.ldtrace: truncated at byte " + std::to_string(chunk_start) + " (last " +
                                       std::to_string(cut - chunk_start) + " bytes unreadable); the trace ends there");
    }
    EXPECT_EQ(!r.sum.trailer.is_null(), cut == b.size());
  }
  EXPECT_EQ(last_count, all.size());
}

TEST(TraceFile, SingleBitFlipsAtEveryOffsetAreDetectedOrHarmless) {
  TempDir dir;
  Records all;
  Bytes b = small_trace(dir, 4, 6, &all);
  size_t header_end = boundaries(b).front();
  Read clean = read_bytes(b);
  ASSERT_EQ(clean.records, all);
  for (size_t off = 0; off < b.size(); ++off) {
    for (int bit = 0; bit < 8; ++bit) {
      SCOPED_TRACE("flip byte " + std::to_string(off) + " bit " + std::to_string(bit));
      Bytes m = b;
      m[off] ^= static_cast<uint8_t>(1u << bit);
      Read r;
      try {
        r = read_bytes(m);
      } catch (const TraceError&) {
        EXPECT_LT(off, header_end);  // only the file header may make the whole file unreadable
        continue;
      }
      if (r.sum.warnings.empty()) {
        EXPECT_EQ(r.records, all);
        EXPECT_EQ(r.sum.trailer, clean.sum.trailer);
      } else {
        EXPECT_TRUE(is_subsequence(r.records, all));  // a damaged chunk is dropped, never garbled
      }
    }
  }
}

TEST(TraceFile, CorruptMiddleChunkIsSkippedAndLaterChunksRead) {
  TempDir dir;
  Records all;
  Bytes b = small_trace(dir, 5, 10, &all);
  std::vector<size_t> bounds = boundaries(b);  // header end, then each chunk's end
  size_t third = bounds[2];
  Records expected(all.begin(), all.begin() + 20);
  expected.insert(expected.end(), all.begin() + 30, all.end());

  Bytes body = b;
  for (size_t i = third + 25; i < third + 35; ++i) body[i] = 0xff;
  Read r = read_bytes(body);
  EXPECT_EQ(r.records, expected);
  EXPECT_EQ(r.sum.chunks_bad, 1u);
  ASSERT_EQ(r.sum.warnings.size(), 1u);
  EXPECT_EQ(r.sum.warnings[0], "t.ldtrace: chunk at byte " + std::to_string(third) + ": CRC mismatch; skipped");
  EXPECT_FALSE(r.sum.trailer.is_null());

  Bytes magic = b;
  magic[third] = 'X';
  r = read_bytes(magic);
  EXPECT_EQ(r.records, expected);
  EXPECT_FALSE(r.sum.trailer.is_null());

  Bytes length = b;  // compressed_len pointing past the end of the file
  length[third + 11] = 0x7f;
  r = read_bytes(length);
  EXPECT_EQ(r.records, expected);
  ASSERT_EQ(r.sum.warnings.size(), 1u);
  EXPECT_NE(r.sum.warnings[0].find("runs past the end of the file"), std::string::npos);
}

TEST(TraceFile, GarbageBetweenChunksIsSkipped) {
  TempDir dir;
  Records all;
  Bytes b = small_trace(dir, 3, 5, &all);
  size_t second = boundaries(b)[1];
  b.insert(b.begin() + static_cast<ptrdiff_t>(second), 37, 0xab);
  Read r = read_bytes(b);
  EXPECT_EQ(r.records, all);
  ASSERT_EQ(r.sum.warnings.size(), 1u);
  EXPECT_NE(r.sum.warnings[0].find("bad chunk magic"), std::string::npos);
}

TEST(TraceFile, BadRecordsInAValidChunkWarnAndStopThatChunk) {
  TempDir dir;
  Bytes good1 = make_record(1, 40, 1), good2 = make_record(2, 32, 2);
  Bytes zero = make_record(1, 24, 3);
  zero[2] = zero[3] = 0;  // hdr.size = 0: a naive walker would loop forever
  Bytes too_big = make_record(1, 24, 4);
  too_big[2] = 0xff;  // hdr.size = 0x??ff > what is left
  Bytes file = header_only(dir);
  append(file, make_chunk(1, concat({good1, zero, good2})));
  append(file, make_chunk(1, concat({good2, too_big})));
  append(file, make_chunk(1, concat({good1, Bytes(10, 0)})));  // 10 trailing bytes
  append(file, make_chunk(1, concat({good2})));
  Read r = read_bytes(file);
  EXPECT_EQ(r.records, (Records{good1, good2, good1, good2}));
  ASSERT_EQ(r.sum.warnings.size(), 3u);
  EXPECT_NE(r.sum.warnings[0].find("size 0 is smaller than a record header"), std::string::npos);
  EXPECT_NE(r.sum.warnings[1].find("runs past the chunk end"), std::string::npos);
  EXPECT_NE(r.sum.warnings[2].find("10 trailing bytes"), std::string::npos);
  EXPECT_EQ(r.sum.chunks_ok, 1u);
  EXPECT_EQ(r.sum.chunks_bad, 3u);
}

TEST(TraceFile, UnknownChunkKindAndBadTrailerWarn) {
  TempDir dir;
  Bytes rec = make_record(1, 48, 1);
  std::string bad_json = "{\"end_ns\": ";
  std::string array_json = "[1,2]";
  Bytes file = header_only(dir);
  append(file, make_chunk(7, Bytes(100, 1)));
  append(file, make_chunk(2, Bytes(bad_json.begin(), bad_json.end())));
  append(file, make_chunk(2, Bytes(array_json.begin(), array_json.end())));
  append(file, make_chunk(1, rec));
  Read r = read_bytes(file);
  EXPECT_EQ(r.records, Records{rec});
  EXPECT_TRUE(r.sum.trailer.is_null());
  ASSERT_EQ(r.sum.warnings.size(), 3u);
  EXPECT_NE(r.sum.warnings[0].find("unknown chunk kind 7"), std::string::npos);
  EXPECT_NE(r.sum.warnings[1].find("trailer is not a valid JSON object"), std::string::npos);
}

TEST(TraceFile, WrongRawLengthIsAWarning) {
  TempDir dir;
  Bytes rec = make_record(1, 48, 1);
  Bytes file = header_only(dir);
  size_t at = file.size();
  append(file, make_chunk(1, concat({rec, rec})));
  append(file, make_chunk(1, rec));
  for (uint32_t raw_len : {48u, 200u, 0x7fffffffu}) {
    Bytes m = file;
    for (int k = 0; k < 4; ++k) m[at + 12 + k] = static_cast<uint8_t>(raw_len >> (8 * k));
    Read r = read_bytes(m);
    EXPECT_EQ(r.records, Records{rec}) << raw_len;
    EXPECT_EQ(r.sum.warnings.size(), 1u) << raw_len;
  }
}

TEST(TraceFile, WarningFloodIsCapped) {
  TempDir dir;
  Bytes file = header_only(dir);
  for (int i = 0; i < 5000; ++i) append(file, Bytes{'L', 'D', 'C', 'K', 0, 0, 0, 0});
  Read r = read_bytes(file);
  EXPECT_LE(r.sum.warnings.size(), 1001u);
  EXPECT_NE(r.sum.warnings.back().find("more problems not listed"), std::string::npos);
}

}  // namespace
