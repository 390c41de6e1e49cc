#include "probes/privileges.hpp"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace ld::probes {
namespace {

// CAP_BPF (39) and CAP_PERFMON (38) are newer than some libc headers.
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;

void set_bit(__user_cap_data_struct (&data)[2], int cap) {
  data[cap / 32].effective |= 1u << (cap % 32);
  data[cap / 32].permitted |= 1u << (cap % 32);
}

}  // namespace

std::string drop_capabilities(bool keep_attach) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct current[2]{};
  if (syscall(SYS_capget, &header, current) != 0)
    return fmt::format("could not read capabilities: {}", std::strerror(errno));
  __user_cap_data_struct keep[2]{};
  set_bit(keep, CAP_DAC_READ_SEARCH);
  set_bit(keep, CAP_SYS_PTRACE);
  if (keep_attach) {
    set_bit(keep, CAP_SYS_ADMIN);
    set_bit(keep, kCapBpf);
    set_bit(keep, kCapPerfmon);
  }
  for (int i = 0; i < 2; ++i) {
    // Never add what we did not have.
    keep[i].effective &= current[i].permitted;
    keep[i].permitted &= current[i].permitted;
    keep[i].inheritable = 0;
  }
  if (syscall(SYS_capset, &header, keep) != 0)
    return fmt::format("could not drop capabilities after attaching: {}", std::strerror(errno));
  return "";
}

unsigned long long effective_capabilities() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) != 0) return 0;
  return (static_cast<unsigned long long>(data[1].effective) << 32) | data[0].effective;
}

}  // namespace ld::probes
