// The ops the fuzzer draws from: one table entry per op, holding how to draw its attributes for
// given operands, how to apply it, and how to print it as C++. A new op joins the fuzzer by adding
// one entry to the table in fuzz_ops.cpp.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "fuzz/fuzz_program.h"

namespace tg::fuzz {

// One op of the table.
struct FuzzOp {
  std::string name;
  int arity = 1;          // tensor operands
  bool in_place = false;  // writes into operand 0 (which may be an input or a view of one)
  // Draws attributes for these operands; false when the op does not apply to them.
  std::function<bool(Rng&, const TensorList&, Attrs&)> draw;
  // Applies the op.
  std::function<Tensor(TensorList&, const Attrs&)> apply;
  // The C++ expression of the op over operand names.
  std::function<std::string(const std::vector<std::string>&, const Attrs&)> print;
};

// Every op the fuzzer can generate.
const std::vector<FuzzOp>& fuzz_ops();

}  // namespace tg::fuzz
