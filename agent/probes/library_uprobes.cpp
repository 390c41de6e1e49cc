#include "probes/library_uprobes.hpp"

#include <unistd.h>

#include <bpf/libbpf.h>

#include <cerrno>

#include <fmt/format.h>

#include "probes/process_search.hpp"

namespace ld::probes {

int attach_entry_point(UprobeProc& p, const std::string& file, uint64_t offset, uint64_t cookie, bpf_program* entry,
                       bpf_program* ret) {
  LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie, .retprobe = true);
  const int pid = static_cast<int>(p.tgid);
  bpf_link* ret_link = nullptr;
  if (ret) {
    ret_link = bpf_program__attach_uprobe_opts(ret, pid, file.c_str(), offset, &opts);
    if (!ret_link) return -errno;
  }
  opts.retprobe = false;
  bpf_link* entry_link = bpf_program__attach_uprobe_opts(entry, pid, file.c_str(), offset, &opts);
  if (!entry_link) {
    const int err = -errno;
    if (ret_link) bpf_link__destroy(ret_link);
    return err;
  }
  if (ret_link) p.links.push_back(ret_link);
  p.links.push_back(entry_link);
  return 0;
}

void detach(UprobeProc& p) {
  for (bpf_link* l : p.links) bpf_link__destroy(l);
  p.links.clear();
}

std::string maps_or_gone(UprobeProc& p, uint64_t now) {
  std::string maps = read_process_maps(p.tgid, now);
  if (maps.empty()) {
    p.gone = true;
    p.searching = false;
  }
  return maps;
}

void forget_if_exited(UprobeProc& p) {
  if (p.gone || access(fmt::format("/proc/{}", p.tgid).c_str(), F_OK) == 0) return;
  detach(p);
  p.gone = true;
  p.searching = false;
}

std::string describe_libraries(const UprobeProc& p) {
  std::string libs;
  for (const UprobeLibrary& l : p.libs) {
    libs += libs.empty() ? "" : ", ";
    libs += l.error.empty() ? fmt::format("{} ({} entry points)", l.path, l.attached)
                            : fmt::format("{} ({} entry points; {})", l.path, l.attached, l.error);
  }
  return libs;
}

}  // namespace ld::probes
