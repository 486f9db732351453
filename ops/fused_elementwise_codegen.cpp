#include "ops/fused_elementwise_codegen.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>

#include "ops/functors.h"

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

// A decimal that reads back as exactly `v` (finite values).
std::string exact_decimal(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s(buf);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
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

// `s` as a floating dtype `t` holds it, widened to double.
double floating_value(const Scalar& s, DType t) {
  switch (t) {
    case DType::Float16: return static_cast<float>(s.to<Half>());
    case DType::BFloat16: return static_cast<float>(s.to<BFloat16>());
    case DType::Float32: return s.to<float>();
    default: return s.to<double>();
  }
}

// Device functions mirroring ops/functors.h, one per functor, in the same arithmetic order so that
// a fused kernel computes what the separate kernels compute (up to contraction into FMAs).
std::string preamble() {
  const std::string sqrt1_2 = exact_decimal(ew::kSqrt1_2);
  const std::string inv_sqrt_2pi = exact_decimal(ew::kInvSqrt2Pi);
  const std::string sqrt2_over_pi = exact_decimal(ew::kSqrt2OverPi);
  const std::string coeff = exact_decimal(ew::kGeluCoeff);
  const std::string coeff3 = exact_decimal(3 * ew::kGeluCoeff);
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
  // One spelling for float and double math (CUDA's device math library, as the eager kernels use).
  const char* math[][3] = {{"exp", "expf", "exp"},     {"log", "logf", "log"},       {"sin", "sinf", "sin"},
                           {"cos", "cosf", "cos"},     {"tanh", "tanhf", "tanh"},    {"erf", "erff", "erf"},
                           {"sqrt", "sqrtf", "sqrt"},  {"trunc", "truncf", "trunc"}, {"abs", "fabsf", "fabs"},
                           {"log1p", "log1pf", "log1p"}};
  for (const auto& m : math) {
    s += cat("TG_D float tg_", m[0], "(float x) { return ", m[1], "(x); }\n");
    s += cat("TG_D double tg_", m[0], "(double x) { return ", m[2], "(x); }\n");
  }
  s += "TG_D float tg_powf(float x, float y) { return powf(x, y); }\n";
  s += "TG_D double tg_powf(double x, double y) { return pow(x, y); }\n";
  s += R"(// Integer forms (floats take the overloads above).
template <typename T> TG_D T tg_abs(T a) { return a < T(0) ? T(-a) : a; }
template <typename T> TG_D T tg_trunc(T a) { return a; }
template <typename T> TG_D T tg_sgn(T a) { return static_cast<T>(static_cast<int>(T(0) < a) - static_cast<int>(a < T(0))); }
TG_D bool tg_sgn(bool a) { return a; }
template <typename T> TG_D T tg_sigmoid(T a) { return T(1) / (T(1) + tg_exp(-a)); }
template <typename T> TG_D T tg_relu(T a) { return a < T(0) ? T(0) : a; }
template <typename T> TG_D T tg_rsqrt(T a) { return T(1) / tg_sqrt(a); }
template <typename T> TG_D T tg_ipow(T a, T e) {
  T result = 1, base = a;
  for (T n = e; n > 0; n >>= 1) {
    if (n & 1) result *= base;
    base *= base;
  }
  return result;
}
// NaN-propagating for floats (the first operand's NaN wins), as torch.maximum.
template <typename T> TG_D T tg_maximum(T a, T b) { return a > b ? a : b; }
template <typename T> TG_D T tg_minimum(T a, T b) { return a < b ? a : b; }
TG_D float tg_maximum(float a, float b) { if (a != a) return a; return a > b ? a : b; }
TG_D double tg_maximum(double a, double b) { if (a != a) return a; return a > b ? a : b; }
TG_D float tg_minimum(float a, float b) { if (a != a) return a; return a < b ? a : b; }
TG_D double tg_minimum(double a, double b) { if (a != a) return a; return a < b ? a : b; }
template <typename T> TG_D T tg_clamp_core(T a, T lo, T hi, bool has_lo, bool has_hi) {
  if (has_lo && a < lo) a = lo;
  if (has_hi && a > hi) a = hi;
  return a;
}
template <typename T> TG_D T tg_clamp(T a, T lo, T hi, bool has_lo, bool has_hi) {
  return tg_clamp_core(a, lo, hi, has_lo, has_hi);
}
TG_D float tg_clamp(float a, float lo, float hi, bool has_lo, bool has_hi) {
  if (a != a) return a;
  return tg_clamp_core(a, lo, hi, has_lo, has_hi);
}
TG_D double tg_clamp(double a, double lo, double hi, bool has_lo, bool has_hi) {
  if (a != a) return a;
  return tg_clamp_core(a, lo, hi, has_lo, has_hi);
}
template <typename T> TG_D T tg_silu(T x) { return x / (T(1) + tg_exp(-x)); }
template <typename T> TG_D T tg_softplus(T x, T beta, T threshold) {
  return x * beta > threshold ? x : tg_log1p(tg_exp(x * beta)) / beta;
}
template <typename T> TG_D T tg_silu_backward(T g, T x) {
  const T s = T(1) / (T(1) + tg_exp(-x));
  return g * s * (T(1) + x * (T(1) - s));
}
// pow with a tensor exponent: integers take 0 for negative exponents but for bases 1 and -1.
template <typename T> TG_D T tg_pow_tensor(T a, T b) {
  if (b < T(0)) return a == T(1) ? T(1) : a == T(-1) ? ((-b) % T(2) ? T(-1) : T(1)) : T(0);
  return tg_ipow(a, b);
}
TG_D float tg_pow_tensor(float a, float b) { return powf(a, b); }
TG_D double tg_pow_tensor(double a, double b) { return pow(a, b); }
template <typename T> TG_D T tg_tanh_backward(T g, T y) { return g * (T(1) - y * y); }
template <typename T> TG_D T tg_sigmoid_backward(T g, T y) { return g * (T(1) - y) * y; }
template <typename T> TG_D T tg_threshold_backward(T g, T y) { return y > T(0) ? g : T(0); }
)";
  s += cat("template <typename T> TG_D T tg_gelu(T x) { return T(0.5) * x * (T(1) + tg_erf(x * T(", sqrt1_2, "))); }\n");
  s += cat("template <typename T> TG_D T tg_gelu_tanh(T x) {\n  return T(0.5) * x * (T(1) + tg_tanh(T(", sqrt2_over_pi,
           ") * (x + T(", coeff, ") * x * x * x)));\n}\n");
  s += cat("template <typename T> TG_D T tg_gelu_backward(T g, T x) {\n  const T cdf = T(0.5) * (T(1) + tg_erf(x * T(", sqrt1_2,
           ")));\n  const T pdf = tg_exp(T(-0.5) * x * x) * T(", inv_sqrt_2pi, ");\n  return g * (cdf + x * pdf);\n}\n");
  s += cat("template <typename T> TG_D T tg_gelu_tanh_backward(T g, T x) {\n  const T x2 = x * x;\n  const T t = tg_tanh(T(",
           sqrt2_over_pi, ") * (x + T(", coeff, ") * x2 * x));\n  const T dinner = T(", sqrt2_over_pi, ") * (T(1) + T(", coeff3,
           ") * x2);\n  return g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner);\n}\n");
  return s;
}

// pow(a, e) as PowFn computes it: short forms for 2, 3, 0.5 and -1 on floats, squaring on integers.
std::string pow_expression(const std::string& a, const Scalar& exponent, DType t) {
  const std::string e = scalar_literal(exponent, t);
  if (!is_floating(t)) return call("tg_ipow", a, e);
  const double v = floating_value(exponent, t);
  if (v == 2.0) return cat("(", a, " * ", a, ")");
  if (v == 3.0) return cat("(", a, " * ", a, " * ", a, ")");
  if (v == 0.5) return call("tg_sqrt", a);
  if (v == -1.0) return cat("(static_cast<", cuda_type_names(t).compute, ">(1) / ", a, ")");
  return call("tg_powf", a, e);
}

// A parameter the eager functor holds in its accumulation type (float for 16-bit dtypes).
std::string acc_literal(const Scalar& s, DType t) {
  return scalar_literal(s, t == kFloat16 || t == kBFloat16 ? kFloat32 : t);
}

std::string unary_expression(const PointwiseMath& m, const std::string& a) {
  const DType t = m.compute;
  switch (m.unary) {
    case UnaryKind::Neg: return cat("(-", a, ")");
    case UnaryKind::Abs: return call("tg_abs", a);
    case UnaryKind::Sgn: return call("tg_sgn", a);
    case UnaryKind::Exp: return call("tg_exp", a);
    case UnaryKind::Log: return call("tg_log", a);
    case UnaryKind::Sin: return call("tg_sin", a);
    case UnaryKind::Cos: return call("tg_cos", a);
    case UnaryKind::Tanh: return call("tg_tanh", a);
    case UnaryKind::Sigmoid: return call("tg_sigmoid", a);
    case UnaryKind::Relu: return call("tg_relu", a);
    case UnaryKind::Gelu: return call("tg_gelu", a);
    case UnaryKind::GeluTanh: return call("tg_gelu_tanh", a);
    case UnaryKind::Sqrt: return call("tg_sqrt", a);
    case UnaryKind::Rsqrt: return call("tg_rsqrt", a);
    case UnaryKind::Trunc: return call("tg_trunc", a);
    case UnaryKind::Pow: return pow_expression(a, m.params.exponent, t);
    case UnaryKind::Clamp: {
      const EwParams& p = m.params;
      return call("tg_clamp", a, scalar_literal(p.lo.value_or(Scalar(0)), t), scalar_literal(p.hi.value_or(Scalar(0)), t),
                  std::string(p.lo ? "true" : "false"), std::string(p.hi ? "true" : "false"));
    }
    case UnaryKind::Silu: return call("tg_silu", a);
    case UnaryKind::Softplus:
      return call("tg_softplus", a, acc_literal(m.params.beta, t), acc_literal(m.params.threshold, t));
  }
  TG_FAIL("[fused_elementwise] unknown unary kind ", static_cast<int>(m.unary));
}

std::string binary_expression(const PointwiseMath& m, const std::string& a, const std::string& b) {
  const DType t = m.compute;
  const bool unit_alpha = m.params.alpha.to_double() == 1.0;
  switch (m.binary) {
    case BinaryKind::Add:
      if (t == kBool) return cat("(", a, " || (", scalar_literal(m.params.alpha, t), " && ", b, "))");
      return unit_alpha ? cat("(", a, " + ", b, ")") : cat("(", a, " + ", scalar_literal(m.params.alpha, t), " * ", b, ")");
    case BinaryKind::Sub:
      return unit_alpha ? cat("(", a, " - ", b, ")") : cat("(", a, " - ", scalar_literal(m.params.alpha, t), " * ", b, ")");
    case BinaryKind::Mul: return t == kBool ? cat("(", a, " && ", b, ")") : cat("(", a, " * ", b, ")");
    case BinaryKind::Div: return cat("(", a, " / ", b, ")");
    case BinaryKind::Maximum: return call("tg_maximum", a, b);
    case BinaryKind::Minimum: return call("tg_minimum", a, b);
    case BinaryKind::Pow: return call("tg_pow_tensor", a, b);
    case BinaryKind::TanhBackward: return call("tg_tanh_backward", a, b);
    case BinaryKind::SigmoidBackward: return call("tg_sigmoid_backward", a, b);
    case BinaryKind::ThresholdBackward: return call("tg_threshold_backward", a, b);
    case BinaryKind::GeluBackward: return call("tg_gelu_backward", a, b);
    case BinaryKind::GeluTanhBackward: return call("tg_gelu_tanh_backward", a, b);
    case BinaryKind::SiluBackward: return call("tg_silu_backward", a, b);
  }
  TG_FAIL("[fused_elementwise] unknown binary kind ", static_cast<int>(m.binary));
}

std::string compare_expression(CompareKind k, const std::string& a, const std::string& b) {
  static const char* const ops[] = {"==", "!=", "<", "<=", ">", ">="};
  return cat("(", a, " ", ops[static_cast<int>(k)], " ", b, ")");
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
  switch (m.family) {
    case PointwiseFamily::Unary: return unary_expression(m, args.at(0));
    case PointwiseFamily::Binary: bind_scalar(m, args); return binary_expression(m, args.at(0), args.at(1));
    case PointwiseFamily::Compare: bind_scalar(m, args); return compare_expression(m.compare, args.at(0), args.at(1));
    case PointwiseFamily::Where: return cat("(", args.at(0), " ? ", args.at(1), " : ", args.at(2), ")");
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
