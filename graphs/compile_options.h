// What compile() is told: the options of a compiled function, and one call's arguments flattened
// into graph inputs and guarded host values. The files below compile() need these without the
// entry point itself.
#pragma once

#include <string>
#include <vector>

#include "graphs/calls/shape_buckets.h"
#include "graphs/capture/guards.h"
#include "tensor/tensor.h"

namespace tg {

// How compile() executes and partitions.
struct CompileOptions {
  std::string backend = "aot_eager";    // "eager" (no graphs), "aot_eager" (interpreter) or "cudagraphs"
  std::string partitioner = "default";  // "default" or "min_cut"
  int cache_limit = 8;                  // compiled variants per function before eager fallback (or eviction)
  bool fullgraph = false;               // raise on data-dependent code instead of running it eagerly
  int cudagraph_max_recordings = 8;     // recordings per segment (new static addresses) before eager
  bool fuse_epilogues = true;           // fuse linear + relu (cuBLASLt epilogue) and relu grad + bias grad
  bool fuse_elementwise = true;         // fuse chains of elementwise ops on CUDA into generated kernels (NVRTC)
  bool merge_split_gradients = true;    // sum the gradients of a split's pieces as one cat, not zero-filled copies
  bool batch_parameter_casts = true;    // cast parameters (and their gradients) with one multi_tensor_cast
  // Under autocast, weight gradients written in float32 by their products (mm's out_dtype) instead of
  // rounded to 16 bits and cast back, as Megatron-LM's gradient accumulation fusion does: one pass
  // over the gradients fewer. Off by default: closer to the exact gradient, but not eager's bits.
  bool float32_parameter_gradients = false;
  bool fuse_add_layer_norm = true;      // fold residual adds and casts into layer_norm (both ways) on CUDA
  // LM heads (linear -> cross_entropy, Mean or Sum) whose logits take at least this many bytes become
  // linear_cross_entropy with its gradients computed in the forward; 0 turns the rewrite off.
  int64_t fuse_linear_cross_entropy_bytes = int64_t{8} << 20;
  // With fuse_epilogues, on CUDA also fold ReLU gradients and bias gradients into the backward
  // products' cuBLASLt epilogues (DRELU_BGRAD, BGRADB; GELU gradients stay separate kernels). Off by
  // default: on an H100 these epilogue kernels made the mlp_small and mlp_wide steps slower.
  bool fuse_gradient_epilogues = false;
  // cudagraphs: record weight- and bias-gradient products and reductions on a second stream, a branch
  // of the CUDA graph that runs beside the input gradients (graphs/cudagraphs/branch_streams.h).
  bool overlap_branches = true;
  // cudagraphs only: raise a tg::Error naming the op and the reason instead of running any work outside
  // CUDA graphs: an eager island in a graph (at compilation), a call that would run eagerly
  // (data-dependent code, cache limit, no CUDA tensors), a segment that would be recorded again (a static
  // input at a new address, live outputs) or run eagerly past cudagraph_max_recordings. Warm-up runs and
  // host-to-device copies of inputs and constants are allowed (Note [Strict capture]).
  bool strict_capture = false;
  std::vector<std::string> input_names; // names used in recompile reasons (default: "input N")
  // Pads chosen dims of chosen tensor arguments up to the smallest of a few sizes, so calls whose
  // sizes keep changing share a few compiled variants; the function reads the true extent with
  // tg::bucket_extent / tg::bucket_mask and makes the padding inert (Note [Shape buckets] in
  // docs/shape_buckets.md). Turns on evict_lru.
  std::vector<ShapeBucket> shape_buckets;
  // At cache_limit, evict the least recently used variant (freeing its graphs and CUDA graph
  // recordings) and compile the new signature, instead of running new signatures eagerly.
  bool evict_lru = false;
};

namespace graphs {

// One call, flattened: its tensors (graph inputs) with display names, and its non-tensor values.
struct CallArgs {
  TensorList tensors;
  std::vector<std::string> names;  // per tensor: "input 'x'", "input 'xs'[1]"
  std::vector<HostArgument> host;  // guarded by value
};

}  // namespace graphs
}  // namespace tg
