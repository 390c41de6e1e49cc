#include "util/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

namespace ld::util {

bool read_pieces(int fd, size_t chunk, const std::function<void(std::string_view)>& consume) {
  char buf[4096];
  chunk = std::min(chunk, sizeof(buf));
  off_t offset = 0;
  // The offsets are sequential, so a seq_file goes on from where it stopped instead of walking
  // again from the start; offset 0 makes it produce the contents afresh.
  while (true) {
    ssize_t n = pread(fd, buf, chunk, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    consume(std::string_view(buf, size_t(n)));
    offset += n;
  }
}

namespace {

// The whole file from offset 0, or nullopt when a read fails.
std::optional<std::string> read_from_start(int fd) {
  std::string text;
  if (!read_pieces(fd, 4096, [&](std::string_view piece) { text.append(piece); })) return std::nullopt;
  return text;
}

int open_for_reading(const std::string& path) { return open(path.c_str(), O_RDONLY | O_CLOEXEC); }

}  // namespace

std::string read_file(const std::string& path) {
  int fd = open_for_reading(path);
  if (fd < 0) return "";
  std::optional<std::string> text = read_from_start(fd);
  close(fd);
  return text.value_or("");
}

FileCache::~FileCache() { close_all(); }

void FileCache::close_all() {
  for (auto& [path, fd] : fds_) close(fd);
  fds_.clear();
}

FileReader FileCache::reader() {
  return [this](const std::string& path) { return read(path); };
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
