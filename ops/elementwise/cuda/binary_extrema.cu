// CUDA kernels of maximum, minimum and pow, and of the fused gradients of tanh, sigmoid, relu, gelu
// and silu: two units of ops/elementwise/kernel_units.h.
#include "ops/elementwise/cuda/elementwise.h"
#include "ops/elementwise/cuda/loops.cuh"
#include "ops/elementwise/elementwise_select.h"
#include "tensor/cuda/device_guard.h"

TG_CUDA_ELEMENTWISE_UNIT(binary, BinaryKind, BinaryUnit::Extrema)
TG_CUDA_ELEMENTWISE_UNIT(binary, BinaryKind, BinaryUnit::Gradients)
