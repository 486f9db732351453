// The CUDA path of fused_elementwise: a kernel generated per signature, compiled with NVRTC for the
// running device, loaded once and launched with cuLaunchKernel (which stream capture records).
#pragma once

#include <cstddef>
#include <string>

#include "ops/elementwise/fused_elementwise.h"

namespace tg::cuda {

// Writes `out` from `inputs` with the kernel generated for `program` (whose signature() is
// `signature`) and the operands' layout. A new signature is compiled and loaded first, which a
// stream under capture cannot do: then it throws, naming the fix (run once outside capture).
void launch_fused_elementwise(const FusedProgram& program, const std::string& signature, const TensorList& inputs,
                              const Tensor& out);

// Kernels compiled and loaded so far, over all devices.
size_t fused_kernels_loaded();

}  // namespace tg::cuda
