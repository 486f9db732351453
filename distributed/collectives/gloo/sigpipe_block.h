// Gloo writes to its sockets without MSG_NOSIGNAL, so a peer that died mid-transfer would kill this
// process with SIGPIPE before the failure could be named (Python, where PyTorch runs Gloo, ignores
// SIGPIPE from the start; a C++ program does not). This scope blocks SIGPIPE in the calling
// thread instead: Gloo's write then fails with EPIPE and becomes a named error. Threads started
// inside the scope (Gloo's event loop) keep it blocked. See Note [CPU collectives] in
// docs/data_parallel.md.
#pragma once

#include <signal.h>

namespace tg::distributed {

// Blocks SIGPIPE in this thread for the scope's life. On exit it discards a SIGPIPE the scope's
// writes left pending (so unblocking does not deliver it) and restores the thread's signal mask;
// where SIGPIPE was blocked already it changes nothing.
class SigpipeBlock {
 public:
  SigpipeBlock();
  ~SigpipeBlock();
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t previous_;
  bool was_blocked_ = false;
};

}  // namespace tg::distributed
