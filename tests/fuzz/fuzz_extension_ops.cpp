// The extension ops of the compiled-vs-eager fuzzer: ops joined after its seeds were fixed, drawn
// from a second random stream after the program a seed drew (fuzz_calls.cpp), and scalar_arg, the
// statement that reads a scalar argument of the compiled function.
#include <cmath>
#include <cstdio>
#include <limits>

#include "fuzz/fuzz_ops.h"
#include "ops/reduce/multi_tensor_norm.h"

namespace tg::fuzz {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

bool floating(const Tensor& t) { return is_floating(t.dtype()); }

FuzzOp extension(FuzzOp op) {
  op.extension = true;
  return op;
}

// The elementwise steps a checkpoint region chains (code -> step).
Tensor checkpoint_step(const Tensor& y, int64_t code) {
  switch (code) {
    case 0: return y.tanh();
    case 1: return y.sigmoid();
    case 2: return y * y;
    case 3: return y.sin();
    case 4: return y.relu();
    default: return dropout(y, 0.5, true);  // the recomputation must draw the forward's mask
  }
}

std::string checkpoint_step_str(const std::string& y, int64_t code) {
  switch (code) {
    case 0: return y + ".tanh()";
    case 1: return y + ".sigmoid()";
    case 2: return "(" + y + " * " + y + ")";
    case 3: return y + ".sin()";
    case 4: return y + ".relu()";
    default: return "dropout(" + y + ", 0.5, true)";
  }
}

}  // namespace

void add_extension_ops(std::vector<FuzzOp>& ops) {
  // x * s or x + s for scalar argument s (a.ints = {k, add}); placed by the generator, never drawn.
  ops.push_back(extension(FuzzOp{
      "scalar_arg", 1, false,
      [](Rng& rng, const TensorList& x, Attrs& a) {
        if (a.ints.size() != 1 || !floating(x[0])) return false;
        a.ints.push_back(rng.chance(0.5));
        return true;
      },
      [](TensorList& x, const Attrs& a) {
        const int k = static_cast<int>(a.ints[0]);
        const Tensor d = dynamic_scalar(k);
        if (d.defined()) return a.ints[1] ? x[0] + d : x[0] * d;
        const double v = guarded_scalar(k);
        return a.ints[1] ? x[0] + v : x[0] * v;
      },
      [](const Names& n, const Attrs& a) { return n[0] + (a.ints[1] ? " + s" : " * s") + str(a.ints[0]); }}));
  // topk's values with their gradient (scattered back to the chosen positions).
  ops.push_back(extension(FuzzOp{
      "topk_grad", 1, false,
      [](Rng& rng, const TensorList& x, Attrs& a) {
        if (!floating(x[0]) || x[0].dim() < 1) return false;
        const int64_t d = rng.between(0, x[0].dim() - 1);
        a.ints = {d, rng.between(0, x[0].size(d)), rng.chance(0.7)};
        return true;
      },
      [](TensorList& x, const Attrs& a) { return topk(x[0], a.ints[1], a.ints[0], a.ints[2] != 0).first; },
      [](const Names& n, const Attrs& a) {
        return "topk(" + n[0] + ", " + str(a.ints[1]) + ", " + str(a.ints[0]) + ", " + (a.ints[2] ? "true" : "false") +
               ").first";
      }}));
  // Indices drawn from rows of |x| + 0.1 (as x's dtype, so that they join the program's values):
  // random, so compared under the same seed, as dropout is.
  ops.push_back(extension(FuzzOp{
      "multinomial", 1, false,
      [](Rng& rng, const TensorList& x, Attrs& a) {
        if (!floating(x[0]) || x[0].dim() < 1 || x[0].dim() > 2 || x[0].numel() == 0) return false;
        const bool replacement = rng.chance(0.5);
        a.ints = {replacement ? rng.between(1, 4) : rng.between(1, x[0].size(-1)), replacement};
        return true;
      },
      [](TensorList& x, const Attrs& a) {
        const Tensor w = x[0].detach().abs() + 0.1;
        return multinomial(w, a.ints[0], a.ints[1] != 0).to(x[0].dtype());
      },
      [](const Names& n, const Attrs& a) {
        return "multinomial(" + n[0] + ".detach().abs() + 0.1, " + str(a.ints[0]) + ", " +
               (a.ints[1] ? "true" : "false") + ").to(" + n[0] + ".dtype())";
      }}));
  // A checkpoint region of 1 to 3 elementwise steps (a dropout among them in some): compiled, the
  // partitioner recomputes it in the backward graph.
  ops.push_back(extension(FuzzOp{
      "checkpoint", 1, false,
      [](Rng& rng, const TensorList& x, Attrs& a) {
        if (!floating(x[0])) return false;
        for (int64_t k = rng.between(1, 3); k > 0; --k) a.ints.push_back(rng.between(0, rng.chance(0.2) ? 5 : 4));
        return true;
      },
      [](TensorList& x, const Attrs& a) {
        const std::vector<int64_t> codes = a.ints;
        return checkpoint_tensors(
            [codes](const TensorList& in) {
              Tensor y = in[0];
              for (int64_t c : codes) y = checkpoint_step(y, c);
              return TensorList{y};
            },
            {x[0]})[0];
      },
      [](const Names& n, const Attrs& a) {
        std::string body = "in[0]";
        for (int64_t c : a.ints) body = checkpoint_step_str(body, c);
        return "checkpoint_tensors([](const TensorList& in) { return TensorList{" + body + "}; }, {" + n[0] + "})[0]";
      }}));
  // linear_cross_entropy of a [N, D] operand against its own rows as the weight (N classes), the
  // first column as the bias in some, fixed targets (some ignored), any reduction and chunk size.
  ops.push_back(extension(FuzzOp{
      "linear_cross_entropy_self", 1, false,
      [](Rng& rng, const TensorList& x, Attrs& a) {
        if (!floating(x[0]) || x[0].dim() != 2 || x[0].size(0) == 0 || x[0].size(1) == 0) return false;
        const int64_t n = x[0].size(0);
        a.ints = {rng.chance(0.5), rng.between(0, 2), rng.between(0, 3)};  // bias, reduction, chunk rows
        for (int64_t i = 0; i < n; ++i) a.ints.push_back(rng.chance(0.2) ? -100 : rng.between(0, n - 1));
        return true;
      },
      [](TensorList& x, const Attrs& a) {
        const std::vector<int64_t> t(a.ints.begin() + 3, a.ints.end());
        const Tensor target = from_vector(t, {static_cast<int64_t>(t.size())}, {.dtype = kInt64, .device = x[0].device()});
        const Reduction r = a.ints[1] == 0 ? Reduction::Mean : a.ints[1] == 1 ? Reduction::Sum : Reduction::None;
        return linear_cross_entropy(x[0], x[0], a.ints[0] ? x[0].select(1, 0) : Tensor(), target,
                                    {.reduction = r, .chunk_rows = a.ints[2]});
      },
      [](const Names& n, const Attrs& a) {
        static const char* const kReductions[] = {"Mean", "Sum", "None"};
        return "linear_cross_entropy(" + n[0] + ", " + n[0] + ", " + (a.ints[0] ? n[0] + ".select(1, 0)" : "Tensor()") +
               ", from_vector<int64_t>(" + ints(a.ints, 3) + "), {.reduction = Reduction::" + kReductions[a.ints[1]] +
               ", .chunk_rows = " + str(a.ints[2]) + "})";
      }}));
  // The norms of two operands in one op (not differentiable), of order 1, 2 or infinity.
  ops.push_back(extension(FuzzOp{
      "multi_tensor_norm", 2, false,
      [](Rng& rng, const TensorList& x, Attrs& a) {
        if (!floating(x[0]) || !floating(x[1])) return false;
        a.reals = {rng.pick(std::vector<double>{1.0, 2.0, std::numeric_limits<double>::infinity()})};
        return true;
      },
      [](TensorList& x, const Attrs& a) { return multi_tensor_norm({x[0], x[1]}, a.reals[0]); },
      [](const Names& n, const Attrs& a) {
        const std::string ord = std::isinf(a.reals[0]) ? "INFINITY" : a.reals[0] == 1.0 ? "1.0" : "2.0";
        return "multi_tensor_norm({" + n[0] + ", " + n[1] + "}, " + ord + ")";
      }}));
}

}  // namespace tg::fuzz
