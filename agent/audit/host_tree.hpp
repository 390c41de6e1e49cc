// Files of the host being audited: "/" on a live host, an image or a prepared tree with
// `audit --root DIR`. Unlike util::read_file, every read says WHY it failed (missing or
// unreadable, with the errno text), because the audit reports unknowns instead of guessing.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ld::audit {

struct FileText {
  bool ok = false;
  bool missing = false;  // ENOENT/ENOTDIR: the host has no such file (often a fact in itself)
  std::string text;
  std::string error;     // "no such file", "Permission denied", "Is a directory", ...
  int error_number = 0;  // errno of the failure
};

class HostTree {
 public:
  // "" and "/" are the live host; a trailing '/' is ignored.
  explicit HostTree(std::string root);

  bool live() const { return prefix_.empty(); }
  const std::string& prefix() const { return prefix_; }  // what host/ readers take as root
  std::string display_root() const { return live() ? "/" : prefix_; }
  // The real path of a host path ("/proc/sys/vm/swappiness" -> prefix + that).
  std::string real(std::string_view host_path) const;

  // Reads at most max_bytes (kallsyms-sized files are never needed whole).
  FileText read(std::string_view host_path, size_t max_bytes = 4 << 20) const;
  // /proc/config.gz style: gunzips what read() returns; a corrupt stream is an error.
  FileText read_gzip(std::string_view host_path, size_t max_bytes = 16 << 20) const;
  bool exists(std::string_view host_path) const;
  bool is_dir(std::string_view host_path) const;
  // errno of stat(2) on the path, 0 when it succeeds (EACCES: there, but not for this user).
  int stat_error(std::string_view host_path) const;
  // Entry names of a directory, sorted, without "." and ".."; empty when unreadable.
  std::vector<std::string> list(std::string_view host_dir) const;
  // Host paths matching a glob pattern (nginx include), sorted.
  std::vector<std::string> glob(std::string_view host_pattern) const;

 private:
  std::string prefix_;
};

// First line without the trailing newline and surrounding blanks.
std::string first_line(std::string_view text);

}  // namespace ld::audit
