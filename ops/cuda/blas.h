// cuBLAS access for the CUDA back end: one handle per device, bound to the current stream and to a
// workspace from the caching allocator (so that CUDA graph capture sees no hidden allocation).
#pragma once

#include <cstdint>

#include "ops/gemm.h"

#include <library_types.h>

// cuBLAS's own opaque handle type, declared here so this header needs no cuBLAS headers.
typedef struct cublasContext* cublasHandle_t;

namespace tg::cuda {

// The cuBLAS handle of `device`, bound to this thread's current stream and to tapegraph's workspace.
// Handles are shared by all threads; callers must not use one from two threads at once.
cublasHandle_t cublas_handle(int device);
// Bytes of the cuBLAS workspace each device's handle uses (allocated once, from the default pool).
int64_t cublas_workspace_bytes();
// The workspace given to cuBLAS and cuBLASLt on `device` (cublas_workspace_bytes() long). Calls on
// one stream use it in turn; the single-stream assumption of the caching allocator applies.
void* cublas_workspace(int device);
// cuBLAS's name for a floating dtype.
cudaDataType_t cuda_data_type(DType dtype);
// Runs g with cuBLAS on the current stream of g.device: float32 (TF32 when allow_tf32()), float64, or
// 16-bit floats accumulated in float32.
void gemm(const Gemm& g);
// Runs g (batch 1, beta 0) through cuBLASLt with the algorithm timed fastest for its shape, adding
// `bias` (null: none), a contiguous vector of g.m elements broadcast over the rows of the output, in
// the epilogue: one kernel instead of a bias fill plus an accumulating gemm; with `relu`, the epilogue
// also clamps the result at 0. Returns false, having queued nothing, when cuBLASLt has no algorithm
// for it.
bool gemm_lt(const Gemm& g, const void* bias, bool relu = false);
// Turns the timing of cuBLASLt's candidate algorithms on (the default) or off (the heuristic's first
// choice, the same in every process). Shapes already seen keep their choice.
void set_gemm_autotuning(bool enabled);

}  // namespace tg::cuda
