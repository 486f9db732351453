// CPU kernels of pow and clamp: one unit of ops/elementwise/kernel_units.h.
#include "ops/elementwise/cpu/elementwise.h"
#include "ops/elementwise/cpu/loops.h"
#include "ops/elementwise/elementwise_select.h"

TG_CPU_ELEMENTWISE_UNIT(unary, UnaryKind, UnaryUnit::Parametric)
