// Steps of a training loop, as CUDA-graph replays see them: outputs of an earlier step may be
// overwritten; outputs of the current step (and activations saved for a pending backward) may not.
#pragma once

#include <cstdint>
#include <memory>

namespace tg {

// Declares that a new iteration begins: outputs of compiled CUDA-graph functions from earlier
// iterations may now be overwritten by replays (reading them afterwards raises an error).
void mark_step_begin();

class Tensor;
// Marks a tensor whose address stays fixed across calls (a buffer refilled in place, an optimizer
// state): CUDA graphs read it, and every view of its memory, in place instead of copying it into a
// buffer of their own (a different address records anew). Parameters captured by a compiled function
// are static already.
void mark_static_address(const Tensor& t);

namespace graphs {

// True for tensors over memory given to mark_static_address.
bool is_static_address(const Tensor& t);

// The current step number.
uint64_t current_step();
// Called by forward executors before running: starts a new step when no backward is pending.
void begin_forward_call();
// Counts a compiled backward as pending until the returned token is destroyed.
std::shared_ptr<void> pending_backward_token();
// True while some compiled backward is pending (its saved activations may still be read).
bool backward_pending();

}  // namespace graphs
}  // namespace tg
