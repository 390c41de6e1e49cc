#include "events.h"
#include "probes/probe.hpp"

namespace ld::probes {

// Defined in NAME_probe.cpp, one file per probe.
std::unique_ptr<Probe> make_sock_probe();

const std::vector<ProbeInfo>& probe_registry() {
  static const std::vector<ProbeInfo> registry{
      {"sock", LD_PROBE_SOCK, "socket sends/receives: the token timeline", true, make_sock_probe},
  };
  return registry;
}

}  // namespace ld::probes
