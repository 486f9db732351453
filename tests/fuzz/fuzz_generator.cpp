#include "fuzz/fuzz_generator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "autograd/engine.h"
#include "fuzz/fuzz_calls.h"
#include "fuzz/fuzz_ops.h"
#include "graphs/testing/parity.h"
#include "tensor/grad_mode.h"

namespace tg::fuzz {
namespace {

// The two large sizes a wide program's inputs share, so that they broadcast and multiply together.
using WideSizes = std::array<int64_t, 2>;

// Sizes for one input in the program's size mode.
Shape draw_sizes(Rng& rng, SizeMode mode, const WideSizes& wide) {
  Shape sizes;
  switch (mode) {
    case SizeMode::Small:
      for (int64_t d = rng.between(1, 3); d > 0; --d) sizes.push_back(rng.between(1, 4));
      break;
    case SizeMode::Wide:  // a [rows, cols] bias gradient of 32 x 32 or more takes the column-sum kernels
      for (int64_t d = rng.between(1, 2); d > 0; --d)
        sizes.push_back(rng.chance(0.75) ? wide[static_cast<size_t>(rng.between(0, 1))] : rng.between(1, 4));
      break;
    case SizeMode::Deep:  // up to and past the dims a Shape keeps in place
      for (int64_t d = rng.between(6, 8); d > 0; --d) sizes.push_back(rng.between(1, 2));
      break;
  }
  return sizes;
}

InputSpec draw_input(Rng& rng, SizeMode mode, const WideSizes& wide) {
  InputSpec in;
  in.sizes = draw_sizes(rng, mode, wide);
  const auto dims = static_cast<int64_t>(in.sizes.size());
  const int64_t d = rng.between(0, 19);  // float64 3 in 20, each 16-bit float 2 in 20, float32 the rest
  in.dtype = d < 3 ? kFloat64 : d < 5 ? kBFloat16 : d < 7 ? kFloat16 : kFloat32;
  in.requires_grad = rng.chance(0.6);
  in.transposed = dims >= 2 && rng.chance(0.25);
  return in;
}

// A value index, leaning towards recent values so that programs chain.
int draw_value(Rng& rng, size_t count) {
  const auto n = static_cast<int64_t>(count);
  if (rng.chance(0.5)) return static_cast<int>(rng.between(std::max<int64_t>(0, n - 3), n - 1));
  return static_cast<int>(rng.between(0, n - 1));
}

// Eager outputs and input gradients of the program on `inputs` (as float64 values), with random
// ops seeded by the program and the backward weighted by fixed float64 draws.
std::vector<std::vector<double>> eager_values(const Program& program, const TensorList& inputs) {
  manual_seed(program.seed + static_cast<uint64_t>(current_call()));
  const TensorList outputs = run_program(program, inputs);
  TensorList diff, weights;
  manual_seed(program.seed + 1);
  for (const Tensor& out : outputs) {
    if (!out.requires_grad()) continue;
    diff.push_back(out);
    NoGradGuard no_grad;
    weights.push_back(rand(out.sizes(), {.dtype = kFloat64, .device = out.device()}).to(out.dtype()));
  }
  if (!diff.empty()) backward(diff, weights);
  std::vector<std::vector<double>> values;
  for (const Tensor& out : outputs) values.push_back(out.detach().to_vector<double>());
  for (const Tensor& in : inputs)
    if (in.requires_grad()) values.push_back(in.grad().defined() ? in.grad().to_vector<double>() : std::vector<double>{});
  return values;
}

// Whether eager mode at the program's precision stays within `tol` of eager mode on float64 copies.
bool eager_is_stable(const Program& program, Device device, const Tolerance& tol) {
  bool all_float64 = true;
  for (const InputSpec& in : program.inputs) all_float64 = all_float64 && in.dtype == kFloat64;
  if (all_float64) return true;
  for (int call = 0; call < program.plan.calls; ++call) {
    CallScope scope(call);
    const TensorList inputs = make_call_inputs(program, call, device);
    TensorList wide;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& x = inputs[i];
      if (i >= program.inputs.size()) {  // dynamic scalars keep their dtype
        wide.push_back(x);
        continue;
      }
      Tensor w = x.detach().to(kFloat64);
      if (x.requires_grad()) w.requires_grad_(true);
      wide.push_back(w);
    }
    std::vector<std::vector<double>> actual, reference;
    try {
      actual = eager_values(program, inputs);
      reference = eager_values(program, wide);
    } catch (const Error&) {
      return false;
    }
    if (actual.size() != reference.size()) return false;
    for (size_t k = 0; k < actual.size(); ++k) {
      if (actual[k].size() != reference[k].size()) return false;
      for (size_t i = 0; i < actual[k].size(); ++i) {
        const double a = actual[k][i], e = reference[k][i];
        if ((std::isnan(a) && std::isnan(e)) || (std::isinf(e) && a == e)) continue;
        if (!(std::abs(a - e) <= tol.atol + tol.rtol * std::abs(e))) return false;
      }
    }
  }
  return true;
}

}  // namespace

SizeMode size_mode_of(uint64_t seed) {
  // From the seed's bits above the one that picks gradient_epilogues, so both settings meet each mode.
  switch ((seed / 2) % 8) {
    case 3: return SizeMode::Wide;
    case 6: return SizeMode::Deep;
    default: return SizeMode::Small;
  }
}

namespace {

// The body shared by both generators. `oracle` is null for the compiled-vs-eager fuzzer, whose
// draws must stay as they were when its seeds were fixed.
Program generate(uint64_t seed, const OracleOptions* oracle) {
  Rng rng(seed * 0x9E3779B97F4A7C15ull + 17);
  Program p;
  p.seed = seed;
  p.gradient_epilogues = seed % 2 == 1;  // from the seed, so the drawn program does not change
  const SizeMode mode = size_mode_of(seed);
  WideSizes wide{};
  if (mode == SizeMode::Wide) wide = {rng.between(32, 72), rng.between(32, 72)};
  const int64_t n_inputs = rng.between(1, 3);
  for (int64_t i = 0; i < n_inputs; ++i) p.inputs.push_back(draw_input(rng, mode, wide));
  if (oracle != nullptr) {
    // 16-bit programs, whose values mostly stay 16-bit (one float32 input promotes the rest).
    if (rng.chance(1.0 / 3.0)) {
      const DType low = rng.chance(0.5) ? kBFloat16 : kFloat16;
      for (InputSpec& in : p.inputs) in.dtype = low;
    }
    p.autocast = oracle->autocast;
  }

  // Each statement is tried eagerly on real values as it is drawn; one that raises is dropped.
  TensorList values = make_inputs(p, kCPU);
  std::optional<AutocastGuard> autocast;
  if (p.autocast) autocast.emplace(kCPU, *p.autocast);
  const auto& ops = fuzz_ops();
  const size_t op_count = oracle != nullptr ? oracle_op_count() : legacy_op_count();
  int params = 0;
  const int64_t length = rng.between(3, 10);
  for (int attempt = 0; attempt < 60 && static_cast<int64_t>(p.body.size()) < length; ++attempt) {
    Statement s;
    // The oracle leans a quarter of its draws towards its own ops (modules, attention), which
    // otherwise seldom meet operands they apply to.
    const bool own = oracle != nullptr && op_count > legacy_op_count() && rng.chance(0.25);
    s.op = static_cast<int>(rng.between(own ? static_cast<int64_t>(legacy_op_count()) : 0,
                                        static_cast<int64_t>(op_count) - 1));
    const FuzzOp& op = ops[static_cast<size_t>(s.op)];
    if (oracle != nullptr && !op.python) continue;
    TensorList operands;
    for (int k = 0; k < op.arity; ++k) {
      s.operands.push_back(draw_value(rng, values.size()));
      operands.push_back(values[static_cast<size_t>(s.operands.back())]);
    }
    s.attrs.first_param = params;
    bool drawn = false;
    try {
      drawn = op.draw(rng, operands, s.attrs);
    } catch (const Error&) {  // a module that refuses these operands' sizes: the op does not apply
      drawn = false;
    }
    if (drawn) append_statement(p, values, std::move(s), operands, params);
  }

  const int last = static_cast<int>(values.size()) - 1;
  p.outputs.push_back(last);
  const int64_t extra = rng.between(0, 2);
  for (int64_t k = 0; k < extra; ++k) {
    const int v = draw_value(rng, values.size());
    if (std::find(p.outputs.begin(), p.outputs.end(), v) == p.outputs.end()) p.outputs.push_back(v);
  }
  autocast.reset();
  if (oracle == nullptr) draw_calls(p, values);
  return p;
}

bool low_precision(const Tensor& t) { return t.dtype() == kBFloat16 || t.dtype() == kFloat16; }

}  // namespace

bool append_statement(Program& p, TensorList& values, Statement s, const TensorList& operands, int& params) {
  Tensor result;
  try {
    TensorList args = operands;
    result = fuzz_ops()[static_cast<size_t>(s.op)].apply(args, s.attrs);
  } catch (const Error&) {
    return false;
  }
  s.dtype = result.dtype();
  if (s.attrs.module) params += static_cast<int>(s.attrs.module->parameters().size());
  values.push_back(result);
  p.body.push_back(std::move(s));
  return true;
}

Program generate_program(uint64_t seed) { return generate(seed, nullptr); }

Program generate_oracle_program(uint64_t seed, const OracleOptions& options) { return generate(seed, &options); }

FuzzResult check_program(const Program& program, const std::string& backend, Device device) {
  move_modules(program, device);
  const CallsReport report = compare_calls(program, backend, device);
  FuzzStats& stats = fuzz_stats();
  stats.recompiles += report.counters.recompiles;
  stats.graph_updates += report.counters.graph_updates;
  stats.rerecords += report.counters.rerecords;
  stats.bucketed_calls += report.counters.bucketed_calls;
  if (report.eager_error) return {Verdict::EagerRaised, *report.eager_error};
  if (!report.difference) return {Verdict::Match, {}};
  const Tolerance tol = tolerance_of(program);
  if (!eager_is_stable(program, device, tol)) return {Verdict::EagerUnstable, *report.difference};
  return {Verdict::Mismatch, *report.difference + "\nReproducer:\n" + print_program(program, backend, device)};
}

FuzzStats& fuzz_stats() {
  static FuzzStats stats;
  return stats;
}

}  // namespace tg::fuzz
