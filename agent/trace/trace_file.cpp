// .ldtrace writer and reader; the byte layout is described in trace_file.hpp.
#include "trace/trace_file.hpp"

#include <fcntl.h>
#include <libdeflate.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "events.h"

namespace ld::trace {
namespace {

constexpr char kFileMagic[8] = {'L', 'D', 'T', 'R', 'A', 'C', 'E', '\0'};
constexpr char kChunkMagic[4] = {'L', 'D', 'C', 'K'};
// magic(8) | version(4) | header_len(4); the header JSON and its u32 CRC follow.
constexpr size_t kFilePrefixLen = 16;
// magic(4) | kind(4) | compressed_len(4) | raw_len(4) | crc32(4)
constexpr size_t kChunkHeaderLen = 20;
constexpr uint32_t kChunkEvents = 1;
constexpr uint32_t kChunkTrailer = 2;

// Reader bounds: a length field is never trusted beyond these.
constexpr uint32_t kMaxHeaderLen = 16u << 20;  // 16 MiB of header JSON
constexpr uint32_t kMaxRawLen = 64u << 20;     // 64 MiB of decompressed chunk data
// Deflate cannot expand more than ~1032:1 (a 258-byte match coded in 2 bits), so a raw_len
// beyond this multiple of compressed_len is a corrupt field, caught before allocating for it.
constexpr uint64_t kMaxInflateRatio = 1100;
// A hostile file full of chunk magics would otherwise produce a warning per 4 bytes.
constexpr size_t kMaxWarnings = 1000;
// Records shorter than this are zero-padded up to it before the sink sees them, so a sink that
// reads a known struct without checking `size` gets zeros instead of the previous record.
constexpr size_t kZeroPadTo = 256;
static_assert(kZeroPadTo <= 65536, "the reader's 64 KiB record buffer holds the padding");

// Records are the BPF programs' native structs, copied verbatim into chunks; the file's framing
// is little-endian. Both agree only on little-endian hosts (x86_64, arm64), the only ones built.
static_assert(std::endian::native == std::endian::little, "the .ldtrace format assumes a little-endian host");

// ---------------------------------------------------------------- little-endian helpers
// Shifts rather than memcpy: explicit about the on-disk byte order whatever the host is.
void put_u32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v >> 16);
  p[3] = static_cast<uint8_t>(v >> 24);
}

uint32_t get_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

uint16_t get_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

// libdeflate's CRC-32 is the same function as zlib's crc32 (tested against it), folded with
// carry-less multiplies: ~8x zlib's speed here, and the reader checks every compressed byte.
uint32_t crc_of(const uint8_t* p, size_t n) { return libdeflate_crc32(0, p, n); }

std::string errno_text(int err) { return std::strerror(err); }

// null means "no facts": written as {} so the reader always finds an object.
std::string dump_object(const nlohmann::json& j, const char* what, const std::string& path) {
  if (j.is_null()) return "{}";
  if (!j.is_object()) throw TraceError(path + ": trace " + what + " must be a JSON object");
  // replace: a stray non-UTF-8 string (a process name, say) must not make the dump throw.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

struct CompressorFree {
  void operator()(libdeflate_compressor* c) const { libdeflate_free_compressor(c); }
};
struct DecompressorFree {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};

}  // namespace

// ================================================================ writer

struct TraceWriter::Impl {
  std::string path;
  int fd = -1;
  size_t chunk_bytes = 0;
  std::vector<uint8_t> buf;  // raw records of the chunk being filled
  std::vector<uint8_t> out;  // chunk header + compressed bytes, reused between chunks
  std::unique_ptr<libdeflate_compressor, CompressorFree> compressor;
  uint64_t buffered_records = 0;
  uint64_t records = 0;  // records that reached the file
  uint64_t bytes = 0;    // bytes that reached the file
  bool finished = false;

  [[noreturn]] void fail(const std::string& what, int err) const {
    throw TraceError(path + ": " + what + ": " + errno_text(err));
  }

  // write(2) straight to the fd: once it returns, the bytes survive a kill -9 of this process.
  void write_all(const uint8_t* p, size_t n) {
    while (n > 0) {
      ssize_t w = ::write(fd, p, n);
      if (w < 0) {
        int err = errno;
        if (err == EINTR) continue;
        fail("write failed", err);
      }
      if (w == 0) fail("write failed", EIO);  // not expected on a regular file; do not spin
      p += w;
      n -= static_cast<size_t>(w);
      bytes += static_cast<uint64_t>(w);
    }
  }

  void open_file() {
    fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) {
      int err = errno;
      throw TraceError("cannot create " + path + ": " + errno_text(err));
    }
    // open()'s mode applies only when it creates the file; an existing one keeps its mode, and
    // traces hold process names and ports, so tighten it explicitly. Only for regular files:
    // "-o /dev/null" or a FIFO must not have the device's or pipe's mode changed (we are root).
    struct stat st {};
    if (::fstat(fd, &st) != 0) close_and_throw("cannot stat ");
    if (S_ISREG(st.st_mode) && ::fchmod(fd, 0600) != 0) close_and_throw("cannot chmod 0600 ");
  }

  [[noreturn]] void close_and_throw(const char* what) {
    int err = errno;  // before close() or any allocation can change it
    ::close(fd);
    fd = -1;
    throw TraceError(what + path + ": " + errno_text(err));
  }

  void write_header(const nlohmann::json& header) {
    std::string js = dump_object(header, "header", path);
    if (js.size() > kMaxHeaderLen) throw TraceError(path + ": trace header JSON exceeds 16 MiB");
    std::vector<uint8_t> h(kFilePrefixLen + js.size() + 4);
    std::memcpy(h.data(), kFileMagic, sizeof kFileMagic);
    put_u32(&h[8], kFormatVersion);
    put_u32(&h[12], static_cast<uint32_t>(js.size()));
    std::memcpy(&h[kFilePrefixLen], js.data(), js.size());
    put_u32(&h[kFilePrefixLen + js.size()], crc_of(reinterpret_cast<const uint8_t*>(js.data()), js.size()));
    write_all(h.data(), h.size());
  }

  // Compresses `raw` into `out` behind a chunk header and writes both with one write(2).
  // The chunk body is a zlib stream (RFC 1950), written by libdeflate: chunks are whole
  // buffers, which is what libdeflate is for, and it is faster than zlib at the same level.
  void write_chunk(uint32_t kind, const uint8_t* raw, size_t raw_len) {
    if (!compressor) {
      // Level 1: the writer has to keep up with >1M events/s on one core; ratio matters less.
      compressor.reset(libdeflate_alloc_compressor(1));
      if (!compressor) throw TraceError(path + ": out of memory for the compressor");
    }
    size_t bound = libdeflate_zlib_compress_bound(compressor.get(), raw_len);
    out.resize(kChunkHeaderLen + bound);
    size_t clen = libdeflate_zlib_compress(compressor.get(), raw, raw_len, out.data() + kChunkHeaderLen, bound);
    if (clen == 0) throw TraceError(path + ": compression failed (output above its bound)");
    std::memcpy(out.data(), kChunkMagic, sizeof kChunkMagic);
    put_u32(&out[4], kind);
    put_u32(&out[8], static_cast<uint32_t>(clen));
    put_u32(&out[12], static_cast<uint32_t>(raw_len));
    put_u32(&out[16], crc_of(out.data() + kChunkHeaderLen, clen));
    write_all(out.data(), kChunkHeaderLen + clen);
  }

  void flush_events() {
    if (buf.empty()) return;
    // Drop the buffer even when the write fails: the error is reported once, and a retry
    // would append after a partial chunk anyway (the reader resyncs past it).
    uint64_t n = buffered_records;
    buffered_records = 0;
    struct Clear {
      std::vector<uint8_t>& b;
      ~Clear() { b.clear(); }
    } clear{buf};
    write_chunk(kChunkEvents, buf.data(), buf.size());
    records += n;
  }
};

TraceWriter::TraceWriter(const std::string& path, const nlohmann::json& header, size_t chunk_bytes)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  // The reader rejects raw chunks over 64 MiB; one record (<= 64 KiB) may overshoot the limit.
  impl_->chunk_bytes = std::clamp<size_t>(chunk_bytes, 1, kMaxRawLen - 65536);
  impl_->buf.reserve(std::min<size_t>(impl_->chunk_bytes + 65536, 4u << 20));
  impl_->open_file();
  try {
    impl_->write_header(header);
  } catch (...) {
    ::close(impl_->fd);
    impl_->fd = -1;
    throw;
  }
}

TraceWriter::~TraceWriter() {
  if (!impl_ || impl_->fd < 0) return;
  try {
    if (!impl_->finished) impl_->flush_events();
  } catch (...) {
    // A destructor must not throw; the caller that cared called flush()/finish() itself.
  }
  ::close(impl_->fd);
}

void TraceWriter::append(const void* record, size_t len) {
  Impl& im = *impl_;
  if (im.finished) throw TraceError(im.path + ": append after finish()");
  const auto* p = static_cast<const uint8_t*>(record);
  // A record whose size field disagrees with len would derail every reader of this chunk.
  if (len < sizeof(ld_hdr) || len > 0xffff || get_u16(p + offsetof(ld_hdr, size)) != len)
    throw TraceError(im.path + ": bad record: length " + std::to_string(len) + " does not match its header size");
  im.buf.insert(im.buf.end(), p, p + len);
  ++im.buffered_records;
  if (im.buf.size() >= im.chunk_bytes) im.flush_events();
}

void TraceWriter::flush() {
  if (impl_->finished) return;
  impl_->flush_events();
}

void TraceWriter::finish(const nlohmann::json& trailer) {
  Impl& im = *impl_;
  if (im.finished) throw TraceError(im.path + ": finish() called twice");
  im.flush_events();
  std::string js = dump_object(trailer, "trailer", im.path);
  if (js.size() > kMaxRawLen) throw TraceError(im.path + ": trace trailer JSON exceeds 64 MiB");
  im.finished = true;
  im.write_chunk(kChunkTrailer, reinterpret_cast<const uint8_t*>(js.data()), js.size());
}

uint64_t TraceWriter::records_written() const { return impl_->records; }
uint64_t TraceWriter::bytes_written() const { return impl_->bytes; }

// ================================================================ reader
namespace {

class Reader {
 public:
  Reader(const uint8_t* data, size_t size, const std::string& name, const RecordSink& sink)
      : d_(data), n_(size), name_(name), sink_(sink), rec_(65536 / 8) {}

  ReadSummary run() {
    size_t pos = read_file_header();
    while (pos < n_) pos = read_chunk(pos);
    if (suppressed_ > 0)
      sum_.warnings.push_back(name_ + ": " + std::to_string(suppressed_) + " more problems not listed");
    return std::move(sum_);
  }

 private:
  const uint8_t* d_;
  size_t n_;
  const std::string& name_;
  const RecordSink& sink_;
  ReadSummary sum_;
  size_t suppressed_ = 0;
  std::vector<uint64_t> rec_;  // 64 KiB, 8-aligned: every record is copied here for the sink
  size_t rec_used_ = 0;        // rec_ is all zeros from this byte on
  std::vector<uint8_t> raw_;   // decompressed chunk, reused
  std::unique_ptr<libdeflate_decompressor, DecompressorFree> decompressor_;

  [[noreturn]] void fatal(const std::string& why) const { throw TraceError(name_ + ": " + why); }

  void warn(std::string msg) {
    if (sum_.warnings.size() < kMaxWarnings) sum_.warnings.push_back(std::move(msg));
    else ++suppressed_;
  }

  std::string at(size_t chunk_pos) const { return name_ + ": chunk at byte " + std::to_string(chunk_pos) + ": "; }

  // Validates the fixed prefix and the header JSON; returns the offset of the first chunk.
  size_t read_file_header() {
    size_t m = std::min(n_, sizeof kFileMagic);
    if (n_ == 0 || std::memcmp(d_, kFileMagic, m) != 0) fatal("not a latency-doctor trace (bad magic)");
    if (n_ < kFilePrefixLen) fatal("truncated inside the file header (" + std::to_string(n_) + " bytes)");
    uint32_t version = get_u32(d_ + 8);
    if (version > kFormatVersion)
      fatal("trace format version " + std::to_string(version) + " is newer than this latency-doctor supports (" +
            std::to_string(kFormatVersion) + ")");
    if (version != kFormatVersion) fatal("unsupported trace format version " + std::to_string(version));
    uint32_t hlen = get_u32(d_ + 12);
    size_t avail = n_ - kFilePrefixLen;
    if (hlen > kMaxHeaderLen || avail < 4 || hlen > avail - 4)
      fatal("file header truncated or corrupt (header length " + std::to_string(hlen) + ", " + std::to_string(avail) +
            " bytes follow)");
    const uint8_t* js = d_ + kFilePrefixLen;
    if (crc_of(js, hlen) != get_u32(js + hlen)) fatal("file header CRC mismatch (corrupt header)");
    sum_.header = parse_object(js, hlen);
    if (sum_.header.is_discarded()) fatal("file header is not a valid JSON object");
    return kFilePrefixLen + hlen + 4;
  }

  // Returns a discarded value on any error; never throws.
  static nlohmann::json parse_object(const uint8_t* p, size_t len) {
    auto j = nlohmann::json::parse(p, p + len, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return nlohmann::json(nlohmann::json::value_t::discarded);
    return j;
  }

  // Next chunk magic strictly after `pos`, or n_ when there is none (the rest is unreadable).
  size_t resync(size_t pos) const {
    if (pos + 1 >= n_) return n_;
    const void* hit = memmem(d_ + pos + 1, n_ - pos - 1, kChunkMagic, sizeof kChunkMagic);
    return hit ? static_cast<size_t>(static_cast<const uint8_t*>(hit) - d_) : n_;
  }

  size_t bad_chunk(size_t pos, const std::string& problem) {
    ++sum_.chunks_bad;
    warn(at(pos) + problem + "; skipped");
    return resync(pos);
  }

  size_t truncated(size_t pos) {
    warn(name_ + ": truncated at byte " + std::to_string(pos) + " (last " + std::to_string(n_ - pos) +
         " bytes unreadable); the trace ends there");
    return n_;
  }

  // Reads the chunk at `pos`; returns where the next one starts (n_ when done).
  size_t read_chunk(size_t pos) {
    size_t left = n_ - pos;
    if (left < sizeof kChunkMagic || std::memcmp(d_ + pos, kChunkMagic, sizeof kChunkMagic) != 0) {
      // A partial magic at the very end is a cut, anything else is garbage to skip.
      if (left < sizeof kChunkMagic && std::memcmp(d_ + pos, kChunkMagic, left) == 0) return truncated(pos);
      return bad_chunk(pos, "bad chunk magic");
    }
    if (left < kChunkHeaderLen) return truncated(pos);
    const uint8_t* h = d_ + pos;
    uint32_t kind = get_u32(h + 4), clen = get_u32(h + 8), rlen = get_u32(h + 12);
    if (clen > left - kChunkHeaderLen) {
      // Either the file was cut here (agent killed mid-write) or the length is corrupt; a later
      // chunk magic means there is more to read, so treat it as corruption.
      size_t next = resync(pos);
      if (next == n_) return truncated(pos);
      ++sum_.chunks_bad;
      warn(at(pos) + "compressed length " + std::to_string(clen) + " runs past the end of the file; skipped");
      return next;
    }
    const uint8_t* body = h + kChunkHeaderLen;
    if (crc_of(body, clen) != get_u32(h + 16)) return bad_chunk(pos, "CRC mismatch");
    // From here the CRC vouches for clen, so the next chunk starts right after this one.
    size_t next = pos + kChunkHeaderLen + clen;
    if (kind != kChunkEvents && kind != kChunkTrailer) {
      ++sum_.chunks_bad;
      warn(at(pos) + "unknown chunk kind " + std::to_string(kind) + "; skipped");
      return next;
    }
    std::string problem = inflate(body, clen, rlen);
    if (!problem.empty()) {
      ++sum_.chunks_bad;
      warn(at(pos) + problem + "; skipped");
      return next;
    }
    if (kind == kChunkEvents) walk_records(pos);
    else take_trailer(pos);
    return next;
  }

  // Decompresses into raw_ (exactly rlen bytes); returns "" or the problem.
  std::string inflate(const uint8_t* body, uint32_t clen, uint32_t rlen) {
    if (rlen > kMaxRawLen || rlen > static_cast<uint64_t>(clen) * kMaxInflateRatio + 1024)
      return "raw length " + std::to_string(rlen) + " is implausible for " + std::to_string(clen) + " compressed bytes";
    raw_.resize(rlen);
    if (!decompressor_) {
      decompressor_.reset(libdeflate_alloc_decompressor());
      if (!decompressor_) fatal("out of memory for the decompressor");
    }
    // Decodes the zlib stream whole, its adler32 checked, ~2-3x zlib's inflate.
    size_t in_len = 0, out_len = 0;
    libdeflate_result rc =
        libdeflate_zlib_decompress_ex(decompressor_.get(), body, clen, raw_.data(), rlen, &in_len, &out_len);
    if (rc == LIBDEFLATE_INSUFFICIENT_SPACE) return "decompresses to more than its raw length " + std::to_string(rlen);
    if (rc == LIBDEFLATE_BAD_DATA) return "corrupt compressed data";
    if (rc != LIBDEFLATE_SUCCESS) return "decompression failed (code " + std::to_string(rc) + ")";
    if (out_len != rlen)
      return "decompressed to " + std::to_string(out_len) + " bytes, header says " + std::to_string(rlen);
    if (in_len != clen) return "trailing bytes after the compressed stream";
    return "";
  }

  // raw_ holds concatenated records; sizes are checked before anything is copied.
  void walk_records(size_t chunk_pos) {
    const size_t total = raw_.size();
    size_t off = 0;
    while (off < total) {
      size_t left = total - off;
      if (left < sizeof(ld_hdr)) {
        return bad_record(chunk_pos, off, std::to_string(left) + " trailing bytes, shorter than a record header");
      }
      uint16_t size = get_u16(raw_.data() + off + offsetof(ld_hdr, size));
      if (size < sizeof(ld_hdr))  // includes 0, which would otherwise never advance
        return bad_record(chunk_pos, off, "size " + std::to_string(size) + " is smaller than a record header");
      if (size > left) return bad_record(chunk_pos, off, "size " + std::to_string(size) + " runs past the chunk end");
      deliver(raw_.data() + off, size);
      off += size;
    }
    ++sum_.chunks_ok;
  }

  void bad_record(size_t chunk_pos, size_t off, const std::string& problem) {
    ++sum_.chunks_bad;
    warn(at(chunk_pos) + "record at data offset " + std::to_string(off) + ": " + problem + "; rest of chunk skipped");
  }

  // Copies into 8-aligned storage: records inside raw_ sit at arbitrary offsets, and the
  // sink reinterprets them as structs with u64 fields. Only what the previous record left past
  // this one's end is cleared (not kZeroPadTo bytes per record): the zero padding still holds.
  void deliver(const uint8_t* p, uint16_t size) {
    auto* dst = reinterpret_cast<uint8_t*>(rec_.data());
    std::memcpy(dst, p, size);
    if (rec_used_ > size) std::memset(dst + size, 0, rec_used_ - size);
    rec_used_ = size;
    ++sum_.records;
    if (sink_) sink_(*reinterpret_cast<const ld_hdr*>(dst));
  }

  void take_trailer(size_t chunk_pos) {
    auto j = parse_object(raw_.data(), raw_.size());
    if (j.is_discarded()) {
      ++sum_.chunks_bad;
      warn(at(chunk_pos) + "trailer is not a valid JSON object; skipped");
      return;
    }
    sum_.trailer = std::move(j);
    ++sum_.chunks_ok;
  }
};

// Holds a read-only view of a file: mmap for regular files (traces can be GBs), read(2) into a
// buffer for anything else (a pipe).
class FileBytes {
 public:
  explicit FileBytes(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail(path, errno);
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail(path, errno);
    if (S_ISDIR(st.st_mode)) fail(path, EISDIR);
    if (S_ISREG(st.st_mode)) {
      size_ = static_cast<size_t>(st.st_size);
      if (size_ == 0) return;  // mmap of 0 bytes fails; an empty view is the right answer
      void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
      if (m == MAP_FAILED) fail(path, errno);
      map_ = m;
      ::madvise(m, size_, MADV_SEQUENTIAL);
      data_ = static_cast<const uint8_t*>(m);
    } else {
      read_all(path);
    }
  }
  ~FileBytes() {
    if (map_) ::munmap(map_, size_);
    if (fd_ >= 0) ::close(fd_);
  }
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  int fd_ = -1;
  void* map_ = nullptr;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::vector<uint8_t> buf_;

  [[noreturn]] void fail(const std::string& path, int err) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    throw TraceError("cannot read " + path + ": " + errno_text(err));
  }

  void read_all(const std::string& path) {
    uint8_t tmp[65536];
    for (;;) {
      ssize_t r = ::read(fd_, tmp, sizeof tmp);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) fail(path, errno);
      if (r == 0) break;
      buf_.insert(buf_.end(), tmp, tmp + r);
    }
    data_ = buf_.data();
    size_ = buf_.size();
  }
};

}  // namespace

ReadSummary read_trace_bytes(const uint8_t* data, size_t size, const std::string& name, const RecordSink& sink) {
  if (data == nullptr) size = 0;
  return Reader(data, size, name, sink).run();
}

ReadSummary read_trace(const std::string& path, const RecordSink& sink) {
  FileBytes f(path);
  return read_trace_bytes(f.data(), f.size(), path, sink);
}

}  // namespace ld::trace
