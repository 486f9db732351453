// CPU kernels of neg, abs, square, sgn, relu and trunc: one unit of ops/elementwise/kernel_units.h.
#include "ops/elementwise/cpu/elementwise.h"
#include "ops/elementwise/cpu/loops.h"
#include "ops/elementwise/elementwise_select.h"

TG_CPU_ELEMENTWISE_UNIT(unary, UnaryKind, UnaryUnit::Basic)
