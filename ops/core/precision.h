// Precision switches for float32 math on CUDA.
#pragma once

namespace tg {

// Lets float32 matrix products (cuBLAS/cuBLASLt) and convolutions (cuDNN) on CUDA use TF32 tensor
// cores (10-bit mantissa products, float32 accumulation), as PyTorch's allow_tf32 switches do. Off
// by default: float32 results then match a float32 reference to rounding. No effect on the CPU or on
// other dtypes.
void set_allow_tf32(bool allowed);
// Whether TF32 is allowed (set_allow_tf32).
bool allow_tf32();

}  // namespace tg
