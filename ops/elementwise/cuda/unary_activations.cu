// CUDA kernels of the smooth activations (tanh, sigmoid, gelu, silu, softplus) and of pow and
// clamp: two units of ops/elementwise/kernel_units.h.
#include "ops/elementwise/cuda/elementwise.h"
#include "ops/elementwise/cuda/loops.cuh"
#include "ops/elementwise/elementwise_select.h"
#include "tensor/cuda/device_guard.h"

TG_CUDA_ELEMENTWISE_UNIT(unary, UnaryKind, UnaryUnit::Activation)
TG_CUDA_ELEMENTWISE_UNIT(unary, UnaryKind, UnaryUnit::Parametric)
