#include "fuzz/fuzz_generator.h"

#include <algorithm>

#include "fuzz/fuzz_ops.h"
#include "graphs/testing/parity.h"

namespace tg::fuzz {
namespace {

InputSpec draw_input(Rng& rng) {
  InputSpec in;
  const int64_t dims = rng.between(1, 3);
  for (int64_t d = 0; d < dims; ++d) in.sizes.push_back(rng.between(1, 4));
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

}  // namespace

Program generate_program(uint64_t seed) {
  Rng rng(seed * 0x9E3779B97F4A7C15ull + 17);
  Program p;
  p.seed = seed;
  const int64_t n_inputs = rng.between(1, 3);
  for (int64_t i = 0; i < n_inputs; ++i) p.inputs.push_back(draw_input(rng));

  // Each statement is tried eagerly on real values as it is drawn; one that raises is dropped.
  TensorList values = make_inputs(p, kCPU);
  const auto& ops = fuzz_ops();
  const int64_t length = rng.between(3, 10);
  for (int attempt = 0; attempt < 60 && static_cast<int64_t>(p.body.size()) < length; ++attempt) {
    Statement s;
    s.op = static_cast<int>(rng.between(0, static_cast<int64_t>(ops.size()) - 1));
    const FuzzOp& op = ops[static_cast<size_t>(s.op)];
    TensorList operands;
    for (int k = 0; k < op.arity; ++k) {
      s.operands.push_back(draw_value(rng, values.size()));
      operands.push_back(values[static_cast<size_t>(s.operands.back())]);
    }
    if (!op.draw(rng, operands, s.attrs)) continue;
    Tensor result;
    try {
      result = op.apply(operands, s.attrs);
    } catch (const Error&) {
      continue;
    }
    values.push_back(result);
    p.body.push_back(std::move(s));
  }

  const int last = static_cast<int>(values.size()) - 1;
  p.outputs.push_back(last);
  const int64_t extra = rng.between(0, 2);
  for (int64_t k = 0; k < extra; ++k) {
    const int v = draw_value(rng, values.size());
    if (std::find(p.outputs.begin(), p.outputs.end(), v) == p.outputs.end()) p.outputs.push_back(v);
  }
  return p;
}

FuzzResult check_program(const Program& program, const std::string& backend, Device device) {
  const TensorList inputs = make_inputs(program, device);
  testing::ParityOptions options;
  options.compile.backend = backend;
  const Tolerance tol = tolerance_of(program);
  options.rtol = tol.rtol;
  options.atol = tol.atol;
  options.calls = 3;
  options.seed = program.seed;
  const graphs::GraphFn fn = [&program](const TensorList& xs) { return run_program(program, xs); };
  const testing::ParityReport report = testing::compare_compiled_with_eager(fn, inputs, options);
  if (report.eager_error) return {Verdict::EagerRaised, *report.eager_error};
  if (!report.difference) return {Verdict::Match, {}};
  return {Verdict::Mismatch, *report.difference + "\nReproducer:\n" + print_program(program, backend, device)};
}

}  // namespace tg::fuzz
