// sched: not built yet -- reported as unavailable so that reports say so honestly.
#include "probes/probe.hpp"

namespace ld::probes {
namespace {

class Pending : public Probe {
 public:
  void start(ProbeContext&) override { throw ProbeUnavailable("not implemented in this build yet"); }
  std::string detail() const override { return ""; }
};

}  // namespace

std::unique_ptr<Probe> make_sched_probe() { return std::make_unique<Pending>(); }

}  // namespace ld::probes
