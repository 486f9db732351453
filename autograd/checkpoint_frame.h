// The saved-tensor side of checkpoint(): where SavedTensor puts what it saves while a checkpointed
// function runs forward (a place in the function's frame) or runs again in the backward (the
// frame's recomputed tensors). Only saved_tensor.cpp and checkpoint.cpp use it.
#pragma once

#include <cstddef>
#include <memory>

namespace tg {

class SavedTensor;
class CheckpointFrame;

namespace checkpoint_hooks {

// The frame of the checkpointed function running forward on this thread (its saves become
// places), or null.
std::shared_ptr<CheckpointFrame> packing_frame();
// Reserves the frame's next place.
size_t reserve(CheckpointFrame& frame);
// Called with each tensor saved on this thread: kept when a recomputation is running.
void record(const SavedTensor& saved);
// What the recomputation saved for place `place`, recomputing the frame on first use.
const SavedTensor& recomputed(CheckpointFrame& frame, size_t place);
// Place `place` will not be read again (a backward that does not retain the graph ran its node).
void release(CheckpointFrame& frame, size_t place);

}  // namespace checkpoint_hooks
}  // namespace tg
