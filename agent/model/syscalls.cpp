#include "model/syscalls.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>

namespace ld::model {
namespace {

struct Syscall {
  uint32_t nr;
  const char* name;
  Cause blocked_in;  // what a thread blocked in it waits for (kUnknown: the syscall does not say)
};

// x86-64 (arch/x86/entry/syscalls/syscall_64.tbl), sorted by number: the syscalls a server
// blocks in or a report names.
constexpr std::array kX86_64 = std::to_array<Syscall>({
    {0, "read", Cause::kUnknown},
    {1, "write", Cause::kUnknown},
    {2, "open", Cause::kUnknown},
    {3, "close", Cause::kUnknown},
    {7, "poll", Cause::kAppWait},
    {9, "mmap", Cause::kKvAlloc},
    {10, "mprotect", Cause::kUnknown},
    {11, "munmap", Cause::kKvAlloc},
    {12, "brk", Cause::kKvAlloc},
    {16, "ioctl", Cause::kAppWait},  // a wait for a device (a GPU driver's synchronise); rules name it
    {17, "pread64", Cause::kDiskIo},
    {18, "pwrite64", Cause::kDiskIo},
    {19, "readv", Cause::kUnknown},
    {20, "writev", Cause::kUnknown},
    {23, "select", Cause::kAppWait},
    {24, "sched_yield", Cause::kUnknown},
    {25, "mremap", Cause::kKvAlloc},
    {26, "msync", Cause::kDiskIo},
    {28, "madvise", Cause::kKvAlloc},
    {34, "pause", Cause::kUnknown},
    {35, "nanosleep", Cause::kAppWait},
    {40, "sendfile", Cause::kNetwork},
    {42, "connect", Cause::kUnknown},
    {43, "accept", Cause::kNetwork},
    {44, "sendto", Cause::kNetwork},
    {45, "recvfrom", Cause::kNetwork},
    {46, "sendmsg", Cause::kNetwork},
    {47, "recvmsg", Cause::kNetwork},
    {61, "wait4", Cause::kAppWait},
    {72, "fcntl", Cause::kUnknown},
    {73, "flock", Cause::kDiskIo},
    {74, "fsync", Cause::kDiskIo},
    {75, "fdatasync", Cause::kDiskIo},
    {76, "truncate", Cause::kUnknown},
    {77, "ftruncate", Cause::kUnknown},
    {82, "rename", Cause::kUnknown},
    {87, "unlink", Cause::kUnknown},
    {162, "sync", Cause::kDiskIo},
    {202, "futex", Cause::kLockContention},
    {208, "io_getevents", Cause::kDiskIo},
    {230, "clock_nanosleep", Cause::kAppWait},
    {232, "epoll_wait", Cause::kAppWait},
    {257, "openat", Cause::kUnknown},
    {270, "pselect6", Cause::kAppWait},
    {271, "ppoll", Cause::kAppWait},
    {277, "sync_file_range", Cause::kDiskIo},
    {281, "epoll_pwait", Cause::kAppWait},
    {285, "fallocate", Cause::kDiskIo},
    {288, "accept4", Cause::kNetwork},
    {295, "preadv", Cause::kUnknown},
    {296, "pwritev", Cause::kUnknown},
    {299, "recvmmsg", Cause::kNetwork},
    {306, "syncfs", Cause::kDiskIo},
    {307, "sendmmsg", Cause::kNetwork},
    {426, "io_uring_enter", Cause::kUnknown},
    {441, "epoll_pwait2", Cause::kAppWait},
    {449, "futex_waitv", Cause::kLockContention},
    {455, "futex_wait", Cause::kLockContention},
});

constexpr bool sorted_by_number() {
  for (size_t i = 1; i < kX86_64.size(); ++i)
    if (kX86_64[i - 1].nr >= kX86_64[i].nr) return false;
  return true;
}
static_assert(sorted_by_number(), "kX86_64 must be sorted by number, each number once");

const Syscall* find(uint32_t nr, const std::string& machine) {
  if (machine != "x86_64") return nullptr;
  auto it = std::lower_bound(kX86_64.begin(), kX86_64.end(), nr, [](const Syscall& s, uint32_t n) { return s.nr < n; });
  return it != kX86_64.end() && it->nr == nr ? &*it : nullptr;
}

}  // namespace

std::string syscall_name(uint32_t nr, const std::string& machine) {
  if (const Syscall* s = find(nr, machine)) return s->name;
  return fmt::format("syscall {}", nr);
}

Cause cause_of_blocking_syscall(uint32_t nr, const std::string& machine) {
  const Syscall* s = find(nr, machine);
  return s ? s->blocked_in : Cause::kUnknown;
}

}  // namespace ld::model
