// See Note [CPU collectives] in docs/data_parallel.md.
#include "distributed/collectives/gloo/sigpipe_block.h"

#include <pthread.h>

#include <ctime>

namespace tg::distributed {
namespace {

sigset_t only_sigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  return set;
}

}  // namespace

SigpipeBlock::SigpipeBlock() {
  const sigset_t pipe = only_sigpipe();
  pthread_sigmask(SIG_BLOCK, &pipe, &previous_);
  was_blocked_ = sigismember(&previous_, SIGPIPE) == 1;
}

SigpipeBlock::~SigpipeBlock() {
  if (was_blocked_) return;
  const sigset_t pipe = only_sigpipe();
  sigset_t pending;
  if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
    const timespec now{0, 0};
    sigtimedwait(&pipe, nullptr, &now);
  }
  pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

}  // namespace tg::distributed
