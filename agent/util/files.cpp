#include "util/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

#include "util/pacing.hpp"

namespace ld::util {

namespace {

// The whole file from offset 0, or nullopt when a read fails.
std::optional<std::string> read_from_start(int fd) {
  std::string text;
  char chunk[4096];
  off_t offset = 0;
  while (true) {
    ssize_t n = pread(fd, chunk, sizeof(chunk), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return text;
    text.append(chunk, size_t(n));
    offset += n;
  }
}

int open_for_reading(const std::string& path) {
  return open(path.c_str(), O_RDONLY | O_CLOEXEC);
}

}  // namespace

std::string read_file(const std::string& path) {
  int fd = open_for_reading(path);
  if (fd < 0) return "";
  std::optional<std::string> text = read_from_start(fd);
  close(fd);
  return text.value_or("");
}

std::string read_file_paced(const std::string& path) {
  int fd = open_for_reading(path);
  if (fd < 0) return "";
  pace();  // opening /proc/PID/maps checks ptrace access and takes the mm: ~0.1 ms cold
  std::string text;
  char chunk[1024];  // a seq_file makes about as much as is asked per read
  while (true) {
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(chunk, size_t(n));
    pace();
  }
  close(fd);
  return text;
}

FileCache::~FileCache() { close_all(); }

void FileCache::close_all() {
  for (auto& [path, fd] : fds_) close(fd);
  fds_.clear();
}

FileReader FileCache::reader() {
  return [this](const std::string& path) {
    pace();
    return read(path);
  };
}

std::string FileCache::read(const std::string& path) {
  auto it = fds_.find(path);
  if (it != fds_.end()) {
    if (std::optional<std::string> text = read_from_start(it->second)) return *text;
    close(it->second);  // stale: open it again below
    fds_.erase(it);
  }
  int fd = open_for_reading(path);
  if (fd < 0) return "";
  std::optional<std::string> text = read_from_start(fd);
  if (!text) {
    close(fd);
    return "";
  }
  if (fds_.size() >= kMaxOpen) close_all();
  fds_.emplace(path, fd);
  return *text;
}

}  // namespace ld::util
