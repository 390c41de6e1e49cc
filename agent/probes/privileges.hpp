// Once every probe is attached the agent only reads the ring buffer, map fds and /proc: it
// drops the capabilities it needed to load and attach (CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN,
// ...) so that a bug after attach cannot be turned into more kernel access.
#pragma once

#include <string>
#include <vector>

namespace ld::probes {

// Keeps only CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE (reading other users' /proc entries and
// token logs), plus CAP_SYS_ADMIN/CAP_BPF/CAP_PERFMON when `keep_attach` (new targets found
// later need new probes attached, e.g. --children with uprobes, or the GIL's learning uprobe).
// Returns "" or a warning.
std::string drop_capabilities(bool keep_attach);

// The effective capability bits of this process (for tests and --verbose).
unsigned long long effective_capabilities();

}  // namespace ld::probes
