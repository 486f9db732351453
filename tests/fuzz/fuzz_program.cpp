#include "fuzz/fuzz_program.h"

#include <sstream>

#include "fuzz/fuzz_ops.h"

namespace tg::fuzz {
namespace {

std::string dtype_literal(DType t) {
  switch (t) {
    case DType::Float64: return "kFloat64";
    case DType::Float16: return "kFloat16";
    case DType::BFloat16: return "kBFloat16";
    default: return "kFloat32";
  }
}

std::string sizes_literal(const Shape& s) {
  std::string out = "{";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "}";
}

// The sizes a transposed input is drawn with (its last two dims swapped back by the transpose).
Shape drawn_sizes(const InputSpec& in) {
  Shape s = in.sizes;
  if (in.transposed) std::swap(s[s.size() - 1], s[s.size() - 2]);
  return s;
}

std::string value_name(int v) { return "v" + std::to_string(v); }

}  // namespace

Tolerance tolerance_of(const Program& program) {
  Tolerance t;
  for (const InputSpec& in : program.inputs) {
    if (in.dtype == kBFloat16) t = {5e-2, 5e-2};
    else if (in.dtype == kFloat16 && t.rtol < 1e-2) t = {1e-2, 1e-2};
  }
  return t;
}

TensorList make_inputs(const Program& program, Device device) {
  manual_seed(program.seed);
  TensorList inputs;
  for (const InputSpec& in : program.inputs) {
    Tensor t = randn(drawn_sizes(in), {.dtype = in.dtype, .device = device});
    if (in.transposed) t = t.transpose(-1, -2);
    if (in.requires_grad) t.requires_grad_(true);
    inputs.push_back(t);
  }
  return inputs;
}

TensorList run_program(const Program& program, const TensorList& inputs) {
  std::optional<AutocastGuard> autocast;
  if (program.autocast && !inputs.empty()) autocast.emplace(inputs[0].device(), *program.autocast);
  const auto& ops = fuzz_ops();
  TensorList values = inputs;
  for (const Statement& s : program.body) {
    TensorList operands;
    for (int v : s.operands) operands.push_back(values[static_cast<size_t>(v)]);
    values.push_back(ops[static_cast<size_t>(s.op)].apply(operands, s.attrs));
  }
  TensorList outputs;
  for (int v : program.outputs) outputs.push_back(values[static_cast<size_t>(v)]);
  return outputs;
}

TensorList program_parameters(const Program& program) {
  TensorList params;
  for (const Statement& s : program.body)
    if (s.attrs.module)
      for (const Tensor& p : s.attrs.module->parameters()) params.push_back(p);
  return params;
}

void move_modules(const Program& program, Device device) {
  for (const Statement& s : program.body)
    if (s.attrs.module) s.attrs.module->to(device);
}

std::string print_program(const Program& program, const std::string& backend, Device device) {
  const auto& ops = fuzz_ops();
  std::ostringstream os;
  const std::string dev = device.is_cuda() ? "cuda_device()" : "kCPU";
  os << "// Fuzz program " << program.seed << ": " << backend << " against eager mode.\n"
     << "TEST(FuzzRepro, Program" << program.seed << ") {\n";
  if (device.is_cuda()) os << "  TG_REQUIRE_CUDA();\n";
  os << "  manual_seed(" << program.seed << ");\n";
  std::string args;
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    const InputSpec& in = program.inputs[i];
    os << "  Tensor in" << i << " = randn(" << sizes_literal(drawn_sizes(in)) << ", {.dtype = " << dtype_literal(in.dtype)
       << ", .device = " << dev << "})" << (in.transposed ? ".transpose(-1, -2)" : "") << ";\n";
    if (in.requires_grad) os << "  in" << i << ".requires_grad_(true);\n";
    args += (i ? ", in" : "in") + std::to_string(i);
  }
  os << "  auto fn = [](const TensorList& in) {\n";
  if (program.autocast) os << "    AutocastGuard autocast(in[0].device(), " << dtype_literal(*program.autocast) << ");\n";
  for (size_t i = 0; i < program.inputs.size(); ++i)
    os << "    Tensor " << value_name(static_cast<int>(i)) << " = in[" << i << "];\n";
  int next = static_cast<int>(program.inputs.size());
  for (const Statement& s : program.body) {
    std::vector<std::string> names;
    for (int v : s.operands) names.push_back(value_name(v));
    os << "    Tensor " << value_name(next++) << " = " << ops[static_cast<size_t>(s.op)].print(names, s.attrs) << ";\n";
  }
  os << "    return TensorList{";
  for (size_t i = 0; i < program.outputs.size(); ++i) os << (i ? ", " : "") << value_name(program.outputs[i]);
  const Tolerance tol = tolerance_of(program);
  os << "};\n  };\n"
     << "  testing::expect_compiled_matches_eager(fn, {" << args << "}, {.compile = {.backend = \"" << backend << "\""
     << (program.gradient_epilogues ? ", .fuse_gradient_epilogues = true" : "") << "}, .rtol = " << tol.rtol << ", .atol = " << tol.atol << ", .calls = 3, .seed = " << program.seed << "});\n}\n";
  return os.str();
}

}  // namespace tg::fuzz
