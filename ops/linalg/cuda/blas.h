// cuBLAS access for the CUDA back end: one handle per device, bound to the current stream and to a
// workspace from the caching allocator (so that CUDA graph capture sees no hidden allocation).
#pragma once

#include <cstdint>

#include "ops/linalg/gemm.h"

#include <library_types.h>

// cuBLAS's own opaque handle type, declared here so this header needs no cuBLAS headers.
typedef struct cublasContext* cublasHandle_t;

namespace tg::cuda {

// The cuBLAS handle of `device` for this thread's current stream, bound to it and to tapegraph's
// workspace. The branch stream (tensor/cuda/forked_work.h) has a handle and workspace of its own, so
// products on both streams may run at once; every other stream shares the main one. Handles are
// shared by all threads; callers must not use one from two threads at once.
cublasHandle_t cublas_handle(int device);
// Creates the handles (and workspaces) of `device` for its current and branch streams, as a graph
// capture must find them.
void prepare_cublas_handles(int device);
// Bytes of the cuBLAS workspace each handle uses (allocated once, from the default pool).
int64_t cublas_workspace_bytes();
// The workspace given to cuBLAS and cuBLASLt on `device` for the current stream (that of its
// handle, cublas_workspace_bytes() long). Calls on one stream use it in turn.
void* cublas_workspace(int device);
// cuBLAS's name for a floating dtype.
cudaDataType_t cuda_data_type(DType dtype);
// Runs g with cuBLAS on the current stream of g.device: float32 (TF32 when allow_tf32()), float64, or
// 16-bit floats accumulated in float32.
void gemm(const Gemm& g);
// What cuBLASLt's epilogue does with a product out[n, m] = op(a) @ op(b) (the row-major view of
// ops/linalg/gemm.h) before it is stored. Auxiliary matrices are [n, m] with rows aux_ld apart.
enum class LtEpilogue : uint8_t {
  Default,       // out (+ bias)
  Relu,          // relu(out + bias)
  ReluMask,      // relu(out + bias); aux: one bit per element, set where out + bias > 0 (aux_ld in bits)
  ReluGrad,      // out * (aux bit set), bias_grad[m] = its sums over the n rows (DRELU_BGRAD)
  RowSumsOfA,    // out, and bias_grad[n] = the row sums of op(a) over k (BGRADB)
};

// The epilogue of one product and the memory it reads or writes besides the operands.
struct LtArgs {
  LtEpilogue epilogue = LtEpilogue::Default;
  const void* bias = nullptr;  // [m] vector added to every row (forward epilogues), or null
  void* bias_grad = nullptr;   // written by the gradient epilogues
  void* aux = nullptr;         // the mask or pre-activation written (forward) or read (gradients)
  int64_t aux_ld = 0;
};

// Runs g (batch 1, beta 0) through cuBLASLt with the algorithm timed fastest for its shape and
// epilogue, in one kernel. Returns false, having queued nothing, when cuBLASLt has no algorithm for
// it or a pointer is too loosely aligned for its epilogue kernels (16 bytes); the caller then
// computes the same with separate kernels.
bool gemm_lt(const Gemm& g, const LtArgs& args);
// gemm_lt adding `bias` (null: none), a contiguous vector of g.m elements broadcast over the rows of
// the output, and with `relu` clamping the result at 0: one kernel instead of a bias fill, an
// accumulating gemm and a ReLU.
inline bool gemm_lt(const Gemm& g, const void* bias, bool relu = false) {
  return gemm_lt(g, LtArgs{.epilogue = relu ? LtEpilogue::Relu : LtEpilogue::Default, .bias = bias});
}
// Turns the timing of cuBLASLt's candidate algorithms on (the default) or off (the heuristic's first
// choice, the same in every process). Shapes already seen keep their choice.
void set_gemm_autotuning(bool enabled);
// Forgets every shape's cuBLASLt plan, so the next product of each plans again (from the on-disk
// cache where it holds the shape's choice): what a new process would do.
void clear_gemm_lt_plans();

}  // namespace tg::cuda
