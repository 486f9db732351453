// CUDA kernels of the comparisons: the units of eq, ne and of lt, le (gt and ge run as those two)
// of ops/elementwise/kernel_units.h.
#include "ops/elementwise/cuda/elementwise.h"
#include "ops/elementwise/cuda/loops.cuh"
#include "ops/elementwise/elementwise_select.h"
#include "tensor/cuda/device_guard.h"

TG_CUDA_ELEMENTWISE_UNIT(compare, CompareKind, CompareUnit::Equality)
TG_CUDA_ELEMENTWISE_UNIT(compare, CompareKind, CompareUnit::Order)
