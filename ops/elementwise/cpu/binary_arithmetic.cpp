// CPU kernels of add, sub, mul and div: one unit of ops/elementwise/kernel_units.h.
#include "ops/elementwise/cpu/elementwise.h"
#include "ops/elementwise/cpu/loops.h"
#include "ops/elementwise/elementwise_select.h"

TG_CPU_ELEMENTWISE_UNIT(binary, BinaryKind, BinaryUnit::Arithmetic)
