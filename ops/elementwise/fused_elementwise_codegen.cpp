// The CUDA C++ of fused elementwise groups. See Note [Elementwise fusion] in docs/elementwise_fusion.md.
#include "ops/elementwise/fused_elementwise_codegen.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>

#include "ops/elementwise/elementwise_math_source.h"

namespace tg {
namespace {

// Concatenation by appending (chains of + on string literals trip a false GCC 12 -Wrestrict warning).
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::string s;
  (s.append(parts), ...);
  return s;
}

// name(args...) as CUDA C++.
template <typename... Args>
std::string call(const char* name, const std::string& first, const Args&... rest) {
  std::string s = cat(name, "(", first);
  ((s.append(", "), s.append(rest)), ...);
  s.append(")");
  return s;
}

// Literals with exactly the value the eager functor would hold (hex floats are exact).
std::string float_literal(float v) {
  char buf[64];
  if (std::isfinite(v)) {
    std::snprintf(buf, sizeof buf, "(%af)", static_cast<double>(v));
  } else {
    uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    std::snprintf(buf, sizeof buf, "__int_as_float((int)0x%08xu)", bits);
  }
  return buf;
}

std::string double_literal(double v) {
  char buf[64];
  if (std::isfinite(v)) {
    std::snprintf(buf, sizeof buf, "(%a)", v);
  } else {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    std::snprintf(buf, sizeof buf, "__longlong_as_double((long long)0x%016llxull)", static_cast<unsigned long long>(bits));
  }
  return buf;
}

std::string int64_literal(int64_t v) {
  if (v == std::numeric_limits<int64_t>::min()) return "(-9223372036854775807LL - 1)";
  return cat("(", std::to_string(v), "LL)");
}

// `s` converted to dtype `t` as Scalar::to<T>() converts it, spelled as a CUDA C++ constant.
std::string scalar_literal(const Scalar& s, DType t) {
  switch (t) {
    case DType::Bool: return s.to<bool>() ? "true" : "false";
    case DType::Int32: return cat("((int)", int64_literal(s.to<int32_t>()), ")");
    case DType::Int64: return int64_literal(s.to<int64_t>());
    case DType::Float16: return float_literal(static_cast<float>(s.to<Half>()));
    case DType::BFloat16: return float_literal(static_cast<float>(s.to<BFloat16>()));
    case DType::Float32: return float_literal(s.to<float>());
    case DType::Float64: return double_literal(s.to<double>());
  }
  TG_FAIL("[fused_elementwise] no CUDA constant for dtype ", dtype_name(t));
}

// The kernel's prelude: the 16-bit storage conversions, then ops/elementwise/elementwise_math.h itself, whose
// functors every step calls, so a fused kernel runs the eager kernels' formulas.
std::string preamble() {
  std::string s;
  s += "#define TG_D static __device__ __forceinline__\n";
  // 16-bit floats are held as their bits and computed in float; conversions round to nearest even
  // (PTX cvt.rn), as the eager kernels' conversions do.
  s += R"(TG_D float tg_from_bf16(unsigned short h) { return __uint_as_float(static_cast<unsigned int>(h) << 16); }
TG_D unsigned short tg_to_bf16(float f) { unsigned short r; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f)); return r; }
TG_D float tg_from_f16(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
TG_D unsigned short tg_to_f16(float f) { unsigned short r; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f)); return r; }
TG_D float tg_round_bf16(float f) { return tg_from_bf16(tg_to_bf16(f)); }
TG_D float tg_round_f16(float f) { return tg_from_f16(tg_to_f16(f)); }
)";
  s += "// ---- ops/elementwise/elementwise_math.h ----\n";
  s += kElementwiseMathSource;
  s += "// ---- end of ops/elementwise/elementwise_math.h ----\nnamespace ew = tg::ew;\n\n";
  return s;
}

// A parameter the eager functor holds in its accumulation type (float for 16-bit dtypes).
std::string acc_literal(const Scalar& s, DType t) {
  return scalar_literal(s, t == kFloat16 || t == kBFloat16 ? kFloat32 : t);
}

// The constants a functor is built from, as ew::make_functor builds it from EwParams.
std::vector<std::string> functor_fields(EwParamKind kind, const EwParams& p, DType t) {
  switch (kind) {
    case EwParamKind::None: return {};
    case EwParamKind::Alpha: return {scalar_literal(p.alpha, t)};
    case EwParamKind::Exponent: return {scalar_literal(p.exponent, t)};
    case EwParamKind::Clamp:
      return {scalar_literal(p.lo.value_or(Scalar(0)), t), scalar_literal(p.hi.value_or(Scalar(0)), t),
              p.lo ? "true" : "false", p.hi ? "true" : "false"};
    case EwParamKind::Softplus: return {acc_literal(p.beta, t), acc_literal(p.threshold, t)};
  }
  TG_FAIL("[fused_elementwise] unknown functor parameters ", static_cast<int>(kind));
}

// ew::Fn<T>{fields}(operands): the functor the eager kernels run, at the step's compute type.
std::string functor_call(const char* functor, DType t, const std::vector<std::string>& fields,
                         const std::vector<std::string>& operands) {
  std::string s = cat("ew::", functor, "<", cuda_type_names(t).compute, ">{");
  for (size_t i = 0; i < fields.size(); ++i) s.append(i ? ", " : "").append(fields[i]);
  s.append("}(");
  for (size_t i = 0; i < operands.size(); ++i) s.append(i ? ", " : "").append(operands[i]);
  s.append(")");
  return s;
}

// Two operands of a functor, one of which may be the op's bound host scalar.
void bind_scalar(const PointwiseMath& m, std::vector<std::string>& args) {
  if (m.params.side == ScalarSide::None) return;
  const std::string s = scalar_literal(m.params.scalar, m.compute);
  if (m.params.side == ScalarSide::Right) args.push_back(s);
  else args.insert(args.begin(), s);
}

// The value of one step, from its operands already converted to the functor's types.
std::string step_expression(const PointwiseMath& m, std::vector<std::string> args) {
  const DType t = m.compute;
  switch (m.family) {
    case PointwiseFamily::Unary: {
      const UnaryInfo& u = unary_info(m.unary);
      return functor_call(u.functor, t, functor_fields(u.params, m.params, t), {args.at(0)});
    }
    case PointwiseFamily::Binary: {
      const BinaryInfo& b = binary_info(m.binary);
      bind_scalar(m, args);
      return functor_call(b.functor, t, functor_fields(b.params, m.params, t), {args.at(0), args.at(1)});
    }
    case PointwiseFamily::Compare:
      bind_scalar(m, args);
      return functor_call(compare_info(m.compare).functor, t, {}, {args.at(0), args.at(1)});
    case PointwiseFamily::Where: return functor_call("WhereFn", t, {}, {args.at(0), args.at(1), args.at(2)});
    case PointwiseFamily::Convert: return args.at(0);
  }
  TG_FAIL("[fused_elementwise] unknown pointwise family ", static_cast<int>(m.family));
}

// `value` rounded to a 16-bit float dtype's precision (it stays a float); other dtypes as they are.
std::string rounded(const std::string& value, DType t) {
  if (t == kFloat16) return call("tg_round_f16", value);
  if (t == kBFloat16) return call("tg_round_bf16", value);
  return value;
}

// `value` (held in `from`'s compute type) as dtype `to`'s compute type, rounded to `to`'s precision.
std::string converted(const std::string& value, DType from, DType to) {
  if (from == to) return value;
  const char* from_type = cuda_type_names(from).compute;
  const char* to_type = cuda_type_names(to).compute;
  const std::string cast = std::strcmp(from_type, to_type) == 0 ? value : cat("static_cast<", to_type, ">(", value, ")");
  return rounded(cast, to);
}

// An element of an operand in memory (storage type) as its dtype's compute type, and back.
std::string loaded(const std::string& element, DType t) {
  if (t == kFloat16) return call("tg_from_f16", element);
  if (t == kBFloat16) return call("tg_from_bf16", element);
  return element;
}

std::string stored(const std::string& value, DType t) {
  if (t == kFloat16) return call("tg_to_f16", value);
  if (t == kBFloat16) return call("tg_to_bf16", value);
  return cat("static_cast<", cuda_type_names(t).storage, ">(", value, ")");
}

std::string operand_field(size_t k) { return k == 0 ? std::string("out") : cat("in", std::to_string(k - 1)); }

std::string element_index(const FusedGeometry& g, size_t k) {
  switch (g.access[k]) {
    case OperandAccess::Linear: return "i";
    case OperandAccess::Broadcast: return "0";
    case OperandAccess::Strided: return cat("off_", operand_field(k));
  }
  return "i";
}

}  // namespace

CudaTypeNames cuda_type_names(DType dtype) {
  switch (dtype) {
    case DType::Bool: return {"bool", "bool"};
    case DType::Int32: return {"int", "int"};
    case DType::Int64: return {"long long", "long long"};
    case DType::Float16:
    case DType::BFloat16: return {"unsigned short", "float"};
    case DType::Float32: return {"float", "float"};
    case DType::Float64: return {"double", "double"};
  }
  TG_FAIL("[fused_elementwise] no CUDA type for dtype ", dtype_name(dtype));
}

bool FusedGeometry::any_strided() const {
  for (OperandAccess a : access)
    if (a == OperandAccess::Strided) return true;
  return false;
}

FusedGeometry fused_geometry(const TensorMeta& out, const std::vector<TensorMeta>& inputs) {
  const size_t nd = out.sizes.size();
  const size_t nops = inputs.size() + 1;
  FusedGeometry g;
  g.numel = shape_numel(out.sizes);
  // Innermost first; inputs aligned to the output's trailing dims, stride 0 where they broadcast.
  std::vector<int64_t> sizes(nd);
  std::vector<std::vector<int64_t>> strides(nops, std::vector<int64_t>(nd, 0));
  const Shape out_strides = out.strides.size() == nd ? out.strides : contiguous_strides(out.sizes);
  for (size_t d = 0; d < nd; ++d) {
    sizes[nd - 1 - d] = out.sizes[d];
    strides[0][nd - 1 - d] = out_strides[d];
  }
  for (size_t k = 1; k < nops; ++k) {
    const TensorMeta& m = inputs[k - 1];
    const Shape in_strides = m.strides.size() == m.sizes.size() ? m.strides : contiguous_strides(m.sizes);
    TG_CHECK(m.sizes.size() <= nd, "[fused_elementwise] input of shape ", shape_str(m.sizes),
             " has more dims than the output ", shape_str(out.sizes));
    for (size_t d = 0; d < m.sizes.size(); ++d) {
      const size_t inner = m.sizes.size() - 1 - d;  // position counted from the innermost dim
      TG_CHECK(m.sizes[d] == sizes[inner] || m.sizes[d] == 1, "[fused_elementwise] input of shape ",
               shape_str(m.sizes), " does not broadcast to the output shape ", shape_str(out.sizes));
      strides[k][inner] = m.sizes[d] == 1 ? 0 : in_strides[d];
    }
  }
  // Drop size-1 dims, then merge each dim into the one inside it where every operand walks them as one.
  g.strides.assign(nops, {});
  for (size_t d = 0; d < nd; ++d) {
    if (sizes[d] == 1) continue;
    const bool merge = !g.sizes.empty() && [&] {
      for (size_t k = 0; k < nops; ++k)
        if (g.strides[k].back() * g.sizes.back() != strides[k][d]) return false;
      return true;
    }();
    if (merge) {
      g.sizes.back() *= sizes[d];
      continue;
    }
    g.sizes.push_back(sizes[d]);
    for (size_t k = 0; k < nops; ++k) g.strides[k].push_back(strides[k][d]);
  }
  if (g.sizes.empty()) {  // one element
    g.sizes.push_back(1);
    for (auto& s : g.strides) s.push_back(0);
  }
  for (size_t k = 0; k < nops; ++k) {
    bool zero = true, dense = true;
    int64_t expected = 1;
    for (size_t d = 0; d < g.sizes.size(); ++d) {
      zero = zero && g.strides[k][d] == 0;
      dense = dense && g.strides[k][d] == expected;
      expected *= g.sizes[d];
    }
    g.access.push_back(zero ? OperandAccess::Broadcast : dense ? OperandAccess::Linear : OperandAccess::Strided);
  }
  return g;
}

std::string fused_kernel_source(const FusedProgram& program, const FusedGeometry& g) {
  const size_t nin = program.input_dtypes.size();
  TG_CHECK(g.access.size() == nin + 1, "[fused_elementwise] geometry of ", g.access.size(), " operands for ", nin,
           " inputs");
  const DType out_dtype = program.steps.back().dtype;
  const size_t nd = g.sizes.size();
  std::ostringstream os;
  os << "// fused_elementwise: " << program.describe() << "\n" << preamble();
  os << "struct TgFusedArgs {\n  " << cuda_type_names(out_dtype).storage << "* out;\n";
  for (size_t k = 0; k < nin; ++k) os << "  const " << cuda_type_names(program.input_dtypes[k]).storage << "* in" << k << ";\n";
  os << "  long long numel;\n";
  if (g.any_strided()) {
    os << "  long long sizes[" << nd << "];  // innermost first\n";
    for (size_t k = 0; k <= nin; ++k)
      if (g.access[k] == OperandAccess::Strided) os << "  long long strides_" << operand_field(k) << "[" << nd << "];\n";
  }
  os << "};\n\n";
  os << "extern \"C\" __global__ void " << kFusedKernelName << "(const TgFusedArgs a) {\n";
  os << "  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;\n";
  os << "  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.numel; i += step) {\n";
  if (g.any_strided()) {
    os << "    long long rest = i;\n";
    for (size_t k = 0; k <= nin; ++k)
      if (g.access[k] == OperandAccess::Strided) os << "    long long off_" << operand_field(k) << " = 0;\n";
    os << "#pragma unroll\n    for (int d = 0; d < " << nd << "; ++d) {\n";
    os << "      const long long idx = rest % a.sizes[d];\n      rest /= a.sizes[d];\n";
    for (size_t k = 0; k <= nin; ++k)
      if (g.access[k] == OperandAccess::Strided)
        os << "      off_" << operand_field(k) << " += idx * a.strides_" << operand_field(k) << "[d];\n";
    os << "    }\n";
  }
  for (size_t k = 0; k < nin; ++k) {
    const CudaTypeNames t = cuda_type_names(program.input_dtypes[k]);
    os << "    const " << t.compute << " in" << k << " = "
       << loaded(cat("a.in", std::to_string(k), "[", element_index(g, k + 1), "]"), program.input_dtypes[k]) << ";\n";
  }
  for (size_t s = 0; s < program.steps.size(); ++s) {
    const FusedStep& step = program.steps[s];
    std::vector<std::string> args;
    for (size_t j = 0; j < step.operands.size(); ++j) {
      const FusedOperand& o = step.operands[j];
      const std::string name = cat(o.from_step ? "t" : "in", std::to_string(o.index));
      const DType held = o.from_step ? program.steps[static_cast<size_t>(o.index)].dtype
                                     : program.input_dtypes[static_cast<size_t>(o.index)];
      // where's condition is read as bool; every other operand in the functor's compute dtype.
      const DType wanted = step.math.family == PointwiseFamily::Where && j == 0 ? kBool : step.math.compute;
      args.push_back(converted(name, held, wanted));
    }
    const DType result = step.math.family == PointwiseFamily::Compare ? kBool : step.math.compute;
    const char* type = cuda_type_names(step.dtype).compute;
    // A step's result is rounded to its dtype as the op's own kernel would store it.
    // (A cast's operand was converted to the step's compute dtype already.)
    const std::string expr = step_expression(step.math, args);
    const bool exact = step.math.family == PointwiseFamily::Convert;
    const std::string value = result != step.dtype ? converted(expr, result, step.dtype)
                              : exact              ? expr
                                                   : rounded(expr, step.dtype);
    os << "    const " << type << " t" << s << " = " << value << ";  // " << step.op->name() << "\n";
  }
  os << "    a.out[" << element_index(g, 0) << "] = " << stored(cat("t", std::to_string(program.steps.size() - 1)), out_dtype)
     << ";\n";
  os << "  }\n}\n";
  return os.str();
}

std::vector<int64_t> fused_kernel_args(const FusedGeometry& g, const std::vector<const void*>& pointers) {
  TG_CHECK(pointers.size() == g.access.size(), "[fused_elementwise] ", pointers.size(), " pointers for ",
           g.access.size(), " operands");
  std::vector<int64_t> args;
  for (const void* p : pointers) args.push_back(static_cast<int64_t>(reinterpret_cast<intptr_t>(p)));
  args.push_back(g.numel);
  if (g.any_strided()) {
    args.insert(args.end(), g.sizes.begin(), g.sizes.end());
    for (size_t k = 0; k < g.access.size(); ++k)
      if (g.access[k] == OperandAccess::Strided) args.insert(args.end(), g.strides[k].begin(), g.strides[k].end());
  }
  return args;
}

}  // namespace tg
