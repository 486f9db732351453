// Op-table entries for the sequence-model ops (splits, gather/scatter, masks, embedding, attention,
// recurrent layers); all_op_cases() appends them so every op suite covers them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace tg::testing::cases {

// Adds the sequence ops' cases through `add_case(name, inputs, fn, twice)`.
template <typename AddCase>
void add_sequence_cases(AddCase&& add_case) {
  using L = const TensorList&;
  auto u = [](const Shape& s) { return random_tensor(s, kFloat64, false, -1.0, 1.0); };
  auto idx = [](std::vector<int64_t> v, const Shape& s) { return from_vector(v, s); };
  // ---- splits (views; each case recombines the pieces with distinct weights) ----
  add_case("split_with_sizes", [u] { return TensorList{u({6, 3})}; }, [](L x) {
    TensorList p = split_with_sizes(x[0], {1, 3, 2}, 0);
    return cat({p[0] * 2.0, p[1], p[2] * -1.0}, 0);
  }, false);
  add_case("split_dim1", [u] { return TensorList{u({2, 5})}; }, [](L x) {
    TensorList p = split(x[0], 2, 1);
    return cat({p[2] * 3.0, p[0], p[1] * 0.5}, 1);
  }, false);
  add_case("chunk", [u] { return TensorList{u({7, 2})}; }, [](L x) {
    TensorList p = chunk(x[0], 3, 0);
    return cat({p[1], p[2] * 2.0, p[0] * p[0]}, 0);
  }, true);
  add_case("unbind", [u] { return TensorList{u({3, 4})}; }, [](L x) {
    TensorList p = unbind(x[0], 1);
    return p[0] * p[1] + p[2] - p[3] * 2.0;
  }, true);
  // ---- gather / scatter_add ----
  add_case("gather_dim1", [u, idx] { return TensorList{u({3, 4}), idx({0, 3, 3, 1, 2, 0}, {3, 2})}; },
           [](L x) { return gather(x[0], 1, x[1]); }, false);
  add_case("gather_dim0_3d", [u, idx] { return TensorList{u({3, 2, 2}), idx({2, 0, 1, 1, 0, 2, 2, 2}, {2, 2, 2})}; },
           [](L x) { return gather(x[0], 0, x[1]); }, false);
  add_case("scatter_add_dim1",
           [u, idx] { return TensorList{u({3, 4}), idx({0, 3, 3, 1, 2, 0}, {3, 2}), u({3, 3})}; },
           [](L x) { return scatter_add(x[0], 1, x[1], x[2]); }, false);
  // ---- masks ----
  add_case("tril", [u] { return TensorList{u({2, 3, 4})}; }, [](L x) { return tril(x[0]); }, false);
  add_case("triu_diag1", [u] { return TensorList{u({4, 3})}; }, [](L x) { return triu(x[0], 1); }, false);
  add_case("masked_fill", [u] { return TensorList{u({3, 4}), ne(from_vector(std::vector<int64_t>{1, 0, 0, 1}, {4}), 0)}; },
           [](L x) { return masked_fill(x[0], x[1], 2.5); }, false);
  // ---- embedding ----
  add_case("embedding", [u, idx] { return TensorList{u({5, 3}), idx({4, 0, 4, 2, 1, 1}, {2, 3})}; },
           [](L x) { return embedding(x[0], x[1]); }, false);
  add_case("embedding_padding_idx", [u, idx] { return TensorList{u({5, 3}), idx({3, 0, 3, 2, 1, 1}, {2, 3})}; },
           [](L x) { return embedding(x[0], x[1], 4); }, false);
  // ---- attention ----
  add_case("sdpa", [u] { return TensorList{u({2, 3, 4}), u({2, 5, 4}), u({2, 5, 2})}; },
           [](L x) { return scaled_dot_product_attention(x[0], x[1], x[2]); }, true);
  add_case("sdpa_causal", [u] { return TensorList{u({1, 2, 4, 3}), u({1, 2, 4, 3}), u({1, 2, 4, 3})}; },
           [](L x) { return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, true); }, true);
  add_case("sdpa_float_mask", [u] { return TensorList{u({3, 2}), u({4, 2}), u({4, 3}), u({3, 4})}; },
           [](L x) { return scaled_dot_product_attention(x[0], x[1], x[2], x[3]); }, true);
  // ---- recurrent layers: [T=3, B=2, I=3], H=2 ----
  add_case("lstm_layer",
           [u] { return TensorList{u({3, 2, 3}), u({2, 2}), u({2, 2}), u({8, 3}), u({8, 2}), u({8}), u({8})}; },
           [](L x) {
             RnnLayerResult r = lstm_layer(x[0], x[1], x[2], x[3], x[4], x[5], x[6]);
             return cat({r.output.reshape({-1}), r.c.reshape({-1})});
           }, false);
  add_case("lstm_layer_reverse",
           [u] { return TensorList{u({3, 2, 3}), u({2, 2}), u({2, 2}), u({8, 3}), u({8, 2}), u({8}), u({8})}; },
           [](L x) {
             RnnLayerResult r = lstm_layer(x[0], x[1], x[2], x[3], x[4], x[5], x[6], true);
             return cat({r.output.reshape({-1}), r.c.reshape({-1})});
           }, false);
  add_case("gru_layer", [u] { return TensorList{u({3, 2, 3}), u({2, 2}), u({6, 3}), u({6, 2}), u({6}), u({6})}; },
           [](L x) { return gru_layer(x[0], x[1], x[2], x[3], x[4], x[5]).output; }, false);
  add_case("gru_layer_reverse",
           [u] { return TensorList{u({3, 2, 3}), u({2, 2}), u({6, 3}), u({6, 2}), u({6}), u({6})}; },
           [](L x) { return gru_layer(x[0], x[1], x[2], x[3], x[4], x[5], true).output; }, false);
  // ---- stacked recurrent op (rnn / rnn_backward): [T=3, B=2, I=3], H=2 ----
  add_case("rnn_lstm_bidirectional",
           [u] {
             return TensorList{u({3, 2, 3}), u({2, 2, 2}), u({2, 2, 2}), u({8, 3}), u({8, 2}), u({8}), u({8}),
                               u({8, 3}),    u({8, 2}),    u({8}),       u({8})};
           },
           [](L x) {
             const RnnResult r = rnn(RnnMode::LSTM, x[0], x[1], x[2], TensorList(x.begin() + 3, x.end()), 1, true);
             return cat({r.output.reshape({-1}), r.h.reshape({-1}), r.c.reshape({-1})});
           }, false);
  add_case("rnn_gru_two_layers",
           [u] {
             return TensorList{u({3, 2, 3}), u({2, 2, 2}), u({6, 3}), u({6, 2}), u({6}), u({6}),
                               u({6, 2}),    u({6, 2}),    u({6}),    u({6})};
           },
           [](L x) {
             const RnnResult r = rnn(RnnMode::GRU, x[0], x[1], Tensor(), TensorList(x.begin() + 2, x.end()), 2, false);
             return cat({r.output.reshape({-1}), r.h.reshape({-1})});
           }, false);
}

}  // namespace tg::testing::cases
