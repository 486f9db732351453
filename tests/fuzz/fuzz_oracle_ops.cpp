// The ops only the PyTorch oracle draws: modules with their parameters (which the Python side sees
// as inputs p<index>, passed to torch.nn.functional calls), scaled dot-product attention, topk and
// linear_cross_entropy, and the reductions composed of other ops (max/min along a dim, std,
// vector_norm) and repeat. They sit after the compiled-vs-eager fuzzer's ops in the table, so its
// seeds keep drawing the same programs.
#include <cmath>
#include <cstdio>
#include <optional>

#include "fuzz/fuzz_ops.h"
#include "ops/attention/efficient_attention.h"
#include "ops/attention/flash_attention.h"
#include "ops/core/autocast.h"

namespace tg::fuzz {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string param(const Attrs& a, int k) { return "p" + std::to_string(a.first_param + k); }

std::string py_reals(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + num(v[i]);
  return s + "]";
}

bool floating(const Tensor& t) { return is_floating(t.dtype()); }

// Parameters in the operand's dtype, or float32 under autocast (as a model's weights are there).
TensorOptions param_options(const Tensor& x) {
  const bool autocast = autocast_dtype(x.device().type).has_value();
  return {.dtype = autocast ? kFloat32 : x.dtype(), .device = x.device()};
}

// Moves every parameter off its init by noise, so that ones/zeros inits (norm weights, attention
// biases) do not hide a wrong gradient or a dropped term.
template <typename M>
std::shared_ptr<M> perturbed(std::shared_ptr<M> m) {
  NoGradGuard no_grad;
  for (Tensor p : m->parameters()) p.add_(randn(p.sizes(), {.dtype = kFloat64}).mul(0.25).to(p.dtype()));
  return m;
}

FuzzOp module_op(std::string name, int arity, std::function<bool(Rng&, const TensorList&, Attrs&)> draw,
                 std::function<Tensor(TensorList&, const Attrs&)> apply,
                 std::function<std::string(const Names&, const Attrs&)> python) {
  FuzzOp op{std::move(name), arity, false, std::move(draw), std::move(apply),
            [name](const Names& n, const Attrs& a) {
              return "(*" + a.module->type_name() + "(" + a.module->extra_repr() + "))(" + n[0] + ")";
            },
            std::move(python)};
  op.oracle_only = true;
  return op;
}

// The reductions composed of other ops, and repeat, against their torch counterparts.
void add_reduction_oracle_ops(std::vector<FuzzOp>& ops) {
  // max or min along a dim (a.ints = {dim, keepdim, largest}); the values detached, as topk's, since
  // which of equal elements gets the gradient depends on rounding at the programs' dtype.
  FuzzOp select{"max_min_dim", 1, false,
                [](Rng& rng, const TensorList& x, Attrs& a) {
                  if (!floating(x[0]) || x[0].dim() < 1 || x[0].numel() == 0) return false;
                  a.ints = {rng.between(0, x[0].dim() - 1), rng.chance(0.5), rng.chance(0.5)};
                  return true;
                },
                [](TensorList& x, const Attrs& a) {
                  const Tensor d = x[0].detach();
                  return (a.ints[2] ? d.max(a.ints[0], a.ints[1] != 0) : d.min(a.ints[0], a.ints[1] != 0)).first;
                },
                [](const Names& n, const Attrs& a) {
                  return n[0] + ".detach()." + (a.ints[2] ? "max(" : "min(") + str(a.ints[0]) + ", " +
                         (a.ints[1] ? "true" : "false") + ").first";
                },
                [](const Names& n, const Attrs& a) {
                  return std::string(a.ints[2] ? "torch.max(" : "torch.min(") + n[0] + ".detach(), " + str(a.ints[0]) +
                         ", keepdim=" + (a.ints[1] ? "True" : "False") + ").values";
                }};
  select.oracle_only = true;
  ops.push_back(std::move(select));
  // std along a dim (a.ints = {dim, keepdim, correction}; correction 0 over a dim of one element).
  FuzzOp deviation{"std_dim", 1, false,
                   [](Rng& rng, const TensorList& x, Attrs& a) {
                     if (!floating(x[0]) || x[0].dim() < 1 || x[0].numel() == 0) return false;
                     const int64_t d = rng.between(0, x[0].dim() - 1);
                     a.ints = {d, rng.chance(0.5), x[0].size(d) > 1 && rng.chance(0.5)};
                     return true;
                   },
                   [](TensorList& x, const Attrs& a) { return x[0].std({a.ints[0]}, a.ints[2], a.ints[1] != 0); },
                   [](const Names& n, const Attrs& a) {
                     return n[0] + ".std({" + str(a.ints[0]) + "}, " + str(a.ints[2]) + ", " +
                            (a.ints[1] ? "true" : "false") + ")";
                   },
                   [](const Names& n, const Attrs& a) {
                     return "torch.std(" + n[0] + ", dim=" + str(a.ints[0]) + ", correction=" + str(a.ints[2]) +
                            ", keepdim=" + (a.ints[1] ? "True" : "False") + ")";
                   }};
  deviation.oracle_only = true;
  ops.push_back(std::move(deviation));
  // vector_norm of order 1, 2, 3 or infinity along a dim (a.ints = {dim, keepdim}, a.reals = {ord}).
  FuzzOp norm{"vector_norm", 1, false,
              [](Rng& rng, const TensorList& x, Attrs& a) {
                if (!floating(x[0]) || x[0].dim() < 1 || x[0].numel() == 0) return false;
                a.ints = {rng.between(0, x[0].dim() - 1), rng.chance(0.5)};
                a.reals = {rng.pick(std::vector<double>{1.0, 2.0, 3.0, INFINITY})};
                return true;
              },
              [](TensorList& x, const Attrs& a) { return vector_norm(x[0], a.reals[0], {a.ints[0]}, a.ints[1] != 0); },
              [](const Names& n, const Attrs& a) {
                return "vector_norm(" + n[0] + ", " + (std::isinf(a.reals[0]) ? "INFINITY" : num(a.reals[0])) +
                       ", {" + str(a.ints[0]) + "}, " + (a.ints[1] ? "true" : "false") + ")";
              },
              [](const Names& n, const Attrs& a) {
                return "torch.linalg.vector_norm(" + n[0] + ", " +
                       (std::isinf(a.reals[0]) ? std::string("float('inf')") : num(a.reals[0])) + ", dim=" +
                       str(a.ints[0]) + ", keepdim=" + (a.ints[1] ? "True" : "False") + ")";
              }};
  norm.oracle_only = true;
  ops.push_back(std::move(norm));
  // repeat: 1 or 2 copies along each dim, and a leading dim of 2 in some.
  FuzzOp tile{"repeat", 1, false,
              [](Rng& rng, const TensorList& x, Attrs& a) {
                if (x[0].dim() > 3 || x[0].numel() > 64) return false;
                if (rng.chance(0.3)) a.ints.push_back(2);
                for (int64_t d = 0; d < x[0].dim(); ++d) a.ints.push_back(rng.between(1, 2));
                return !a.ints.empty();
              },
              [](TensorList& x, const Attrs& a) { return x[0].repeat(Shape(a.ints.begin(), a.ints.end())); },
              [](const Names& n, const Attrs& a) { return n[0] + ".repeat(" + ints(a.ints) + ")"; },
              [](const Names& n, const Attrs& a) { return n[0] + ".repeat(" + py_ints(a.ints) + ")"; }};
  tile.oracle_only = true;
  ops.push_back(std::move(tile));
}

}  // namespace

void add_oracle_ops(std::vector<FuzzOp>& ops) {
  ops.push_back(module_op(
      "nn_linear", 1,
      [](Rng& rng, const TensorList& x, Attrs& a) {
        if (!floating(x[0]) || x[0].dim() < 1 || x[0].dim() > 3 || x[0].size(-1) == 0) return false;
        a.ints = {rng.between(1, 4), rng.chance(0.7)};  // out_features, bias
        a.module = perturbed(std::make_shared<nn::Linear>(x[0].size(-1), a.ints[0], a.ints[1] != 0, param_options(x[0])));
        return true;
      },
      [](TensorList& x, const Attrs& a) { return (*a.module)(x[0]); },
      [](const Names& n, const Attrs& a) {
        return "F.linear(" + n[0] + ", " + param(a, 0) + (a.ints[1] ? ", " + param(a, 1) : "") + ")";
      }));
  ops.push_back(module_op(
      "nn_layer_norm", 1,
      [](Rng& rng, const TensorList& x, Attrs& a) {
        if (!floating(x[0]) || x[0].dim() < 1) return false;
        const int64_t dims = x[0].dim() >= 2 && rng.chance(0.3) ? 2 : 1;
        a.ints = std::vector<int64_t>(x[0].sizes().end() - dims, x[0].sizes().end());
        a.module = perturbed(std::make_shared<nn::LayerNorm>(Shape(a.ints.begin(), a.ints.end()), 1e-5, true, true,
                                                             param_options(x[0])));
        return true;
      },
      [](TensorList& x, const Attrs& a) { return (*a.module)(x[0]); },
      [](const Names& n, const Attrs& a) {
        return "F.layer_norm(" + n[0] + ", " + py_ints(a.ints, 0, a.ints.size()) + ", " + param(a, 0) + ", " +
               param(a, 1) + ", 1e-05)";
      }));
  // x + embedding(indices) with indices of x's leading shape: the lookup joins the program's values.
  ops.push_back(module_op(
      "nn_embedding", 1,
      [](Rng& rng, const TensorList& x, Attrs& a) {
        if (!floating(x[0]) || x[0].dim() < 1 || x[0].dim() > 3) return false;
        const int64_t count = rng.between(2, 6), padding = rng.chance(0.3) ? rng.between(0, count - 1) : -1;
        a.ints = {count, padding, x[0].dim() - 1};
        for (int64_t d = 0; d + 1 < x[0].dim(); ++d) a.ints.push_back(x[0].size(d));
        const int64_t n = x[0].numel() / std::max<int64_t>(x[0].size(-1), 1);
        for (int64_t i = 0; i < n; ++i) a.ints.push_back(rng.between(0, count - 1));
        std::optional<int64_t> pad;
        if (padding >= 0) pad = padding;
        auto m = std::make_shared<nn::Embedding>(count, x[0].size(-1), pad, param_options(x[0]));
        {
          NoGradGuard no_grad;
          m->weight().mul_(0.5);  // N(0, 1) rows, halved to stay on the scale of the other values
        }
        a.module = m;
        return true;
      },
      [](TensorList& x, const Attrs& a) {
        const size_t dims = static_cast<size_t>(a.ints[2]);
        const Shape sizes(a.ints.begin() + 3, a.ints.begin() + 3 + static_cast<ptrdiff_t>(dims));
        const std::vector<int64_t> idx(a.ints.begin() + 3 + static_cast<ptrdiff_t>(dims), a.ints.end());
        return x[0] + (*a.module)(from_vector(idx, sizes, {.dtype = kInt64, .device = x[0].device()}));
      },
      [](const Names& n, const Attrs& a) {
        const size_t dims = static_cast<size_t>(a.ints[2]);
        return n[0] + " + F.embedding(torch.tensor(" + py_ints(a.ints, 3 + dims, a.ints.size()) +
               ", dtype=torch.long).reshape(" +
               py_ints(a.ints, 3, 3 + dims) + "), " + param(a, 0) +
               (a.ints[1] >= 0 ? ", padding_idx=" + str(a.ints[1]) : "") + ")";
      }));
  ops.push_back(module_op(
      "nn_conv2d", 1,
      [](Rng& rng, const TensorList& x, Attrs& a) {
        if (!floating(x[0]) || (x[0].dim() != 3 && x[0].dim() != 4)) return false;
        // out channels, kernel, stride, padding, bias
        a.ints = {rng.between(1, 3), rng.between(1, 2), rng.between(1, 2), rng.between(0, 1), rng.chance(0.7)};
        if (x[0].size(-1) + 2 * a.ints[3] < a.ints[1] || x[0].size(-2) + 2 * a.ints[3] < a.ints[1]) return false;
        a.module = perturbed(std::make_shared<nn::Conv2d>(x[0].size(-3), a.ints[0], Shape{a.ints[1]}, Shape{a.ints[2]},
                                                          a.ints[3], Shape{1}, 1, a.ints[4] != 0, param_options(x[0])));
        return true;
      },
      [](TensorList& x, const Attrs& a) { return (*a.module)(x[0]); },
      [](const Names& n, const Attrs& a) {
        return "F.conv2d(" + n[0] + ", " + param(a, 0) + ", " + (a.ints[4] ? param(a, 1) : "None") + ", " +
               str(a.ints[2]) + ", " + str(a.ints[3]) + ")";
      }));
  // LSTM or GRU over [T, B, I] ([B, T, I] batch first): the output sequence, h_n or c_n.
  ops.push_back(module_op(
      "nn_rnn", 1,
      [](Rng& rng, const TensorList& x, Attrs& a) {
        if (!floating(x[0]) || x[0].dim() != 3 || x[0].numel() == 0) return false;
        const bool lstm = rng.chance(0.5);
        // lstm, hidden, layers, bidirectional, batch_first, bias, which result
        a.ints = {lstm, rng.between(1, 4), rng.between(1, 2), rng.chance(0.3), rng.chance(0.3), rng.chance(0.8),
                  rng.between(0, lstm ? 2 : 1)};
        const nn::RnnOptions opts{.num_layers = a.ints[2], .bias = a.ints[5] != 0, .batch_first = a.ints[4] != 0,
                                  .bidirectional = a.ints[3] != 0};
        if (lstm) a.module = std::make_shared<nn::LSTM>(x[0].size(2), a.ints[1], opts, param_options(x[0]));
        else a.module = std::make_shared<nn::GRU>(x[0].size(2), a.ints[1], opts, param_options(x[0]));
        return true;
      },
      [](TensorList& x, const Attrs& a) {
        const nn::RnnOutput out = static_cast<nn::RnnBase&>(*a.module).forward_with_state(x[0]);
        return a.ints[6] == 0 ? out.output : a.ints[6] == 1 ? out.h_n : out.c_n;
      },
      [](const Names& n, const Attrs& a) {
        std::string params = "[";
        const size_t count = a.module->parameters().size();
        for (size_t k = 0; k < count; ++k) params += (k ? ", " : "") + param(a, static_cast<int>(k));
        return std::string("_rnn(") + (a.ints[0] ? "'lstm'" : "'gru'") + ", " + n[0] + ", " + params + "], " +
               (a.ints[5] ? "True" : "False") + ", " + str(a.ints[2]) + ", " + (a.ints[3] ? "True" : "False") + ", " +
               (a.ints[4] ? "True" : "False") + ", " + str(a.ints[6]) + ")";
      }));
  // Self-attention over [L, N, E] ([N, L, E] batch first), with no mask, a causal one, an additive
  // float mask or a bool mask (PyTorch's MultiheadAttention: true = may not attend).
  ops.push_back(module_op(
      "nn_mha", 1,
      [](Rng& rng, const TensorList& x, Attrs& a) {
        if (!floating(x[0]) || x[0].dim() != 3 || x[0].numel() == 0) return false;
        const int64_t heads = x[0].size(2) % 2 == 0 && rng.chance(0.5) ? 2 : 1;
        const bool batch_first = rng.chance(0.3);
        const int64_t L = x[0].size(batch_first ? 1 : 0);
        const int64_t mask = rng.between(0, 3);  // none, causal, float, bool
        a.ints = {heads, batch_first, mask, rng.chance(0.8), L};
        if (mask == 2)
          for (int64_t i = 0; i < L * L; ++i) a.reals.push_back(static_cast<double>(rng.between(-4, 0)) * 0.5);
        if (mask == 3)  // the diagonal always attends, so that no row is fully masked
          for (int64_t i = 0; i < L * L; ++i) a.ints.push_back(i / L != i % L && rng.chance(0.4));
        a.module = perturbed(std::make_shared<nn::MultiheadAttention>(x[0].size(2), heads, 0.0, a.ints[3] != 0,
                                                                      batch_first, param_options(x[0])));
        return true;
      },
      [](TensorList& x, const Attrs& a) {
        const int64_t L = a.ints[4];
        Tensor mask;
        if (a.ints[2] == 2) mask = from_vector(a.reals, {L, L}, {.dtype = x[0].dtype(), .device = x[0].device()});
        if (a.ints[2] == 3) {
          const std::vector<int64_t> bits(a.ints.begin() + 5, a.ints.end());
          mask = ne(from_vector(bits, {L, L}, {.dtype = kInt64, .device = x[0].device()}), 0);
        }
        return static_cast<nn::MultiheadAttention&>(*a.module).attend(x[0], x[0], x[0], mask, a.ints[2] == 1);
      },
      [](const Names& n, const Attrs& a) {
        const int64_t L = a.ints[4];
        std::string mask = "None";
        if (a.ints[2] == 2) mask = "torch.tensor(" + py_reals(a.reals) + ").reshape(" + str(L) + ", " + str(L) + ")";
        if (a.ints[2] == 3)
          mask = "torch.tensor(" + py_ints(a.ints, 5, a.ints.size()) + ").reshape(" + str(L) + ", " + str(L) +
                 ").bool()";
        const std::string bias = a.ints[3] ? param(a, 1) : "None";
        const std::string out_w = param(a, a.ints[3] ? 2 : 1), out_b = a.ints[3] ? param(a, 3) : "None";
        return "_mha(" + n[0] + ", " + str(a.ints[0]) + ", " + param(a, 0) + ", " + bias + ", " + out_w + ", " + out_b +
               ", " + (a.ints[1] ? "True" : "False") + ", " + mask + ", " + (a.ints[2] == 1 ? "True" : "False") + ")";
      }));
  // softmax(x x^T / sqrt(E) + mask) x over x [..., L, E]: causal, an additive float mask, or none.
  // Unmasked float32/float64 CUDA operands outside autocast run the memory-efficient kernels at any
  // size (kAuto would compose the small heads the fuzzer draws); autocast's 16-bit operands keep kAuto.
  FuzzOp sdpa{"sdpa", 1, false,
              [](Rng& rng, const TensorList& x, Attrs& a) {
                if (!floating(x[0]) || x[0].dim() < 2 || x[0].dim() > 4) return false;
                const int64_t L = x[0].size(-2);
                a.ints = {rng.between(0, 2), L};
                if (a.ints[0] == 2)
                  for (int64_t i = 0; i < L * L; ++i) a.reals.push_back(static_cast<double>(rng.between(-4, 0)) * 0.5);
                return true;
              },
              [](TensorList& x, const Attrs& a) {
                const int64_t L = a.ints[1];
                Tensor mask;
                if (a.ints[0] == 2) mask = from_vector(a.reals, {L, L}, {.dtype = x[0].dtype(), .device = x[0].device()});
                std::optional<SdpaKernelGuard> kernels;
                if (!autocast::active_for(x[0]) && efficient_attention_blocker(x[0], x[0], x[0], mask, 0.0).empty())
                  kernels.emplace(SdpaKernel::kFused);
                return scaled_dot_product_attention(x[0], x[0], x[0], mask, 0.0, a.ints[0] == 1);
              },
              [](const Names& n, const Attrs& a) {
                return "scaled_dot_product_attention(" + n[0] + ", " + n[0] + ", " + n[0] + ", " +
                       (a.ints[0] == 2 ? "mask" : "Tensor()") + ", 0.0, " + (a.ints[0] == 1 ? "true" : "false") + ")";
              },
              [](const Names& n, const Attrs& a) {
                const int64_t L = a.ints[1];
                const std::string mask = a.ints[0] == 2 ? "torch.tensor(" + py_reals(a.reals) + ").reshape(" + str(L) +
                                                              ", " + str(L) + ").to(" + n[0] + ".dtype)"
                                                        : "None";
                return "_sdpa(" + n[0] + ", " + n[0] + ", " + n[0] + ", " + mask + ", " +
                       (a.ints[0] == 1 ? "True" : "False") + ")";
              }};
  sdpa.oracle_only = true;
  ops.push_back(std::move(sdpa));
  // The k largest (or smallest) values along a dim, of the operand detached: which of equal values
  // gets the gradient is unspecified in PyTorch, and relu's zeros make ties common.
  FuzzOp topk_values{"topk", 1, false,
                     [](Rng& rng, const TensorList& x, Attrs& a) {
                       if (!floating(x[0]) || x[0].dim() < 1) return false;
                       const int64_t d = rng.between(0, x[0].dim() - 1);
                       a.ints = {d, rng.between(0, x[0].size(d)), rng.chance(0.7)};
                       return true;
                     },
                     [](TensorList& x, const Attrs& a) {
                       return topk(x[0].detach(), a.ints[1], a.ints[0], a.ints[2] != 0).first;
                     },
                     [](const Names& n, const Attrs& a) {
                       return "topk(" + n[0] + ".detach(), " + str(a.ints[1]) + ", " + str(a.ints[0]) + ", " +
                              (a.ints[2] ? "true" : "false") + ").first";
                     },
                     [](const Names& n, const Attrs& a) {
                       return "torch.topk(" + n[0] + ".detach(), " + str(a.ints[1]) + ", " + str(a.ints[0]) + ", " +
                              (a.ints[2] ? "True" : "False") + ").values";
                     }};
  topk_values.oracle_only = true;
  ops.push_back(std::move(topk_values));
  // The LM head's loss over rows of a [N, D] operand: a Linear layer's parameters, fixed class
  // targets (some ignored), any reduction and chunk size, against cross_entropy(linear(...)).
  FuzzOp lce{"linear_cross_entropy", 1, false,
             [](Rng& rng, const TensorList& x, Attrs& a) {
               if (!floating(x[0]) || x[0].dim() != 2 || x[0].size(1) == 0) return false;
               const int64_t classes = rng.between(1, 6);
               a.ints = {classes, rng.chance(0.7), rng.between(0, 2), rng.between(0, 3)};  // bias, reduction, chunk
               for (int64_t i = 0; i < x[0].size(0); ++i) a.ints.push_back(rng.chance(0.2) ? -100 : (i * 7 + 3) % classes);
               a.module = perturbed(std::make_shared<nn::Linear>(x[0].size(1), classes, a.ints[1] != 0, param_options(x[0])));
               return true;
             },
             [](TensorList& x, const Attrs& a) {
               const TensorList ps = a.module->parameters();
               const std::vector<int64_t> t(a.ints.begin() + 4, a.ints.end());
               const Tensor target = from_vector(t, {static_cast<int64_t>(t.size())}, {.dtype = kInt64, .device = x[0].device()});
               const Reduction r = a.ints[2] == 0 ? Reduction::Mean : a.ints[2] == 1 ? Reduction::Sum : Reduction::None;
               return linear_cross_entropy(x[0], ps[0], a.ints[1] ? ps[1] : Tensor(), target,
                                           {.reduction = r, .chunk_rows = a.ints[3]});
             },
             [](const Names& n, const Attrs& a) {
               return "linear_cross_entropy(" + n[0] + ", weight, bias, targets, {.chunk_rows = " + str(a.ints[3]) + "})";
             },
             [](const Names& n, const Attrs& a) {
               static const char* kReductions[] = {"mean", "sum", "none"};
               const std::string bias = a.ints[1] ? ", " + param(a, 1) : "";
               return "F.cross_entropy(F.linear(" + n[0] + ", " + param(a, 0) + bias + "), torch.tensor(" +
                      py_ints(a.ints, 4, a.ints.size()) + ", dtype=torch.long), reduction='" + kReductions[a.ints[2]] +
                      "')";
             }};
  lce.oracle_only = true;
  ops.push_back(std::move(lce));
  add_reduction_oracle_ops(ops);
}

}  // namespace tg::fuzz
