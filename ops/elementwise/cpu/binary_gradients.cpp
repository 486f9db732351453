// CPU kernels of the fused gradients of tanh, sigmoid, relu, gelu and silu: a unit of ops/elementwise/kernel_units.h.
#include "ops/elementwise/cpu/elementwise.h"
#include "ops/elementwise/cpu/loops.h"
#include "ops/elementwise/elementwise_select.h"

TG_CPU_ELEMENTWISE_UNIT(binary, BinaryKind, BinaryUnit::Gradients)
