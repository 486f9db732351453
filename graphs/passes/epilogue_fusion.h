// Fusions of compiled graphs, applied after partitioning (eager mode runs the unfused ops). They
// give a matrix product the work around it, which cuBLASLt then does in the product's epilogue.
#pragma once

#include <cstddef>

#include "graphs/capture/joint.h"
#include "graphs/ir/graph.h"
#include "graphs/partition/partition.h"

namespace tg::graphs {

// The epilogue fusion pass over both graphs of a partition (CompileOptions::fuse_epilogues): linear
// + ReLU and linear + tanh GELU in both graphs, ReLU gradient + bias gradient in the backward, and
// with `gradients` (fuse_gradient_epilogues) the activation gradients and bias gradients into the
// backward products. Logs the counts under TG_LOGS=fusion.
void fuse_epilogues(Partition& partition, const JointGraph& joint, bool gradients);

// Replaces each linear whose result only a relu reads (and that is no graph output) and that relu
// with one linear_relu node (on CUDA the ReLU then runs in the matmul's epilogue: one kernel, one
// pass over the output fewer). Returns how many pairs it fused.
int fuse_linear_relu(Graph& graph);

// Replaces each CUDA linear whose result a tanh GELU reads, and that GELU, with one
// linear_gelu_tanh node computing both the GELU and the pre-activation (which may still have other
// readers, the backward's gelu_backward among them). Returns how many pairs it fused.
int fuse_linear_gelu_tanh(Graph& graph);

// Replaces each threshold_backward (a ReLU's gradient) whose result a sum_to_size over all but the
// last dimension also reads (a bias gradient) and that sum with one relu_backward_bias_grad node
// producing both (one kernel on CUDA, where the two took two passes). Returns how many it fused.
int fuse_relu_backward_bias_grad(Graph& graph);

// The same for each tanh gelu_backward on CUDA: one gelu_tanh_backward_bias_grad node, one kernel.
int fuse_gelu_tanh_backward_bias_grad(Graph& graph);

// On CUDA, folds the product before each ReLU gradient into it: mm(g, w) read only by a
// relu_backward_bias_grad(h, y) whose y the forward's linear_relu computed becomes one
// mm_relu_backward_bias_grad(g, w, y, mask) (cuBLASLt's DRELU_BGRAD). The forward node becomes a
// linear_relu_mask writing the mask, which joins the saved values: a new last forward output (the
// saved values start at forward output `first_saved`) and backward input. Returns how many it fused.
int fuse_relu_mask_gradients(Partition& partition, size_t first_saved);

// On CUDA, mm(g, w) read only by a tanh gelu_backward(h, pre) whose result a bias-gradient
// sum_to_size also reads become one mm_gelu_tanh_backward_bias_grad(g, w, pre) (one node; its
// kernels stay separate, as cuBLASLt's DGELU_BGRAD loses the tanh's far negative tail).
// Returns how many it fused.
int fuse_gelu_tanh_gradients(Graph& graph);

// On CUDA, a weight gradient mm(t(g), x) and a bias gradient sum_to_size(g) of the same 2-D g
// become one linear_weight_bias_grad(g, x) (BGRADB: the sum in the product's epilogue). Returns how
// many pairs it fused.
int fuse_weight_bias_grads(Graph& graph);

}  // namespace tg::graphs
