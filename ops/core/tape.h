// The tape as the dispatcher sees it. Declared here, below autograd/, and defined there
// (autograd/op_recorder.cpp): ops/ records backward nodes without including autograd/, and every
// program that dispatches an op links the recorder.
#pragma once

#include <memory>

#include "ops/core/op.h"

namespace tg {

class Node;

namespace tape {

// A backward node for `op` over `inputs`, made before the kernel runs. It saves the inputs its
// backward reads with the versions they have now, so a later write into one is caught at backward;
// for an in-place op, `pre_write` (when defined) is saved in place of the written input.
std::shared_ptr<Node> begin_node(const OpPtr& op, const TensorList& inputs, const Tensor& pre_write);

// Links `outputs` to `node` once the kernel ran: fresh outputs get it as their grad_fn, the target of
// an in-place op has its history rebased onto it; then saves the outputs the backward reads.
// `traced` is true while a graph tracer observes the op.
void finish_node(const std::shared_ptr<Node>& node, const Op& op, const TensorList& outputs, bool traced);

}  // namespace tape
}  // namespace tg
