// The syscalls of the traced host, by number: records carry the raw number (ld_offcpu.syscall_nr,
// the number the thread blocked in), and the numbers differ per architecture, so they are read
// with the traced host's table (trace header host.machine), never with the analysing host's
// <sys/syscall.h>. Only x86-64 is tabled; other machines get "syscall N" and no cause.
#pragma once

#include <cstdint>
#include <string>

#include "model/cause.hpp"

namespace ld::model {

// "fsync"; "syscall N" for numbers the table does not hold (and for every number of a machine
// other than x86_64).
std::string syscall_name(uint32_t nr, const std::string& machine = "x86_64");

// The cause a thread blocked in syscall `nr` is waiting for, before looking at who woke it:
// fsync -> disk_io, futex -> lock_contention, nanosleep/epoll/poll -> app_wait, mmap -> kv_alloc,
// socket IO -> network; unknown when the syscall says nothing (read/write: depends on the file).
Cause cause_of_blocking_syscall(uint32_t nr, const std::string& machine = "x86_64");

}  // namespace ld::model
