// The ops the fuzzer draws from: one table entry per op, holding how to draw its attributes for
// given operands, how to apply it, and how to print it as C++. A new op joins the fuzzer by adding
// one entry to the table in fuzz_ops.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fuzz/fuzz_program.h"

namespace tg::fuzz {

// Operand names of a printer.
using Names = std::vector<std::string>;

// v[from..to) as a C++ braced list ("{1, 2}") and as a Python list ("[1, 2]"), for printers.
std::string ints(const std::vector<int64_t>& v, size_t from = 0, size_t to = SIZE_MAX);
std::string py_ints(const std::vector<int64_t>& v, size_t from = 0, size_t to = SIZE_MAX);

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
  // The PyTorch expression of the op over operand names, with `torch`, `F` (torch.nn.functional)
  // and the helpers of tests/fuzz/torch_oracle.py in scope; parameters are named p<index>. Unset
  // for an op with no PyTorch counterpart (random ops): the PyTorch oracle does not draw it.
  std::function<std::string(const Names&, const Attrs&)> python;
  // Drawn only for the PyTorch oracle (ops joined after the compiled-vs-eager fuzzer's seeds were
  // fixed: those seeds draw from the ops before the first such entry, so they keep their programs).
  bool oracle_only = false;
  // Drawn only by the compiled-vs-eager fuzzer's second random stream (fuzz_calls.cpp), after the
  // program its seed drew: ops joined since its seeds were fixed, and ones reading scalar arguments.
  bool extension = false;
};

// Every op the fuzzer can generate.
const std::vector<FuzzOp>& fuzz_ops();
// How many leading entries of fuzz_ops() the compiled-vs-eager fuzzer draws from.
size_t legacy_op_count();
// How many leading entries the PyTorch oracle draws from (all but the extension ops).
size_t oracle_op_count();
// The modules and other ops only the PyTorch oracle draws (appended to fuzz_ops()).
void add_oracle_ops(std::vector<FuzzOp>& ops);
// The extension ops (appended after the oracle's): scalar_arg, topk with its gradient, multinomial,
// checkpoint regions, linear_cross_entropy over the operand's own rows and multi_tensor_norm.
void add_extension_ops(std::vector<FuzzOp>& ops);
// The index of the scalar_arg op (statements reading scalar arguments, placed by the generator).
int scalar_arg_op();

}  // namespace tg::fuzz
