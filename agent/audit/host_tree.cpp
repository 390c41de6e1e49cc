#include "audit/host_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ld::audit {
namespace {

std::string error_text(int err) {
  if (err == ENOENT || err == ENOTDIR) return "no such file";
  return std::strerror(err);
}

FileText failed(int err) {
  FileText out;
  out.missing = err == ENOENT || err == ENOTDIR;
  out.error = error_text(err);
  out.error_number = err;
  return out;
}

}  // namespace

HostTree::HostTree(std::string root) : prefix_(std::move(root)) {
  while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
}

std::string HostTree::real(std::string_view host_path) const { return prefix_ + std::string(host_path); }

FileText HostTree::read(std::string_view host_path, size_t max_bytes) const {
  int fd = ::open(real(host_path).c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return failed(errno);
  FileText out;
  char buf[8192];
  while (out.text.size() < max_bytes) {
    ssize_t n = ::read(fd, buf, std::min(sizeof(buf), max_bytes - out.text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return failed(err);  // e.g. EISDIR, or EPERM from a locked-down tracefs file
    }
    if (n == 0) break;
    out.text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  out.ok = true;
  return out;
}

FileText HostTree::read_gzip(std::string_view host_path, size_t max_bytes) const {
  FileText raw = read(host_path);
  if (!raw.ok) return raw;
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return failed(ENOMEM);
  zs.next_in = reinterpret_cast<Bytef*>(raw.text.data());
  zs.avail_in = static_cast<uInt>(raw.text.size());
  FileText out;
  char buf[16384];
  int rc = Z_OK;
  while (rc == Z_OK && out.text.size() < max_bytes) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.text.append(buf, sizeof(buf) - zs.avail_out);
  }
  inflateEnd(&zs);
  if (rc != Z_STREAM_END && rc != Z_OK) {
    out.text.clear();
    out.error = "not a valid gzip stream";
    return out;
  }
  out.ok = true;
  return out;
}

bool HostTree::exists(std::string_view host_path) const { return access(real(host_path).c_str(), F_OK) == 0; }

bool HostTree::is_dir(std::string_view host_path) const {
  struct stat st {};
  return stat(real(host_path).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int HostTree::stat_error(std::string_view host_path) const {
  struct stat st {};
  return stat(real(host_path).c_str(), &st) == 0 ? 0 : errno;
}

std::vector<std::string> HostTree::list(std::string_view host_dir) const {
  std::vector<std::string> names;
  DIR* dir = opendir(real(host_dir).c_str());
  if (!dir) return names;
  while (dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> HostTree::glob(std::string_view host_pattern) const {
  std::vector<std::string> out;
  glob_t g{};
  // The prefix is ours, not the config author's: escape its glob characters.
  std::string escaped;
  for (char c : prefix_) {
    if (c == '*' || c == '?' || c == '[' || c == '\\') escaped.push_back('\\');
    escaped.push_back(c);
  }
  if (::glob((escaped + std::string(host_pattern)).c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i] + prefix_.size());
  }
  globfree(&g);
  return out;  // glob(3) sorts
}

std::string first_line(std::string_view text) {
  auto end = text.find('\n');
  if (end != std::string_view::npos) text = text.substr(0, end);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  return std::string(text);
}

}  // namespace ld::audit
