// Whole-file reads for /proc, /sys and cgroup files.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace ld::util {

// The file's contents, or "" when it cannot be read.
std::string read_file(const std::string& path);

// `fd` from offset 0 to its end, `chunk` bytes (at most 4 KiB) a pread, each piece handed to
// `consume` as it comes. For long kernel-made files read once (/proc/kallsyms, ~5 MB) without
// holding them whole. False when a read fails.
bool read_pieces(int fd, size_t chunk, const std::function<void(std::string_view)>& consume);

// How host code reads a file: read_file, or a FileCache's read.
using FileReader = std::function<std::string(const std::string& path)>;

// For files read again and again (the probes' /proc and cgroup samples, every read interval): each
// stays open and is read afresh from offset 0 (seq_file and kernfs files produce their
// contents again at offset 0). That saves the path walk of an open and the close: about half
// of what reading a small /proc or cgroup file costs, and the agent does such reads in the
// wake-ups a server thread may be waiting behind. A file that fails to read is opened again
// once (a cgroup removed and made again, a process gone and its pid reused). Read with the
// credentials of the opener: a file opened while privileged stays readable after the agent
// drops its capabilities. Not thread-safe: one user at a time.
class FileCache {
 public:
  FileCache() = default;
  ~FileCache();
  FileCache(const FileCache&) = delete;
  FileCache& operator=(const FileCache&) = delete;

  // The file's contents, or "" when it cannot be read.
  std::string read(const std::string& path);
  // A reader for host functions; valid while this cache lives.
  FileReader reader();
  size_t open_files() const { return fds_.size(); }

 private:
  static constexpr size_t kMaxOpen = 64;  // then all are closed and opened again as read
  void close_all();
  std::unordered_map<std::string, int> fds_;
};

}  // namespace ld::util
