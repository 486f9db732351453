// TransformerEncoderLayer: submodule names, wiring (post-norm and pre-norm) against the same
// submodules composed by hand, gradients to every parameter, and compiled parity.
#include <gtest/gtest.h>

#include "graphs/testing/parity.h"
#include "nn/transformer/transformer.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::random_tensor;

TEST(TransformerEncoderLayerModule, WiringMatchesTheComposition) {
  manual_seed(8);
  for (bool norm_first : {false, true}) {
    SCOPED_TRACE(norm_first ? "norm_first" : "post-norm");
    nn::TransformerEncoderLayer layer(8, 2, {.dim_feedforward = 16, .norm_first = norm_first}, {.dtype = kFloat64});
    layer.eval();
    std::vector<std::string> names;
    for (const auto& [name, m] : layer.named_children()) names.push_back(name);
    EXPECT_EQ(names, (std::vector<std::string>{"self_attn", "linear1", "dropout", "linear2", "norm1", "norm2",
                                               "dropout1", "dropout2"}));
    Tensor x = random_tensor({5, 3, 8});
    auto child = [&](const std::string& n) -> std::shared_ptr<nn::Module> {
      for (const auto& [name, m] : layer.named_children())
        if (name == n) return m;
      return nullptr;
    };
    auto attn = std::dynamic_pointer_cast<nn::MultiheadAttention>(child("self_attn"));
    auto ff = [&](const Tensor& h) { return (*child("linear2"))(relu((*child("linear1"))(h))); };
    Tensor expected;
    if (norm_first) {
      Tensor h = (*child("norm1"))(x);
      Tensor a = x + attn->attend(h, h, h);
      expected = a + ff((*child("norm2"))(a));
    } else {
      Tensor a = (*child("norm1"))(x + attn->attend(x, x, x));
      expected = (*child("norm2"))(a + ff(a));
    }
    expect_close(layer(x), expected, 1e-12, 1e-12);
  }
}

TEST(TransformerEncoderLayerModule, GradientsAndCompiledParity) {
  manual_seed(9);
  auto layer = std::make_shared<nn::TransformerEncoderLayer>(
      8, 2, nn::TransformerEncoderLayerOptions{.dim_feedforward = 16, .activation = "gelu", .batch_first = true},
      TensorOptions{.dtype = kFloat64});
  layer->eval();
  Tensor x = random_tensor({2, 4, 8}, kFloat64, true);
  layer->encode(x, Tensor(), Tensor(), true).sum().backward();
  for (const auto& [name, p] : layer->named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
  testing::expect_compiled_matches_eager(
      [layer](const TensorList& in) { return TensorList{layer->encode(in[0], Tensor(), Tensor(), true)}; },
      {random_tensor({2, 4, 8}, kFloat64, true)}, {.compile = {.backend = "aot_eager"}});
  EXPECT_THROW_MSG(nn::TransformerEncoderLayer(8, 2, {.activation = "tanh"}), "activation should be relu/gelu, not tanh");
}

}  // namespace
}  // namespace tg
