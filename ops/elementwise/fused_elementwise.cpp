#include "ops/elementwise/fused_elementwise.h"

#include <cstdio>
#include <sstream>

#include "ops/core/dispatch.h"

#ifdef TG_WITH_CUDA
#include "ops/elementwise/cuda/fused_elementwise.h"
#endif

namespace tg {
namespace {

const OpSchema kSchema{"fused_elementwise", kElementwise | kNonDifferentiable};

std::string operand_name(const FusedOperand& o) {
  std::string s = o.from_step ? "t" : "in";
  s += std::to_string(o.index);
  return s;
}

// A scalar's kind and exact value.
std::string scalar_key(const Scalar& s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%d:%lld:%a", static_cast<int>(s.kind()), static_cast<long long>(s.to_int()),
                s.to_double());
  return buf;
}

}  // namespace

std::string FusedProgram::describe() const {
  std::ostringstream os;
  for (size_t i = 0; i < steps.size(); ++i) {
    os << (i > 0 ? "; " : "") << steps[i].op->name() << "(";
    for (size_t k = 0; k < steps[i].operands.size(); ++k) os << (k > 0 ? ", " : "") << operand_name(steps[i].operands[k]);
    const std::string attrs = steps[i].op->attrs();
    if (!attrs.empty()) os << (steps[i].operands.empty() ? "" : ", ") << attrs;
    os << ") -> t" << i;
  }
  return os.str();
}

std::string FusedProgram::signature() const {
  std::ostringstream os;
  os << "in";
  for (DType d : input_dtypes) os << static_cast<int>(d) << ",";
  for (const FusedStep& step : steps) {
    const PointwiseMath& m = step.math;
    const EwParams& p = m.params;
    os << "|" << static_cast<int>(m.family) << "." << static_cast<int>(m.unary) << "." << static_cast<int>(m.binary) << "."
       << static_cast<int>(m.compare) << " c" << static_cast<int>(m.compute) << " d" << static_cast<int>(step.dtype)
       << " a" << scalar_key(p.alpha) << " s" << static_cast<int>(p.side) << scalar_key(p.scalar) << " e"
       << scalar_key(p.exponent) << " lo" << (p.lo ? scalar_key(*p.lo) : "-") << " hi" << (p.hi ? scalar_key(*p.hi) : "-")
       << " (";
    for (const FusedOperand& o : step.operands) os << operand_name(o) << ",";
    os << ")";
  }
  return os.str();
}

const OpSchema& FusedElementwiseOp::schema() const { return kSchema; }

std::vector<TensorMeta> FusedElementwiseOp::infer(const TensorList& in) const {
  TG_CHECK(!program_.steps.empty(), "[fused_elementwise] a fused group needs at least one op");
  TG_CHECK(in.size() == program_.input_dtypes.size(), "[fused_elementwise] expected ",
           program_.input_dtypes.size(), " inputs for ", program_.describe(), ", got ", in.size());
  TensorMeta m;
  for (size_t i = 0; i < in.size(); ++i) {
    TG_CHECK(in[i].dtype() == program_.input_dtypes[i], "[fused_elementwise] input ", i, " has dtype ",
             dtype_name(in[i].dtype()), " where the fused group ", program_.describe(), " expects ",
             dtype_name(program_.input_dtypes[i]));
    m.sizes = i == 0 ? in[i].sizes() : broadcast_shapes(m.sizes, in[i].sizes(), "fused_elementwise");
  }
  m.dtype = program_.steps.back().dtype;
  m.device = in.empty() ? kCPU : common_device("fused_elementwise", in);
  return {std::move(m)};
}

void FusedElementwiseOp::eval(const TensorList& in, TensorList& out) const {
#ifdef TG_WITH_CUDA
  if (out[0].is_cuda()) {
    cuda::launch_fused_elementwise(program_, signature_, in, out[0]);
    return;
  }
#endif
  // Everywhere else the group's own ops run one after another; the last writes the output.
  TensorList results;
  results.reserve(program_.steps.size());
  for (size_t i = 0; i < program_.steps.size(); ++i) {
    const FusedStep& step = program_.steps[i];
    TensorList args;
    for (const FusedOperand& o : step.operands)
      args.push_back(o.from_step ? results[static_cast<size_t>(o.index)] : in[static_cast<size_t>(o.index)]);
    if (i + 1 == program_.steps.size()) {
      step.op->eval(args, out);
    } else {
      results.push_back(run_kernel(*step.op, args).at(0));
    }
  }
}

OpPtr fused_elementwise_op(FusedProgram program) {
  return std::make_shared<const FusedElementwiseOp>(std::move(program));
}

}  // namespace tg
