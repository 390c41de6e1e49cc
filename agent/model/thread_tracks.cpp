#include "model/thread_tracks.hpp"

namespace ld::model {

const char* thread_state_name(ThreadState state) {
  switch (state) {
    case ThreadState::kRunning: return "running";
    case ThreadState::kRunnable: return "runnable";
    case ThreadState::kBlocked: return "blocked";
  }
  return "?";
}

}  // namespace ld::model
