// LM-head fusion on the joint graph: a linear whose [N, V] logits only a cross_entropy reads
// (through a reshape to rows, and autocast's cast to float32), reduced by Mean or Sum, with that
// pair's whole backward, becomes one linear_cross_entropy_grads_ahead node in the forward (the loss
// and the gradients for an upstream gradient of one, chunk by chunk: the logits never exist whole)
// and one linear_cross_entropy_grads_scale node in the backward (those gradients times the loss's).
// Only where the logits would take at least `min_logit_bytes`: small heads keep their two ops,
// which fewer kernels serve better. Runs before partitioning, so the partitioner saves the
// gradients, not the logits.
#pragma once

#include <cstdint>

#include "graphs/capture/joint.h"

namespace tg::graphs {

// Rewrites every such pair of `joint`; returns how many.
int fuse_linear_cross_entropy(JointGraph& joint, int64_t min_logit_bytes);

}  // namespace tg::graphs
