// TransformerDecoderLayer, TransformerEncoder and TransformerDecoder against PyTorch 1.13 values
// with masks (bool true = not attended), parameters set by pattern() in both; cloned layers, gradients
// and compiled parity.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "graphs/testing/parity.h"
#include "nn/transformer/transformer.h"
#include "support/test_support.h"
#include "support/values.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::expect_values;
using testing::random_tensor;

// ((i * 7 + seed * 13) % 17 - 8) / 10 in row-major order; the Python side is
//   torch.tensor([((i * 7 + seed * 13) % 17 - 8) / 10 for i in range(n)], dtype=torch.float64)
Tensor pattern(const Shape& sizes, int seed) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>((i * 7 + seed * 13) % 17 - 8) / 10;
  return from_vector(v, sizes);
}

// for i, (name, p) in enumerate(m.named_parameters()): p.copy_(pattern(p.shape, i + 1))
void set_parameters(nn::Module& m) {
  NoGradGuard no_grad;
  int seed = 1;
  for (auto& [name, p] : m.named_parameters()) {
    Tensor t = p;
    t.copy_(pattern(p.sizes(), seed++));
  }
}

Tensor bools(const std::vector<int>& v, const Shape& sizes) {
  std::vector<double> d(v.begin(), v.end());
  return from_vector(d, sizes).to(kBool);
}

// tgt = pattern((3, 2, 4), 21); mem = pattern((4, 2, 4), 22);
// tm = [[F, T, T], [F, F, T], [F, F, F]]; mm = [[F, T, F, F], [F, F, T, T], [T, F, F, F]]
// tkpm = [[F, F, T], [F, F, F]]; mkpm = [[F, F, F, T], [T, F, F, F]]
struct DecoderInputs {
  Tensor tgt = pattern({3, 2, 4}, 21), mem = pattern({4, 2, 4}, 22);
  nn::TransformerDecoderMasks masks{.tgt_mask = bools({0, 1, 1, 0, 0, 1, 0, 0, 0}, {3, 3}),
                                    .memory_mask = bools({0, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0}, {3, 4}),
                                    .tgt_key_padding_mask = bools({0, 0, 1, 0, 0, 0}, {2, 3}),
                                    .memory_key_padding_mask = bools({0, 0, 0, 1, 1, 0, 0, 0}, {2, 4})};
};

// layer = nn.TransformerDecoderLayer(4, 2, dim_feedforward=6, dropout=0.0, norm_first=nf,
// dtype=torch.float64), parameters set, eval(); layer(tgt, mem, tgt_mask=tm, memory_mask=mm,
// tgt_key_padding_mask=tkpm, memory_key_padding_mask=mkpm)
TEST(TransformerDecoderLayerModule, MatchesPyTorch) {
  const std::vector<std::vector<double>> want = {
      {0.8937583680180767, -0.6038001736072004, -0.6387501429266141, -1.1408452515313128, 0.949739100563088,
       -0.6300243008048746, -0.5779898145505473, -1.0234322234290771, 0.838356473602408, -0.586466958230579,
       -0.6644029745930489, -1.199579053607587, 0.8253223008432167, -0.5872577503728745, -0.6702839841149182,
       -1.193819471673389, 0.9323654537090483, -0.6140604672786496, -0.6131535855030641, -1.1020432480753017,
       0.8905705949134876, -0.6003792836364896, -0.6415507708410233, -1.154802010138134},
      {-2.319204390433545, 0.9803932583982806, 0.6215421681740433, -1.4403883685458185, -2.1560694265800158,
       0.865253627057637, 1.0371665956329048, -1.3349831885079722, -1.9842290967220402, 0.7050178607963602,
       -0.13821395601618136, -1.3198508409471978, -2.2421352861993498, 0.4856706208840509, 1.5087252978677401,
       -1.2810763120128623, -1.9197652897577013, 0.28713797007915987, -0.14542333149526165, -1.1403582244579904,
       -2.3602281889123184, 0.9877036529413101, -0.148489242413549, -1.7186006682855466}};
  const DecoderInputs in;
  for (bool norm_first : {false, true}) {
    SCOPED_TRACE(norm_first ? "norm_first" : "post-norm");
    nn::TransformerDecoderLayer layer(4, 2, {.dim_feedforward = 6, .dropout = 0.0, .norm_first = norm_first},
                                      {.dtype = kFloat64});
    std::vector<std::string> names;
    for (const auto& [name, m] : layer.named_children()) names.push_back(name);
    EXPECT_EQ(names, (std::vector<std::string>{"self_attn", "multihead_attn", "linear1", "dropout", "linear2", "norm1",
                                               "norm2", "norm3", "dropout1", "dropout2", "dropout3"}));
    set_parameters(layer);
    layer.eval();
    expect_values(layer.decode(in.tgt, in.mem, in.masks), want[norm_first ? 1 : 0], 1e-12);
    EXPECT_THROW_MSG(layer(in.tgt), "needs memory");
  }
}

// Both stacks: 2 clones of the layer above (parameters set, then layers[1].linear1.weight *= 0.5 so
// the clones differ), final LayerNorm(4) with weight pattern((4,), 30), bias pattern((4,), 31).
// enc = nn.TransformerEncoder(layer, 2, norm=..., enable_nested_tensor=False); src = pattern((4, 2, 4), 20)
// enc(src, mask=sm, src_key_padding_mask=mkpm); dec(tgt, mem, tgt_mask=tm, memory_mask=mm, ...)
template <typename Stack>
void prepare_stack(Stack& stack) {
  NoGradGuard no_grad;
  Tensor w = stack.parameter("norm.weight"), b = stack.parameter("norm.bias");
  Tensor l1 = stack.parameter("layers.1.linear1.weight");
  w.copy_(pattern({4}, 30));
  b.copy_(pattern({4}, 31));
  l1.copy_(l1 * 0.5);
  stack.eval();
}

TEST(TransformerStacks, EncoderMatchesPyTorch) {
  nn::TransformerEncoderLayer layer(4, 2, {.dim_feedforward = 6, .dropout = 0.0}, {.dtype = kFloat64});
  set_parameters(layer);
  nn::TransformerEncoder enc(layer, 2, std::make_shared<nn::LayerNorm>(Shape{4}, 1e-5, true, true,
                                                                       TensorOptions{.dtype = kFloat64}));
  EXPECT_EQ(enc.named_parameters().size(), 26u);
  EXPECT_EQ(enc.named_parameters()[0].first, "layers.0.self_attn.in_proj_weight");
  // The clones start equal to the layer and are separate tensors.
  expect_close(enc.parameter("layers.1.linear2.weight"), layer.parameter("linear2.weight"), 0, 0);
  EXPECT_FALSE(enc.parameter("layers.1.linear2.weight").is_same(enc.parameter("layers.0.linear2.weight")));
  prepare_stack(enc);
  const Tensor sm = bools({0, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, {4, 4});
  const Tensor kpm = bools({0, 0, 0, 1, 1, 0, 0, 0}, {2, 4});
  expect_values(enc.encode(pattern({4, 2, 4}, 20), sm, kpm),
                {0.5564290270732873, -0.5998118819424728, -0.6506701891477149, 0.14662765762927188, 0.5575689712432584,
                 -0.6035157944508699, -0.6552157639156866, 0.15205432923852535, 0.5443320311030091, -0.5987886597370717,
                 -0.6464456211781785, 0.14073354760388201, 0.555079718760323, -0.6012661191152863, -0.6520231862766535,
                 0.14806693573676444, 0.5533754114502843, -0.6083085776618089, -0.6595781025302676, 0.15705297378068284,
                 0.555940731289289, -0.6012485390136798, -0.6522154613456241, 0.1483688432443815, 0.5520502042916151,
                 -0.6024770283576679, -0.6526688143989852, 0.14855513417744404, 0.5569575274206447, -0.6045912414043784,
                 -0.6562872464047015, 0.15328931174414784},
                1e-12);
}

TEST(TransformerStacks, DecoderMatchesPyTorch) {
  nn::TransformerDecoderLayer layer(4, 2, {.dim_feedforward = 6, .dropout = 0.0}, {.dtype = kFloat64});
  set_parameters(layer);
  nn::TransformerDecoder dec(layer, 2, std::make_shared<nn::LayerNorm>(Shape{4}, 1e-5, true, true,
                                                                       TensorOptions{.dtype = kFloat64}));
  prepare_stack(dec);
  const DecoderInputs in;
  expect_values(dec.decode(in.tgt, in.mem, in.masks),
                {1.7122509478804997, -0.5620941501548874, -0.09649638045761422, 1.3288958373549167, 1.7271041757498928,
                 -0.5518733711840825, -0.10273266972613854, 1.306390868077751, 1.690449437907311, -0.5760567020859492,
                 -0.09011125192652411, 1.3565614019804186, 1.6820422135731699, -0.5800458074823616, -0.08444789529185931,
                 1.3669430068972757, 1.725534047300967, -0.5528011900954658, -0.10138981193186375, 1.309071942869905,
                 1.7108149462365243, -0.5638420777731504, -0.09860111018286138, 1.3302634256478425},
                1e-12);
  EXPECT_THROW_MSG(nn::TransformerDecoder(layer, 0), "num_layers must be positive, got 0");
}

TEST(TransformerStacks, CausalMaskGradientsAndCompiledParity) {
  // generate_square_subsequent_mask(3): -inf above the diagonal; is_causal without a mask equals it.
  expect_values(nn::generate_square_subsequent_mask(3, {.dtype = kFloat64}),
                {0, -INFINITY, -INFINITY, 0, 0, -INFINITY, 0, 0, 0});
  manual_seed(4);
  auto layer = std::make_shared<nn::TransformerDecoderLayer>(
      8, 2, nn::TransformerDecoderLayerOptions{.dim_feedforward = 16, .dropout = 0.0, .batch_first = true},
      TensorOptions{.dtype = kFloat64});
  const Tensor tgt = random_tensor({2, 3, 8}), mem = random_tensor({2, 5, 8});
  const Tensor causal = nn::generate_square_subsequent_mask(3, {.dtype = kFloat64});
  expect_close(layer->decode(tgt, mem, {.tgt_is_causal = true}), layer->decode(tgt, mem, {.tgt_mask = causal}), 1e-12,
               1e-12);
  const Tensor mkpm = bools({0, 0, 0, 0, 1, 1, 0, 0, 0, 0}, {2, 5});
  testing::expect_gradcheck(
      [layer, mkpm](const TensorList& in) {
        return layer->decode(in[0], in[1], {.memory_key_padding_mask = mkpm, .tgt_is_causal = true});
      },
      {random_tensor({2, 3, 8}, kFloat64, true), random_tensor({2, 5, 8}, kFloat64, true)});
  testing::expect_compiled_matches_eager(
      [layer, mkpm](const TensorList& in) {
        return TensorList{layer->decode(in[0], in[1], {.memory_key_padding_mask = mkpm, .tgt_is_causal = true})};
      },
      {random_tensor({2, 3, 8}, kFloat64, true), random_tensor({2, 5, 8}, kFloat64, true)},
      {.compile = {.backend = "aot_eager"}});
}

}  // namespace
}  // namespace tg
