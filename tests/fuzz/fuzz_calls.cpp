#include "fuzz/fuzz_calls.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "fuzz/fuzz_generator.h"
#include "fuzz/fuzz_ops.h"
#include "graphs/compile.h"
#include "graphs/runtime/cudagraph_step.h"
#include "graphs/testing/parity.h"
#include "tensor/grad_mode.h"

namespace tg::fuzz {
namespace {

// Whether the program runs eagerly (on the CPU) at every call of its plan.
bool runs_every_call(const Program& p) {
  for (int call = 0; call < p.plan.calls; ++call) {
    try {
      CallScope scope(call);
      run_program(p, make_call_inputs(p, call, kCPU));
    } catch (const std::exception&) {
      return false;
    }
  }
  return true;
}

// Statements whose values depend on the random generator's state.
bool draws_random(const Statement& s) {
  const std::string& name = fuzz_ops()[static_cast<size_t>(s.op)].name;
  if (name == "dropout" || name == "multinomial") return true;
  return name == "checkpoint" && std::find(s.attrs.ints.begin(), s.attrs.ints.end(), 5) != s.attrs.ints.end();
}

// Whether the function detaches input i directly (or the input itself, as contiguous() returns a
// contiguous one): a captured tensor detached inside the function is guarded by its memory, so
// that giving it new memory recompiles. `values` are the program's values on the CPU.
bool detaches_input(const Program& p, const TensorList& values, int i) {
  std::set<int> same{i};
  for (size_t v = p.inputs.size(); v < values.size(); ++v)
    if (values[v].is_same(values[static_cast<size_t>(i)])) same.insert(static_cast<int>(v));
  static const std::set<std::string> detaching = {"detach", "cross_entropy", "multinomial", "topk"};
  for (const Statement& s : p.body)
    if (!s.operands.empty() && same.count(s.operands[0]) && detaching.count(fuzz_ops()[static_cast<size_t>(s.op)].name))
      return true;
  return false;
}

// A size other than `s` for a dim of the seed's size mode.
int64_t other_size(Rng& rng, SizeMode mode, int64_t s) {
  if (mode == SizeMode::Deep) return s == 1 ? 2 : 1;
  const int64_t lo = mode == SizeMode::Wide ? std::max<int64_t>(1, s - 8) : 1;
  const int64_t hi = mode == SizeMode::Wide ? s + 8 : 5;
  int64_t n = rng.between(lo, hi - 1);
  return n >= s ? n + 1 : n;
}

// Input sizes with one size changed: every dim of that size in every input, or one dim of one input.
std::vector<Shape> changed_sizes(Rng& rng, const Program& p, SizeMode mode) {
  std::vector<Shape> sizes;
  std::vector<std::pair<size_t, size_t>> dims;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    sizes.push_back(p.inputs[i].sizes);
    for (size_t d = 0; d < p.inputs[i].sizes.size(); ++d) dims.push_back({i, d});
  }
  if (dims.empty()) return {};
  const auto [i, d] = rng.pick(dims);
  const int64_t from = sizes[i][d], to = other_size(rng, mode, from);
  if (rng.chance(0.6)) {
    for (Shape& s : sizes)
      for (int64_t& n : s)
        if (n == from) n = to;
  } else {
    sizes[i][d] = to;
  }
  return sizes;
}

// Appends scalar_count statements reading the scalar arguments in turn, then up to random_count
// extension ops, each tried eagerly as drawn; the scalar ones' results and the last become outputs.
void draw_statements(Program& p, TensorList& values, Rng& rng, int scalar_count, int random_count) {
  const auto& ops = fuzz_ops();
  const auto first_new = static_cast<int64_t>(legacy_op_count());
  TensorList dynamic;
  for (const ScalarArg& s : p.plan.scalars)
    dynamic.push_back(s.dynamic ? tg::dynamic(s.values[0], s.integer ? kInt64 : kFloat64).tensor() : Tensor());
  RunningScope scope(p, dynamic);
  CallScope call(0);
  int params = 0;
  for (const Statement& t : p.body)
    if (t.attrs.module) params += static_cast<int>(t.attrs.module->parameters().size());
  int placed = 0;
  for (int attempt = 0; attempt < 40 && placed < scalar_count + random_count; ++attempt) {
    Statement s;
    const bool scalar = placed < scalar_count;
    s.op = scalar ? scalar_arg_op() : static_cast<int>(rng.between(first_new, static_cast<int64_t>(ops.size()) - 1));
    const FuzzOp& op = ops[static_cast<size_t>(s.op)];
    if (!scalar && op.name == "scalar_arg") continue;
    if (scalar) s.attrs.ints = {placed};
    TensorList operands;
    for (int k = 0; k < op.arity; ++k) {
      // Lean on the latest value (the program's last output).
      const auto n = static_cast<int64_t>(values.size());
      s.operands.push_back(static_cast<int>(rng.chance(0.6) ? n - 1 : rng.between(0, n - 1)));
      operands.push_back(values[static_cast<size_t>(s.operands.back())]);
    }
    s.attrs.first_param = params;
    try {
      if (!op.draw(rng, operands, s.attrs)) continue;
    } catch (const Error&) {
      continue;
    }
    if (!append_statement(p, values, std::move(s), operands, params)) continue;
    ++placed;
    const int v = static_cast<int>(values.size()) - 1;
    if (scalar && std::find(p.outputs.begin(), p.outputs.end(), v) == p.outputs.end()) p.outputs.push_back(v);
  }
  const int last = static_cast<int>(values.size()) - 1;
  if (placed > 0 && std::find(p.outputs.begin(), p.outputs.end(), last) == p.outputs.end()) p.outputs.push_back(last);
}

// Values of a scalar argument over `calls` calls: a new one every call for a dynamic scalar; for a
// guarded one, two values that alternate at random (so some calls hit a variant compiled before).
ScalarArg draw_scalar(Rng& rng, int calls) {
  ScalarArg s;
  s.dynamic = rng.chance(0.5);
  s.integer = rng.chance(0.4);
  auto value = [&] { return s.integer ? static_cast<double>(rng.between(-3, 4)) : static_cast<double>(rng.between(-8, 8)) * 0.25; };
  if (s.dynamic) {
    for (int c = 0; c < calls; ++c) s.values.push_back(value());
    return s;
  }
  const double a = value();
  double b = value();
  if (b == a) b = a + 1.0;
  for (int c = 0; c < calls; ++c) s.values.push_back(c == 0 ? a : c == 1 ? b : rng.chance(0.5) ? a : b);
  return s;
}

using testing::copy_inputs;

CompileOptions options_of(const Program& p, const std::string& backend) {
  CompileOptions o;
  o.backend = backend;
  o.fuse_gradient_epilogues = p.gradient_epilogues;
  if (p.plan.bucketed) {
    ShapeBucket b;
    b.dims = {BucketedDim{0, 0, p.plan.pad_value}};
    b.sizes = p.plan.bucket_sizes;
    for (size_t k = 0; k < p.outputs.size(); ++k) b.outputs.push_back({static_cast<int>(k), 0});
    o.shape_buckets = {b};
  }
  return o;
}

// The tensors a mode keeps across calls: rebound inputs (alive, so that the next call's are at
// other addresses) and the captured inputs' tensors (the same handles every call).
struct ModeState {
  std::vector<TensorList> kept;
  TensorList holders;  // per captured input
};

// The program's full argument list: `args` (the inputs not captured, then dynamic scalars) with
// the captured inputs' holders put back in their places.
TensorList with_captured(const Program& p, const TensorList& args, const TensorList& holders) {
  TensorList full;
  size_t a = 0, h = 0;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const bool captured = std::find(p.plan.captured.begin(), p.plan.captured.end(), static_cast<int>(i)) != p.plan.captured.end();
    full.push_back(captured ? holders.at(h++) : args.at(a++));
  }
  while (a < args.size()) full.push_back(args[a++]);
  return full;
}

// `inputs` split into the call's arguments and the captured inputs, which the holders take on (new
// memory, the same handles; gradients cleared).
TensorList bind_call(const Program& p, const TensorList& inputs, int call, ModeState& mode) {
  TensorList args;
  size_t h = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool captured = i < p.inputs.size() &&
                          std::find(p.plan.captured.begin(), p.plan.captured.end(), static_cast<int>(i)) != p.plan.captured.end();
    if (!captured) {
      args.push_back(inputs[i]);
      continue;
    }
    if (call == 0) {
      mode.holders.push_back(inputs[i]);
    } else {
      NoGradGuard no_grad;
      mode.holders.at(h).set_(inputs[i].detach());
      mode.holders.at(h).set_grad(Tensor());
    }
    ++h;
  }
  return args;
}

// One call in both modes: the first difference, or nullopt (eager_error set when eager raised).
std::optional<std::string> compare_call(graphs::CompiledFunction& compiled, const Program& p, int call, Device device,
                                        ModeState& eager_mode, ModeState& compiled_mode,
                                        std::optional<std::string>& eager_error) {
  const std::string at = "call " + std::to_string(call) + ": ";
  const Tolerance tol = tolerance_of(p);
  CallScope scope(call);
  const TensorList inputs = make_call_inputs(p, call, device);
  const TensorList eager_args = bind_call(p, copy_inputs(inputs), call, eager_mode);
  const TensorList compiled_args = bind_call(p, copy_inputs(inputs), call, compiled_mode);
  const TensorList eager_in = with_captured(p, eager_args, eager_mode.holders);
  const TensorList compiled_in = with_captured(p, compiled_args, compiled_mode.holders);
  for (int i : p.plan.rebound) {
    mark_static_address(compiled_in[static_cast<size_t>(i)]);
    mark_static_address(eager_in[static_cast<size_t>(i)]);
  }
  graphs::CallArgs args;
  args.tensors = compiled_args;
  for (size_t i = 0; i < compiled_args.size(); ++i) args.names.push_back("input " + std::to_string(i));
  for (size_t k = 0; k < p.plan.scalars.size(); ++k) {
    const ScalarArg& s = p.plan.scalars[k];
    if (s.dynamic) continue;
    const double v = s.values[static_cast<size_t>(call)];
    args.host.push_back({"s" + std::to_string(k), s.integer ? graphs::HostValue(static_cast<int64_t>(v)) : graphs::HostValue(v)});
  }
  TensorList expected, actual, weights;
  try {
    manual_seed(p.seed + static_cast<uint64_t>(call));
    expected = run_program(p, eager_in);
    weights = testing::backward_with_random_weights(expected);
  } catch (const Error& e) {
    eager_error = at + e.what();
    return std::nullopt;
  }
  try {
    manual_seed(p.seed + static_cast<uint64_t>(call));
    actual = compiled.call(args);
    if (auto d = testing::call_difference(actual, expected, compiled_in, eager_in, tol.rtol, tol.atol, at)) return d;
    testing::backward_with_weights(actual, weights);
  } catch (const Error& e) {
    return at + "compiled mode raised where eager mode did not: " + e.what();
  }
  if (auto d = testing::grads_difference(compiled_in, eager_in, tol.rtol, tol.atol, at)) return d;
  if (!p.plan.rebound.empty()) compiled_mode.kept.push_back(compiled_in);
  return std::nullopt;
}

}  // namespace

void draw_calls(Program& p, TensorList& values) {
  Rng rng(p.seed * 0xD1B54A32D192ED03ull + 29);
  const SizeMode mode = size_mode_of(p.seed);
  CallPlan& plan = p.plan;
  const bool scalars = rng.chance(0.3), rebind = rng.chance(0.3), extend = rng.chance(0.4);
  const int64_t sizes_draw = rng.between(0, 9);  // 0 to 2: changed sizes; 3: shape buckets
  bool shapes = sizes_draw <= 2, buckets = sizes_draw == 3 && mode != SizeMode::Wide;
  plan.calls = shapes || buckets ? 6 : scalars || rebind ? 4 : 3;
  if (scalars)
    for (int64_t k = rng.between(1, 2); k > 0; --k) plan.scalars.push_back(draw_scalar(rng, plan.calls));
  draw_statements(p, values, rng, static_cast<int>(plan.scalars.size()), extend ? static_cast<int>(rng.between(1, 3)) : 0);
  // A scalar that no statement could read (no floating value) is dropped.
  int read = 0;
  for (const Statement& s : p.body) read += s.op == scalar_arg_op();
  plan.scalars.resize(static_cast<size_t>(read));

  if (shapes) {
    shapes = false;
    for (int attempt = 0; attempt < 4 && !shapes; ++attempt) {
      std::vector<Shape> changed = changed_sizes(rng, p, mode);
      if (changed.empty()) break;
      std::vector<Shape> base;
      for (const InputSpec& in : p.inputs) base.push_back(in.sizes);
      plan.shapes = {base, changed};
      if (rng.chance(0.3)) plan.shapes.push_back(changed_sizes(rng, p, mode));
      plan.variant = {0, 1};
      for (int c = 2; c < plan.calls; ++c) plan.variant.push_back(static_cast<int>(rng.between(0, static_cast<int64_t>(plan.shapes.size()) - 1)));
      shapes = runs_every_call(p);
      if (!shapes) {
        plan.shapes.clear();
        plan.variant.clear();
      }
    }
  }
  if (buckets && !shapes) {
    bool bucketable = !p.inputs.empty();
    for (const Statement& s : p.body)
      bucketable = bucketable && !fuzz_ops()[static_cast<size_t>(s.op)].in_place && !draws_random(s);
    if (bucketable) {
      const std::vector<InputSpec> before = p.inputs;
      plan.bucketed = true;
      plan.bucket_sizes = rng.chance(0.5) ? std::vector<int64_t>{2, 4} : std::vector<int64_t>{3, 6};
      plan.pad_value = rng.pick(std::vector<double>{0.0, 0.5, -1.0});
      for (int c = 0; c < plan.calls; ++c) plan.rows.push_back(rng.between(1, plan.bucket_sizes.back()));
      // Only the rows require grad: padded rows must not reach another input's gradient.
      for (size_t i = 1; i < p.inputs.size(); ++i) p.inputs[i].requires_grad = false;
      if (!runs_every_call(p)) {
        p.inputs = before;
        plan.bucketed = false;
        plan.bucket_sizes.clear();
        plan.rows.clear();
      }
    }
  }
  if (rebind) {
    // Each input rebound as an argument, captured as a parameter, or left alone; at least one varies.
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      const int64_t how = rng.between(0, 3);
      if (how == 0 || (how == 1 && plan.bucketed && i == 0)) {
        plan.rebound.push_back(static_cast<int>(i));
      } else if (how == 1) {
        plan.captured.push_back(static_cast<int>(i));
        plan.captured_detached = plan.captured_detached || detaches_input(p, values, static_cast<int>(i));
      }
    }
    if (plan.rebound.empty() && plan.captured.empty())
      plan.rebound.push_back(static_cast<int>(rng.between(0, static_cast<int64_t>(p.inputs.size()) - 1)));
  }
}

CallsReport compare_calls(const Program& p, const std::string& backend, Device device) {
  CallsReport report;
  const Program* program = &p;
  ModeState eager_mode, compiled_mode;
  const TensorList* holders = &compiled_mode.holders;
  graphs::CompiledFunction compiled(
      [program, holders](const TensorList& xs) { return run_program(*program, with_captured(*program, xs, *holders)); },
      options_of(p, backend));
  for (int call = 0; call < p.plan.calls && !report.difference && !report.eager_error; ++call)
    report.difference = compare_call(compiled, p, call, device, eager_mode, compiled_mode, report.eager_error);
  report.counters = compiled.counters();
  if (report.difference || report.eager_error) return report;
  const graphs::CompileCounters& c = report.counters;
  std::ostringstream os;
  if (!p.plan.guarded_changes() && c.recompiles != 0) {
    os << "recompiled " << c.recompiles << " time(s) although the calls differ in nothing guarded";
    for (const std::string& r : c.recompile_reasons) os << "; " << r;
    report.difference = os.str();
  }
  if (p.plan.bucketed && !p.plan.captured_detached) {
    // One variant per bucket and guarded scalars' values.
    std::set<std::vector<double>> variants;
    for (int call = 0; call < p.plan.calls; ++call) {
      const int64_t rows = p.plan.rows[static_cast<size_t>(call)];
      std::vector<double> key{static_cast<double>(*std::lower_bound(p.plan.bucket_sizes.begin(), p.plan.bucket_sizes.end(), rows))};
      for (const ScalarArg& s : p.plan.scalars)
        if (!s.dynamic) key.push_back(s.values[static_cast<size_t>(call)]);
      variants.insert(key);
    }
    if (c.compilations > static_cast<int>(variants.size())) {
      os << c.compilations << " compilations for " << variants.size() << " bucket size(s) and guarded values";
      report.difference = os.str();
    }
    if (c.bucketed_calls != p.plan.calls && c.eager_fallbacks == 0) {
      os << c.bucketed_calls << " bucketed calls of " << p.plan.calls;
      report.difference = os.str();
    }
  }
  return report;
}

}  // namespace tg::fuzz
