// The ordered list of optimizing passes: each entry is one pass over the partition's graphs.
#include "graphs/passes/optimize.h"

#include <string>

#include "graphs/compile_options.h"
#include "graphs/logs.h"
#include "graphs/passes/elementwise_fusion.h"
#include "graphs/passes/epilogue_fusion.h"
#include "graphs/passes/schedule_collectives.h"

namespace tg::graphs {
namespace {

// Linear + activation into cuBLASLt epilogues, and (fuse_gradient_epilogues) the activations'
// gradients and bias gradients into the backward products.
void fuse_epilogues(Partition& p, const JointGraph& joint, bool gradients) {
  const int relu = fuse_linear_relu(p.forward) + fuse_linear_relu(p.backward);
  const int gelu = fuse_linear_gelu_tanh(p.forward) + fuse_linear_gelu_tanh(p.backward);
  const int relu_bias = fuse_relu_backward_bias_grad(p.backward);
  const int relu_mm = gradients ? fuse_relu_mask_gradients(p, joint.num_user_outputs + joint.mutated.size()) : 0;
  const int gelu_mm = gradients ? fuse_gelu_tanh_gradients(p.backward) : 0;
  const int weight_bias = gradients ? fuse_weight_bias_grads(p.backward) : 0;
  if (relu + gelu + relu_bias + relu_mm + gelu_mm + weight_bias == 0) return;
  log_line("fusion", std::to_string(relu) + " linear + relu pair(s) fused into linear_relu, " + std::to_string(gelu) +
                         " linear + tanh gelu into linear_gelu_tanh, " + std::to_string(relu_bias) +
                         " relu gradient + bias gradient into relu_backward_bias_grad, then " +
                         std::to_string(relu_mm) + " of those and " + std::to_string(gelu_mm) +
                         " tanh gelu gradient(s) into the product before them (" + std::to_string(relu_mm) +
                         " ReLU mask(s) saved), " + std::to_string(weight_bias) +
                         " weight + bias gradient pair(s) into linear_weight_bias_grad");
}

// Chains and DAGs of elementwise CUDA ops into generated kernels.
void fuse_elementwise(Partition& p) {
  const int forward = fuse_elementwise_chains(p.forward);
  const int backward = fuse_elementwise_chains(p.backward);
  if (forward + backward > 0)
    log_line("fusion", std::to_string(forward) + " forward and " + std::to_string(backward) +
                           " backward group(s) of elementwise ops fused into fused_elementwise");
}

}  // namespace

void optimize(Partition& partition, const JointGraph& joint, const CompileOptions& options) {
  if (options.fuse_epilogues) fuse_epilogues(partition, joint, options.fuse_gradient_epilogues);
  if (options.fuse_elementwise) fuse_elementwise(partition);
  // Last: fusions change which nodes a collective waits for.
  schedule_collectives_early(partition.forward);
  schedule_collectives_early(partition.backward);
}

}  // namespace tg::graphs
