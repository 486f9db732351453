#include "fuzz/fuzz_program.h"

#include <algorithm>
#include <cstdio>
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

std::string num_str(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string value_name(int v) { return "v" + std::to_string(v); }

thread_local int the_current_call = 0;

// The program run_program is running on this thread and its scalar tensors (for scalar_arg statements).
struct Running {
  const Program* program = nullptr;
  TensorList dynamic;  // per scalar argument (undefined for guarded ones)
};
thread_local Running running;

// The body on the program's inputs (a bucketed program's row in place of input 0).
TensorList run_body(const Program& program, const TensorList& inputs) {
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

// A tensor of `sizes` drawn as the input `in` is (transposed where it is), from the current seed.
Tensor draw_tensor(const InputSpec& in, Shape sizes, Device device) {
  if (in.transposed) std::swap(sizes[sizes.size() - 1], sizes[sizes.size() - 2]);
  Tensor t = randn(sizes, {.dtype = in.dtype, .device = device});
  if (in.transposed) t = t.transpose(-1, -2);
  if (in.requires_grad) t.requires_grad_(true);
  return t;
}

std::string reals_str(const std::vector<double>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + num_str(v[i]);
  return s;
}

}  // namespace

bool CallPlan::guarded_changes() const {
  for (int v : variant)
    if (v != 0) return true;
  for (const ScalarArg& s : scalars)
    if (!s.dynamic)
      for (double v : s.values)
        if (v != s.values[0]) return true;
  return bucketed || captured_detached;  // rows pad to different buckets; see captured_detached
}

int current_call() { return the_current_call; }

RunningScope::RunningScope(const Program& program, TensorList dynamic)
    : previous_program_(running.program), previous_dynamic_(std::move(running.dynamic)) {
  running.program = &program;
  running.dynamic = std::move(dynamic);
}

RunningScope::~RunningScope() {
  running.program = previous_program_;
  running.dynamic = std::move(previous_dynamic_);
}

CallScope::CallScope(int call) : previous_(the_current_call) { the_current_call = call; }
CallScope::~CallScope() { the_current_call = previous_; }

double guarded_scalar(int k) {
  const ScalarArg& s = running.program->plan.scalars.at(static_cast<size_t>(k));
  return s.values.at(static_cast<size_t>(the_current_call));
}

Tensor dynamic_scalar(int k) { return running.dynamic.at(static_cast<size_t>(k)); }

TensorList make_call_inputs(const Program& program, int call, Device device) {
  const CallPlan& plan = program.plan;
  TensorList inputs = make_inputs(program, device);
  const int variant = plan.variant.empty() ? 0 : plan.variant[static_cast<size_t>(call)];
  // New values for inputs whose sizes or tensor change at this call (seeded by program and call).
  manual_seed(program.seed * 1000003 + 7919 * static_cast<uint64_t>(call) + 1);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputSpec& in = program.inputs[i];
    Shape sizes = variant == 0 ? in.sizes : plan.shapes[static_cast<size_t>(variant)][i];
    const auto has = [&](const std::vector<int>& list) {
      return std::find(list.begin(), list.end(), static_cast<int>(i)) != list.end();
    };
    const bool rebound = call > 0 && (has(plan.rebound) || has(plan.captured));
    if (plan.bucketed && i == 0) {
      sizes.insert(sizes.begin(), plan.rows[static_cast<size_t>(call)]);
      inputs[i] = draw_tensor(in, sizes, device);
    } else if (sizes != in.sizes || rebound) {
      inputs[i] = draw_tensor(in, sizes, device);
    }
  }
  for (const ScalarArg& s : plan.scalars) {
    const double v = s.values.at(static_cast<size_t>(call));
    if (s.dynamic) inputs.push_back(tg::dynamic(v, s.integer ? kInt64 : kFloat64).tensor());
  }
  return inputs;
}

std::string print_calls(const Program& program) {
  const CallPlan& plan = program.plan;
  std::ostringstream os;
  for (size_t k = 0; k < plan.scalars.size(); ++k) {
    const ScalarArg& s = plan.scalars[k];
    os << "// s" << k << ": " << (s.dynamic ? "tg::dynamic(" : "") << (s.integer ? "int64_t" : "double")
       << (s.dynamic ? ") (a graph input)" : " (guarded by value)") << ", per call: " << reals_str(s.values) << "\n";
  }
  if (!plan.rebound.empty()) {
    os << "// rebound every call (mark_static_address, new tensor and values):";
    for (int i : plan.rebound) os << " in" << i;
    os << "\n";
  }
  if (!plan.captured.empty()) {
    os << "// captured by the function (parameters), new memory and values every call (set_):";
    for (int i : plan.captured) os << " in" << i;
    os << "\n";
  }
  if (!plan.variant.empty()) {
    for (size_t v = 1; v < plan.shapes.size(); ++v) {
      os << "// sizes variant " << v << ":";
      for (const Shape& s : plan.shapes[v]) os << " " << sizes_literal(s);
      os << " (new values)\n";
    }
    os << "// variant per call:";
    for (int v : plan.variant) os << " " << v;
    os << "\n";
  }
  if (plan.bucketed) {
    os << "// shape_buckets: in0 dim 0 (rows; the body runs per row, outputs stacked and narrowed back), sizes";
    for (int64_t b : plan.bucket_sizes) os << " " << b;
    os << ", pad_value " << num_str(plan.pad_value) << "; rows per call:";
    for (int64_t r : plan.rows) os << " " << r;
    os << "\n";
  }
  if (os.tellp() > 0) os << "// " << plan.calls << " calls; replay with TG_FUZZ_SEED=" << program.seed << " TG_FUZZ_PROGRAMS=1\n";
  return os.str();
}

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
  const size_t n = program.inputs.size();
  TensorList dynamic;
  size_t next = n;
  for (const ScalarArg& s : program.plan.scalars) dynamic.push_back(s.dynamic ? inputs.at(next++) : Tensor());
  RunningScope scope(program, std::move(dynamic));
  const TensorList args(inputs.begin(), inputs.begin() + static_cast<ptrdiff_t>(n));
  if (!program.plan.bucketed) return run_body(program, args);
  // See CallPlan::bucketed: per row, stacked; then a mean over the real rows (padding masked).
  const Tensor& x = args.at(0);
  std::vector<TensorList> per_row;
  for (const Tensor& row : unbind(x, 0)) {
    TensorList in = args;
    in[0] = row;
    per_row.push_back(run_body(program, in));
  }
  TensorList outputs;
  for (size_t k = 0; k < program.outputs.size(); ++k) {
    TensorList column;
    for (const TensorList& r : per_row) column.push_back(r[k]);
    outputs.push_back(stack(column, 0));
  }
  const Tensor& first = outputs[0];
  if (is_floating(first.dtype())) {
    Shape mask_sizes(static_cast<size_t>(first.dim()), 1);
    mask_sizes[0] = first.size(0);
    const Tensor padding = bucket_padding_mask(x, 0).reshape(mask_sizes);
    outputs.push_back(div(sum(masked_fill(first, padding, 0.0), {0}), bucket_extent(x, 0)));
  }
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
     << print_calls(program) << "TEST(FuzzRepro, Program" << program.seed << ") {\n";
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
