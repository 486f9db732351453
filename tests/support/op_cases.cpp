// The table of every differentiable op (support/op_cases.h), compiled once for the suites that share it.
#include "support/op_cases.h"

#include <optional>

#include "support/op_cases_sequence.h"

namespace tg::testing {

std::vector<OpCase> all_op_cases() {
  using namespace cases;
  using L = const TensorList&;
  std::vector<OpCase> c;
  auto add_case = [&](std::string name, std::function<TensorList()> inputs, TensorFn fn, bool twice = false) {
    c.push_back(OpCase{std::move(name), std::move(inputs), std::move(fn), twice});
  };

  // ---- binary arithmetic ----
  add_case("add", [] { return TensorList{uniform({2, 3}), uniform({3})}; }, [](L x) { return add(x[0], x[1]); });
  add_case("add_alpha", [] { return TensorList{uniform({2, 3}), uniform({2, 1})}; },
           [](L x) { return add(x[0], x[1], 2.5); });
  add_case("add_scalar", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return add(x[0], 1.5); });
  add_case("sub", [] { return TensorList{uniform({2, 3}), uniform({2, 1})}; }, [](L x) { return sub(x[0], x[1]); });
  add_case("sub_alpha", [] { return TensorList{uniform({3}), uniform({2, 3})}; },
           [](L x) { return sub(x[0], x[1], -0.5); });
  add_case("sub_scalar", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return sub(x[0], 2.0); });
  add_case("rsub", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return rsub(x[0], 3.0); });
  add_case("mul", [] { return TensorList{uniform({2, 3}), uniform({3})}; }, [](L x) { return mul(x[0], x[1]); },
           true);
  add_case("mul_scalar", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return mul(x[0], -1.5); });
  add_case("div", [] { return TensorList{uniform({2, 3}), positive({3})}; }, [](L x) { return div(x[0], x[1]); },
           true);
  add_case("div_scalar", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return div(x[0], 4.0); });
  add_case("rdiv", [] { return TensorList{positive({2, 3})}; }, [](L x) { return rdiv(x[0], 2.0); }, true);
  add_case("operators", [] { return TensorList{uniform({2, 3}), uniform({3})}; },
           [](L x) { return (x[0] * 2.0 - x[1]) / (1.5 + x[1] * x[1]) + (1.0 - x[0]) * (-x[1]); }, true);
  add_case("maximum", [] {
    Tensor b = uniform({2, 3});
    return TensorList{b + signed_away({2, 3}), b};
  }, [](L x) { return maximum(x[0], x[1]); });
  add_case("maximum_broadcast", [] { return TensorList{signed_away({2, 3}), zeros({3}, {.dtype = kFloat64})}; },
           [](L x) { return maximum(x[0], x[1]); });
  add_case("minimum", [] {
    Tensor b = uniform({2, 3});
    return TensorList{b, b + signed_away({2, 3})};
  }, [](L x) { return minimum(x[0], x[1]); });

  // ---- unary ----
  add_case("neg", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return neg(x[0]); });
  add_case("pow", [] { return TensorList{positive({2, 3})}; }, [](L x) { return pow(x[0], 2.5); }, true);
  add_case("pow_int", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return pow(x[0], 3); }, true);
  add_case("pow_negative", [] { return TensorList{positive({2, 3})}; }, [](L x) { return pow(x[0], -1.5); }, true);
  add_case("abs", [] { return TensorList{signed_away({2, 3})}; }, [](L x) { return abs(x[0]); });
  add_case("square", [] { return TensorList{uniform({2, 3}, -2, 2)}; }, [](L x) { return square(x[0]); });
  add_case("sgn", [] { return TensorList{signed_away({2, 3})}; }, [](L x) { return sgn(x[0]); });
  add_case("exp", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return exp(x[0]); }, true);
  add_case("log", [] { return TensorList{positive({2, 3})}; }, [](L x) { return log(x[0]); }, true);
  add_case("sin", [] { return TensorList{uniform({2, 3}, -3, 3)}; }, [](L x) { return sin(x[0]); }, true);
  add_case("cos", [] { return TensorList{uniform({2, 3}, -3, 3)}; }, [](L x) { return cos(x[0]); }, true);
  add_case("erf", [] { return TensorList{uniform({2, 3}, -2.5, 2.5)}; }, [](L x) { return erf(x[0]); }, true);
  add_case("tanh", [] { return TensorList{uniform({2, 3}, -2, 2)}; }, [](L x) { return tanh(x[0]); }, true);
  add_case("sigmoid", [] { return TensorList{uniform({2, 3}, -3, 3)}; }, [](L x) { return sigmoid(x[0]); }, true);
  add_case("relu", [] { return TensorList{signed_away({2, 3})}; }, [](L x) { return relu(x[0]); });
  add_case("gelu", [] { return TensorList{uniform({2, 3}, -3, 3)}; }, [](L x) { return gelu(x[0]); }, true);
  add_case("gelu_tanh", [] { return TensorList{uniform({2, 3}, -3, 3)}; }, [](L x) { return gelu(x[0], "tanh"); },
           true);
  add_case("sqrt", [] { return TensorList{positive({2, 3})}; }, [](L x) { return sqrt(x[0]); }, true);
  add_case("rsqrt", [] { return TensorList{positive({2, 3})}; }, [](L x) { return rsqrt(x[0]); }, true);
  add_case("trunc", [] { return TensorList{uniform({2, 3}, -2.9, 2.9)}; }, [](L x) { return trunc(x[0]); });
  add_case("clamp", [] { return TensorList{uniform({3, 4})}; }, [](L x) { return clamp(x[0], -0.5, 0.5); });
  add_case("clamp_min", [] { return TensorList{uniform({3, 4})}; },
           [](L x) { return clamp(x[0], -0.25, std::nullopt); });
  add_case("clamp_max", [] { return TensorList{uniform({3, 4})}; },
           [](L x) { return clamp(x[0], std::nullopt, 0.25); });
  add_case("where", [] {
    return TensorList{mask({true, false, true, false, false, true}, {2, 3}), uniform({2, 3}), uniform({3})};
  }, [](L x) { return where(x[0], x[1], x[2]); });

  // ---- reductions ----
  add_case("sum", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return sum(x[0]); });
  add_case("sum_dims_keepdim", [] { return TensorList{uniform({2, 3, 4})}; },
           [](L x) { return sum(x[0], {0, 2}, true); });
  add_case("sum_last_dim", [] { return TensorList{uniform({2, 3, 4})}; }, [](L x) { return sum(x[0], {-1}); });
  add_case("sum_to", [] { return TensorList{uniform({2, 3, 4})}; }, [](L x) { return sum_to(x[0], {3, 1}); });
  add_case("mean", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return mean(x[0]); });
  add_case("mean_dim_keepdim", [] { return TensorList{uniform({2, 3, 4})}; },
           [](L x) { return mean(x[0], {1}, true); });
  add_case("amax", [] { return TensorList{uniform({3, 4})}; }, [](L x) { return amax(x[0]); });
  add_case("amax_dim", [] { return TensorList{uniform({3, 4})}; }, [](L x) { return amax(x[0], {1}); });
  add_case("amin", [] { return TensorList{uniform({3, 4})}; }, [](L x) { return amin(x[0]); });
  add_case("amin_dim_keepdim", [] { return TensorList{uniform({3, 4})}; },
           [](L x) { return amin(x[0], {0}, true); });
  add_case("var", [] { return TensorList{uniform({3, 4})}; }, [](L x) { return var(x[0]); }, true);
  add_case("var_dim_unbiased0", [] { return TensorList{uniform({3, 4})}; },
           [](L x) { return var(x[0], {1}, 0, true); }, true);
  add_case("max_dim_values", [] { return TensorList{uniform({3, 4})}; }, [](L x) { return max(x[0], 1).first; });
  add_case("min_dim_keepdim_values", [] { return TensorList{uniform({3, 4})}; },
           [](L x) { return min(x[0], 0, true).first; });
  add_case("std", [] { return TensorList{uniform({3, 4})}; }, [](L x) { return std(x[0]); }, true);
  add_case("std_dim_unbiased0", [] { return TensorList{uniform({3, 4})}; },
           [](L x) { return std(x[0], {1}, 0, true); }, true);
  add_case("vector_norm", [] { return TensorList{uniform({3, 4})}; }, [](L x) { return vector_norm(x[0]); }, true);
  add_case("vector_norm_ord1_dim", [] { return TensorList{signed_away({3, 4})}; },
           [](L x) { return vector_norm(x[0], 1, {1}); });
  add_case("vector_norm_ord3_dim_keepdim", [] { return TensorList{signed_away({3, 4})}; },
           [](L x) { return vector_norm(x[0], 3, {0}, true); }, true);
  add_case("vector_norm_inf", [] { return TensorList{signed_away({3, 4})}; },
           [](L x) { return vector_norm(x[0], std::numeric_limits<double>::infinity(), {1}); });

  // ---- matrix products ----
  add_case("mm", [] { return TensorList{uniform({2, 3}), uniform({3, 4})}; }, [](L x) { return mm(x[0], x[1]); },
           true);
  add_case("bmm", [] { return TensorList{uniform({2, 2, 3}), uniform({2, 3, 2})}; },
           [](L x) { return bmm(x[0], x[1]); }, true);
  add_case("matmul_dot", [] { return TensorList{uniform({4}), uniform({4})}; },
           [](L x) { return matmul(x[0], x[1]); }, true);
  add_case("matmul_matrix_vector", [] { return TensorList{uniform({2, 3}), uniform({3})}; },
           [](L x) { return matmul(x[0], x[1]); }, true);
  add_case("matmul_vector_matrix", [] { return TensorList{uniform({3}), uniform({3, 2})}; },
           [](L x) { return matmul(x[0], x[1]); }, true);
  add_case("matmul_batched_broadcast", [] { return TensorList{uniform({2, 2, 3}), uniform({3, 4})}; },
           [](L x) { return matmul(x[0], x[1]); }, true);
  add_case("matmul_batch_dims_broadcast", [] { return TensorList{uniform({2, 1, 2, 3}), uniform({3, 3, 2})}; },
           [](L x) { return matmul(x[0], x[1]); }, true);
  add_case("addmm", [] { return TensorList{uniform({4}), uniform({2, 3}), uniform({3, 4})}; },
           [](L x) { return addmm(x[0], x[1], x[2], 0.5, 2.0); }, true);
  add_case("linear", [] { return TensorList{uniform({2, 3, 4}), uniform({5, 4}), uniform({5})}; },
           [](L x) { return linear(x[0], x[1], x[2]); }, true);
  add_case("linear_no_bias", [] { return TensorList{uniform({3, 4}), uniform({2, 4})}; },
           [](L x) { return linear(x[0], x[1]); }, true);

  // ---- convolutions and padding ----
  add_case("conv2d", [] { return TensorList{uniform({2, 3, 5, 6}), uniform({4, 3, 3, 2}), uniform({4})}; },
           [](L x) { return conv2d(x[0], x[1], x[2]); }, true);
  add_case("conv2d_stride_pad_dilation_groups",
           [] { return TensorList{uniform({2, 4, 7, 6}), uniform({6, 2, 3, 3}), uniform({6})}; },
           [](L x) { return conv2d(x[0], x[1], x[2], {2, 1}, Shape{1, 2}, {2, 1}, 2); }, true);
  add_case("conv2d_same_even_kernel", [] { return TensorList{uniform({1, 2, 5, 4}), uniform({3, 2, 2, 4})}; },
           [](L x) { return conv2d(x[0], x[1], Tensor(), {1}, "same"); }, true);
  add_case("conv2d_pointwise_unbatched", [] { return TensorList{uniform({3, 4, 5}), uniform({2, 3, 1, 1})}; },
           [](L x) { return conv2d(x[0], x[1]); }, true);
  add_case("conv1d", [] { return TensorList{uniform({2, 4, 9}), uniform({6, 2, 3}), uniform({6})}; },
           [](L x) { return conv1d(x[0], x[1], x[2], {2}, 1, {2}, 2); }, true);
  add_case("conv1d_valid", [] { return TensorList{uniform({2, 3, 6}), uniform({2, 3, 4})}; },
           [](L x) { return conv1d(x[0], x[1], Tensor(), {1}, "valid"); }, true);
  add_case("pad_constant", [] { return TensorList{uniform({2, 3, 4})}; },
           [](L x) { return pad(x[0], {1, 2, -1, 1}, "constant", 0.5); });
  add_case("pad_reflect", [] { return TensorList{uniform({2, 3, 4})}; },
           [](L x) { return pad(x[0], {2, 1, 1, 2}, "reflect"); });
  add_case("pad_replicate", [] { return TensorList{uniform({2, 3, 4})}; },
           [](L x) { return pad(x[0], {0, 2, 1, 0}, "replicate"); });
  add_case("unflatten", [] { return TensorList{uniform({2, 12})}; },
           [](L x) { return unflatten(x[0], 1, {3, -1}) * 2.0; });

  // ---- softmax ----
  add_case("softmax", [] { return TensorList{uniform({3, 4}, -2, 2)}; }, [](L x) { return softmax(x[0], 1); }, true);
  add_case("softmax_dim0_3d", [] { return TensorList{uniform({3, 2, 2}, -2, 2)}; },
           [](L x) { return softmax(x[0], 0); }, true);
  add_case("log_softmax", [] { return TensorList{uniform({3, 4}, -2, 2)}; },
           [](L x) { return log_softmax(x[0], -1); }, true);
  add_case("log_softmax_dim0", [] { return TensorList{uniform({3, 4}, -2, 2)}; },
           [](L x) { return log_softmax(x[0], 0); }, true);

  // ---- pooling and normalization ----
  add_case("max_pool2d", [] { return TensorList{uniform({2, 3, 5, 5})}; }, [](L x) { return max_pool2d(x[0], {2}); });
  add_case("max_pool2d_pad_dilation_ceil", [] { return TensorList{uniform({1, 2, 7, 6})}; },
           [](L x) { return max_pool2d(x[0], {3, 2}, {2, 1}, {1, 1}, {2, 1}, true); });
  add_case("max_pool2d_unbatched", [] { return TensorList{uniform({2, 5, 5})}; },
           [](L x) { return max_pool2d(x[0], {3}, {2}); });
  add_case("avg_pool2d", [] { return TensorList{uniform({2, 3, 5, 5})}; },
           [](L x) { return avg_pool2d(x[0], {3}, {2}, {1}); });
  add_case("avg_pool2d_exclude_pad_ceil", [] { return TensorList{uniform({1, 2, 6, 5})}; },
           [](L x) { return avg_pool2d(x[0], {3, 2}, {2}, {1}, true, false); });
  add_case("adaptive_avg_pool2d", [] { return TensorList{uniform({2, 3, 7, 5})}; },
           [](L x) { return adaptive_avg_pool2d(x[0], {3, 2}); });
  // Pooling a square: the gradient depends on x, so double backward runs the backward ops' VJPs.
  add_case("max_pool2d_of_square", [] { return TensorList{uniform({1, 2, 4, 4})}; },
           [](L x) { return max_pool2d(x[0] * x[0], {2}, {1}); }, true);
  add_case("avg_pool2d_of_square", [] { return TensorList{uniform({1, 2, 5, 4})}; },
           [](L x) { return avg_pool2d(x[0] * x[0], {3}, {2}, {1}, false, false); }, true);
  add_case("adaptive_avg_pool2d_of_square", [] { return TensorList{uniform({1, 2, 5, 4})}; },
           [](L x) { return adaptive_avg_pool2d(x[0] * x[0], {3, 3}); }, true);
  add_case("batch_norm_train", [] { return TensorList{uniform({4, 3, 2, 2}), uniform({3}), uniform({3})}; },
           [](L x) { return batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true); }, true);
  add_case("batch_norm_train_running_stats", [] { return TensorList{uniform({5, 3})}; },
           [](L x) {
             return batch_norm(x[0], zeros({3}, x[0].options()), ones({3}, x[0].options()), Tensor(),
                               Tensor(), true, 0.2);
           });
  add_case("batch_norm_eval",
           [] { return TensorList{uniform({2, 3, 4}), uniform({3}), positive({3}), uniform({3}), uniform({3})}; },
           [](L x) { return batch_norm(x[0], x[1], x[2], x[3], x[4], false); }, true);
  add_case("layer_norm", [] { return TensorList{uniform({2, 3, 4}), uniform({4}), uniform({4})}; },
           [](L x) { return layer_norm(x[0], {4}, x[1], x[2]); }, true);
  add_case("layer_norm_two_dims_no_affine", [] { return TensorList{uniform({2, 3, 4})}; },
           [](L x) { return layer_norm(x[0], {3, 4}); });
  add_case("add_layer_norm",
           [] { return TensorList{uniform({2, 3, 4}), uniform({2, 3, 4}), uniform({4}), uniform({4})}; },
           [](L x) {
             const AddLayerNormResult r = add_layer_norm(x[0], x[1], {4}, x[2], x[3]);
             return add(r.normed, mul(r.sum, 0.5));
           },
           true);
  add_case("add_layer_norm_normed_only", [] { return TensorList{uniform({3, 8}), uniform({3, 8})}; },
           [](L x) { return add_layer_norm(x[0], x[1], {8}).normed; }, true);
  add_case("group_norm", [] { return TensorList{uniform({2, 4, 3}), uniform({4}), uniform({4})}; },
           [](L x) { return group_norm(x[0], 2, x[1], x[2]); }, true);

  // ---- joining and indexing ----
  add_case("cat", [] { return TensorList{uniform({2, 3}), uniform({1, 3})}; },
           [](L x) { return cat({x[0], x[1]}, 0); });
  add_case("cat_dim1_three", [] { return TensorList{uniform({2, 1}), uniform({2, 3}), uniform({2, 2})}; },
           [](L x) { return cat({x[0], x[1], x[2]}, 1); });
  add_case("stack", [] { return TensorList{uniform({2, 3}), uniform({2, 3})}; },
           [](L x) { return stack({x[0], x[1]}, 0); });
  add_case("stack_last", [] { return TensorList{uniform({2, 3}), uniform({2, 3})}; },
           [](L x) { return stack({x[0], x[1]}, -1); });
  add_case("repeat", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return repeat(x[0], {2, 1, 3}); });
  add_case("index_select", [] { return TensorList{uniform({4, 3}), index({2, 0, 2})}; },
           [](L x) { return index_select(x[0], 0, x[1]); });
  add_case("index_select_dim1", [] { return TensorList{uniform({2, 4}), index({3, 1})}; },
           [](L x) { return index_select(x[0], 1, x[1]); });
  add_case("index_add", [] { return TensorList{uniform({4, 3}), index({1, 3, 1}), uniform({3, 3})}; },
           [](L x) { return index_add(x[0], 0, x[1], x[2]); });
  // Distinct random values: the chosen positions stay put under the finite-difference steps.
  add_case("topk", [] { return TensorList{uniform({3, 5})}; }, [](L x) { return topk(x[0], 2).first; });
  add_case("topk_dim0_smallest", [] { return TensorList{uniform({4, 3})}; },
           [](L x) { return topk(x[0], 3, 0, /*largest=*/false).first; });

  // ---- losses ----
  add_case("mse_loss", [] { return TensorList{uniform({3, 4}), uniform({3, 4})}; },
           [](L x) { return mse_loss(x[0], x[1]); }, true);
  add_case("mse_loss_sum", [] { return TensorList{uniform({3, 4}), uniform({3, 4})}; },
           [](L x) { return mse_loss(x[0], x[1], Reduction::Sum); }, true);
  add_case("mse_loss_none", [] { return TensorList{uniform({3, 4}), uniform({3, 4})}; },
           [](L x) { return mse_loss(x[0], x[1], Reduction::None); }, true);
  add_case("l1_loss", [] {
    Tensor t = uniform({3, 4});
    return TensorList{t + signed_away({3, 4}), t};
  }, [](L x) { return l1_loss(x[0], x[1]); });
  add_case("l1_loss_sum", [] {
    Tensor t = uniform({3, 4});
    return TensorList{t + signed_away({3, 4}), t};
  }, [](L x) { return l1_loss(x[0], x[1], Reduction::Sum); });
  add_case("l1_loss_none", [] {
    Tensor t = uniform({3, 4});
    return TensorList{t + signed_away({3, 4}), t};
  }, [](L x) { return l1_loss(x[0], x[1], Reduction::None); });
  add_case("nll_loss", [] { return TensorList{uniform({3, 4}), index({1, 0, 3})}; },
           [](L x) { return nll_loss(x[0], x[1]); });
  add_case("nll_loss_sum", [] { return TensorList{uniform({3, 4}), index({1, 0, 3})}; },
           [](L x) { return nll_loss(x[0], x[1], Reduction::Sum); });
  add_case("nll_loss_none", [] { return TensorList{uniform({3, 4}), index({2, 2, 3})}; },
           [](L x) { return nll_loss(x[0], x[1], Reduction::None); });
  add_case("nll_loss_single", [] { return TensorList{uniform({4}), scalar_tensor(int64_t{2})}; },
           [](L x) { return nll_loss(x[0], x[1]); });
  add_case("cross_entropy", [] { return TensorList{uniform({3, 4}, -2, 2), index({1, 0, 3})}; },
           [](L x) { return cross_entropy(x[0], x[1]); }, true);
  add_case("cross_entropy_sum", [] { return TensorList{uniform({3, 4}, -2, 2), index({1, 0, 3})}; },
           [](L x) { return cross_entropy(x[0], x[1], Reduction::Sum); }, true);
  add_case("cross_entropy_none", [] { return TensorList{uniform({3, 4}, -2, 2), index({1, 1, 3})}; },
           [](L x) { return cross_entropy(x[0], x[1], Reduction::None); }, true);

  // ---- views ----
  add_case("view", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return view(x[0], {3, 2}); });
  add_case("view_infer", [] { return TensorList{uniform({2, 3, 2})}; }, [](L x) { return view(x[0], {-1, 2}); });
  add_case("reshape", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return reshape(x[0], {6}); });
  add_case("reshape_copy", [] { return TensorList{uniform({2, 3})}; },
           [](L x) { return reshape(t(x[0]), {6}); });
  add_case("flatten", [] { return TensorList{uniform({2, 3, 2})}; }, [](L x) { return flatten(x[0]); });
  add_case("flatten_range", [] { return TensorList{uniform({2, 3, 2})}; }, [](L x) { return flatten(x[0], 1); });
  add_case("slice", [] { return TensorList{uniform({4, 3})}; }, [](L x) { return slice(x[0], 0, 1, 3); });
  add_case("slice_step", [] { return TensorList{uniform({3, 5})}; },
           [](L x) { return slice(x[0], 1, 0, std::nullopt, 2); });
  add_case("slice_negative", [] { return TensorList{uniform({4, 3})}; },
           [](L x) { return slice(x[0], 0, -2, std::nullopt); });
  add_case("narrow", [] { return TensorList{uniform({3, 4})}; }, [](L x) { return narrow(x[0], 1, 1, 2); });
  add_case("select", [] { return TensorList{uniform({3, 4})}; }, [](L x) { return select(x[0], 0, 1); });
  add_case("select_negative", [] { return TensorList{uniform({3, 4})}; }, [](L x) { return select(x[0], 1, -1); });
  add_case("squeeze", [] { return TensorList{uniform({1, 3, 1})}; }, [](L x) { return squeeze(x[0]); });
  add_case("squeeze_dim", [] { return TensorList{uniform({1, 3, 1})}; }, [](L x) { return squeeze(x[0], 2); });
  add_case("unsqueeze", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return unsqueeze(x[0], 1); });
  add_case("expand", [] { return TensorList{uniform({3, 1})}; }, [](L x) { return expand(x[0], {2, 3, 4}); });
  add_case("expand_as", [] { return TensorList{uniform({3}), uniform({2, 3})}; },
           [](L x) { return x[0].expand_as(x[1]) * x[1]; }, true);
  add_case("permute", [] { return TensorList{uniform({2, 3, 4})}; }, [](L x) { return permute(x[0], {2, 0, 1}); });
  add_case("transpose", [] { return TensorList{uniform({2, 3, 4})}; },
           [](L x) { return transpose(x[0], 0, 2); });
  add_case("t", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return t(x[0]); });
  add_case("as_strided", [] { return TensorList{uniform({3, 4})}; },
           [](L x) { return as_strided(x[0], {2, 2}, {4, 2}, 1); });
  c.back().absolute_geometry = true;
  add_case("view_chain", [] { return TensorList{uniform({2, 3, 4})}; },
           [](L x) { return x[0].transpose(0, 1).select(2, 1).unsqueeze(0).expand({2, 3, 2}); });

  // ---- copies and conversions ----
  add_case("clone", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return clone(x[0]); });
  add_case("contiguous", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return contiguous(t(x[0])); });
  add_case("contiguous_noop", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return contiguous(x[0]); });
  c.push_back(OpCase{"to_float32", [] { return TensorList{uniform({2, 3})}; },
                     [](L x) { return x[0].to(kFloat32); }, false, 1e-2, 1e-5});
  c.back().converts_dtype = true;
  add_case("to_float64_noop", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return x[0].to(kFloat64); });
  c.back().converts_dtype = true;
  add_case("copy_", [] { return TensorList{uniform({2, 3}), uniform({3})}; }, [](L x) {
    Tensor y = fresh(x[0]);
    y.copy_(x[1]);
    return y * x[0];
  }, true);
  add_case("copy_into_slice", [] { return TensorList{uniform({3, 3}), uniform({3})}; }, [](L x) {
    Tensor y = fresh(x[0]);
    y.select(0, 1).copy_(x[1]);
    return y;
  });

  // ---- in-place variants on non-leaves ----
  add_case("add_", [] { return TensorList{uniform({2, 3}), uniform({3})}; }, [](L x) {
    Tensor y = fresh(x[0]);
    return y.add_(x[1], 0.5);
  });
  add_case("add_scalar_", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return fresh(x[0]).add_(2.0); });
  add_case("sub_", [] { return TensorList{uniform({2, 3}), uniform({2, 3})}; }, [](L x) {
    Tensor y = fresh(x[0]);
    return y.sub_(x[1]);
  });
  add_case("sub_scalar_", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return fresh(x[0]).sub_(2.0); });
  add_case("mul_", [] { return TensorList{uniform({2, 3}), uniform({3})}; }, [](L x) {
    Tensor y = fresh(x[0]);
    return y.mul_(x[1]);
  }, true);
  add_case("mul_scalar_", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return fresh(x[0]).mul_(-3.0); });
  add_case("div_", [] { return TensorList{uniform({2, 3}), positive({2, 3})}; }, [](L x) {
    Tensor y = fresh(x[0]);
    return y.div_(x[1]);
  }, true);
  add_case("div_scalar_", [] { return TensorList{uniform({2, 3})}; }, [](L x) { return fresh(x[0]).div_(4.0); });
  add_case("trunc_", [] { return TensorList{uniform({2, 3}, -2.9, 2.9)}; },
           [](L x) { return fresh(x[0]).trunc_() * x[0]; });
  add_case("clamp_", [] { return TensorList{uniform({3, 4})}; },
           [](L x) { return fresh(x[0]).clamp_(-0.5, 0.5); });
  add_case("fill_", [] { return TensorList{uniform({3, 4})}; }, [](L x) {
    Tensor y = fresh(x[0]);
    y.narrow(1, 1, 2).fill_(2.0);
    return y * x[0];
  }, true);
  add_case("zero_", [] { return TensorList{uniform({3, 4})}; }, [](L x) {
    Tensor y = fresh(x[0]);
    y.select(0, 2).zero_();
    return y * x[0];
  }, true);
  add_case("operator_compound", [] { return TensorList{uniform({2, 3}), positive({3})}; }, [](L x) {
    Tensor y = fresh(x[0]);
    y += x[1];
    y *= x[1];
    y -= 1.0;
    y /= x[1];
    return y;
  }, true);
  add_case("mul_on_view", [] { return TensorList{uniform({3, 4}), uniform({4})}; }, [](L x) {
    Tensor y = fresh(x[0]);
    y.select(0, 1).mul_(x[1]);
    return y;
  }, true);
  add_case("add_on_transposed_view", [] { return TensorList{uniform({3, 4}), uniform({4, 3})}; }, [](L x) {
    Tensor y = fresh(x[0]);
    y.t().add_(x[1]);
    return y * y;
  }, true);
  add_case("div_on_strided_view", [] { return TensorList{uniform({2, 6}), positive({2, 3})}; }, [](L x) {
    Tensor y = fresh(x[0]);
    y.slice(1, 0, std::nullopt, 2).div_(x[1]);
    return y;
  }, true);
  add_sequence_cases(add_case);
  return c;
}

}  // namespace tg::testing
