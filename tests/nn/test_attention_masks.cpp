// MultiheadAttention and TransformerEncoderLayer masks with PyTorch's module semantics (bool true =
// not attended, float added), key_padding_mask, returned weights, unbatched input, and the float
// mask of scaled_dot_product_attention under autocast. Expected numbers come from PyTorch 1.13 with
// the same parameters, set by pattern() in both.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "graphs/capture/fake.h"
#include "graphs/capture/joint.h"
#include "graphs/partition/partition.h"
#include "graphs/testing/parity.h"
#include "nn/transformer/attention.h"
#include "nn/transformer/transformer.h"
#include "support/test_support.h"
#include "support/values.h"

namespace tg {
namespace {

using testing::expect_close;
using testing::expect_values;
using testing::pattern;
using testing::random_tensor;

// Copies pattern(shape, first_seed + i) into the module's i-th parameter (named_parameters order).
void set_parameters(nn::Module& m, int first_seed = 1) {
  NoGradGuard no_grad;
  int seed = first_seed;
  for (auto& [name, p] : m.named_parameters()) {
    Tensor t = p;
    t.copy_(pattern(p.sizes(), seed++, p.dtype()));
  }
}

Tensor bools(const std::vector<int>& v, const Shape& sizes) {
  std::vector<double> d(v.begin(), v.end());
  return from_vector(d, sizes).to(kBool);
}

// E = 4, H = 2, L = 3, S = 4, N = 2: q = pattern([3, 2, 4], 5), k = pattern([4, 2, 4], 6),
// v = pattern([4, 2, 4], 7); m = nn.MultiheadAttention(4, 2, dtype=torch.float64) with
// in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias = pattern(..., 1..4).
struct Fixture {
  std::shared_ptr<nn::MultiheadAttention> mha;
  Tensor q = pattern({3, 2, 4}, 5), k = pattern({4, 2, 4}, 6), v = pattern({4, 2, 4}, 7);
  // am = [[F, T, F, F], [F, F, T, T], [T, F, F, F]]; kpm = [[F, F, F, T], [T, F, F, F]]
  Tensor am = bools({0, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0}, {3, 4});
  Tensor kpm = bools({0, 0, 0, 1, 1, 0, 0, 0}, {2, 4});
  explicit Fixture(bool batch_first = false) {
    mha = std::make_shared<nn::MultiheadAttention>(4, 2, 0.0, true, batch_first, TensorOptions{.dtype = kFloat64});
    set_parameters(*mha);
  }
};

// out, w = m(q, k, v, key_padding_mask=kpm, attn_mask=am)
const std::vector<double> kBoolOut = {
    -1.327880354166344,  1.2201389887805962, 1.202131890289841,    -0.9818887476178917, -1.0662331631473685,
    1.0942858072964374,  1.0214348938059965, -0.7667796562670584,  -1.2406327887381186, 1.0919947184139338,
    0.031750579267576184, -0.8221542921039084, -1.6520000000000001, 1.221,               0.3200000000000001,
    -1.142,              -0.7671840195134682, 0.685166936348688,   0.7375231335296495,  -0.467492011365804,
    -1.2432836242597831, 1.170442737810443,   0.631322647038444,   -0.8797365104451662};
const std::vector<double> kBoolWeights = {
    0.34641575755189863, 0.0, 0.6535842424481013, 0.0, 0.5647728970991014, 0.4352271029008986, 0.0, 0.0,
    0.0, 0.5095407367394673, 0.4904592632605327, 0.0, 0.0, 0.0, 0.36852914898513134, 0.6314708510148687,
    0.0, 1.0, 0.0, 0.0, 0.0, 0.30875276281625885, 0.3280432723055089, 0.36320396487823225};
// m(q, k, v, key_padding_mask=kpm, attn_mask=am, average_attn_weights=False)[1]
const std::vector<double> kBoolHeadWeights = {
    0.3161036205844268,  0.0, 0.6838963794155731,  0.0, 0.4727327576006934,  0.5272672423993066,  0.0, 0.0,
    0.0, 0.6200290303565482, 0.37997096964345173, 0.0, 0.37672789451937044, 0.0, 0.6232721054806296,  0.0,
    0.6568130365975094,  0.34318696340249066, 0.0, 0.0, 0.0, 0.39905244312238647, 0.6009475568776136, 0.0,
    0.0, 0.0, 0.2908545402117015, 0.7091454597882986, 0.0, 1.0, 0.0, 0.0,
    0.0, 0.2741953706063619, 0.29330943971197593, 0.43249518968166206, 0.0, 0.0, 0.44620375775856125,
    0.5537962422414388, 0.0, 1.0, 0.0, 0.0, 0.0, 0.34331015502615586, 0.36277710489904186, 0.2939127400748024};

TEST(MultiheadAttentionMasks, BoolMasksAreTrueForMaskedOut) {
  Fixture f;
  const nn::MultiheadAttentionOutput r = f.mha->forward(f.q, f.k, f.v, {.key_padding_mask = f.kpm, .attn_mask = f.am});
  EXPECT_EQ(r.output.sizes(), (Shape{3, 2, 4}));
  EXPECT_EQ(r.attn_weights.sizes(), (Shape{2, 3, 4}));
  expect_values(r.output, kBoolOut, 1e-12);
  expect_values(r.attn_weights, kBoolWeights, 1e-12);
  const nn::MultiheadAttentionOutput h =
      f.mha->forward(f.q, f.k, f.v, {.key_padding_mask = f.kpm, .attn_mask = f.am, .average_attn_weights = false});
  EXPECT_EQ(h.attn_weights.sizes(), (Shape{2, 2, 3, 4}));
  expect_values(h.attn_weights, kBoolHeadWeights, 1e-12);
  // Without weights: scaled_dot_product_attention with the same masks, and no weights returned.
  const nn::MultiheadAttentionOutput fast =
      f.mha->forward(f.q, f.k, f.v, {.key_padding_mask = f.kpm, .need_weights = false, .attn_mask = f.am});
  EXPECT_FALSE(fast.attn_weights.defined());
  expect_values(fast.output, kBoolOut, 1e-12);
  expect_values(f.mha->attend(f.q, f.k, f.v, f.am, false, f.kpm), kBoolOut, 1e-12);
}

TEST(MultiheadAttentionMasks, FloatMasksAreAdded) {
  Fixture f;
  // PyTorch 2 adds a float key_padding_mask to a float attn_mask; 1.13 was given the sum:
  //   fam = pattern([4, 3, 4], 8); fkpm = pattern([2, 4], 9)
  //   merged = fam + fkpm.view(2, 1, 1, 4).expand(-1, 2, -1, -1).reshape(4, 1, 4)
  //   out, w = m(q, k, v, attn_mask=merged)
  const Tensor fam = pattern({4, 3, 4}, 8), fkpm = pattern({2, 4}, 9);
  const nn::MultiheadAttentionOutput r = f.mha->forward(f.q, f.k, f.v, {.key_padding_mask = fkpm, .attn_mask = fam});
  expect_values(r.output,
                {-1.216859722036316, 1.138182965199191, 1.2523539038482596, -0.891729222267424, -1.3454037158326595,
                 1.4231535493157164, 0.5635496540797997, -0.9927241888863827, -1.571333167162956, 1.4366287311153592,
                 0.5544563649103399, -1.1529974822406002, -1.2284442885237394, 0.9581421095826189, 1.0845960381577242,
                 -0.831582860783352, -1.1548503696593906, 0.9441263767173489, 0.46959471876675396, -0.7628364886683348,
                 -1.4660432889125512, 1.2849464744052104, 0.7364229526409323, -1.0561793535149975},
                1e-12);
  expect_values(r.attn_weights,
                {0.12408553875220335, 0.08412018168499097, 0.7024781425885533, 0.08931613697425236,
                 0.5922167651228765, 0.06328114991960368, 0.25690140514817517, 0.08760067980934472,
                 0.29696818738804576, 0.32612746197127185, 0.23337207108958655, 0.1435322795510958,
                 0.2376955522108286, 0.21055480475785882, 0.2204602944797192, 0.3312893485515934,
                 0.29497932689645945, 0.20795144367948282, 0.0806901413851128, 0.4163790880389451,
                 0.12250765231113689, 0.49022893809839835, 0.07049169311133185, 0.3167717164791329},
                1e-12);
  expect_close(f.mha->attend(f.q, f.k, f.v, fam, false, fkpm), r.output, 1e-12, 1e-12);
  // A bool mask and a float mask mix: -inf where the bool one is true, then the sum.
  const Tensor fkpm_as_float = masked_fill(zeros({2, 4}, {.dtype = kFloat64}), f.kpm, -INFINITY);
  expect_close(f.mha->attend(f.q, f.k, f.v, fam, false, f.kpm), f.mha->attend(f.q, f.k, f.v, fam, false, fkpm_as_float),
               1e-12, 1e-12);
}

TEST(MultiheadAttentionMasks, UnbatchedAndBatchFirst) {
  Fixture f;
  // m(q[:, 0], k[:, 0], v[:, 0], key_padding_mask=kpm[0], attn_mask=am, average_attn_weights=False)
  const nn::MultiheadAttentionOutput u =
      f.mha->forward(f.q.select(1, 0), f.k.select(1, 0), f.v.select(1, 0),
                     {.key_padding_mask = f.kpm.select(0, 0), .attn_mask = f.am, .average_attn_weights = false});
  EXPECT_EQ(u.output.sizes(), (Shape{3, 4}));
  EXPECT_EQ(u.attn_weights.sizes(), (Shape{2, 3, 4}));
  expect_values(u.output,
                {-1.327880354166344, 1.2201389887805962, 1.202131890289841, -0.9818887476178917, -1.2406327887381186,
                 1.0919947184139338, 0.031750579267576184, -0.8221542921039084, -0.7671840195134682, 0.685166936348688,
                 0.7375231335296495, -0.467492011365804},
                1e-12);
  expect_values(u.attn_weights, std::vector<double>(kBoolHeadWeights.begin(), kBoolHeadWeights.begin() + 24), 1e-12);
  // batch_first reads [N, L, E]; a 3-D mask is [N*H, L, S] either way.
  Fixture bf(true);
  const Tensor am3 = f.am.unsqueeze(0).expand({4, 3, 4}).contiguous();
  const nn::MultiheadAttentionOutput r =
      bf.mha->forward(transpose(f.q, 0, 1), transpose(f.k, 0, 1), transpose(f.v, 0, 1),
                      {.key_padding_mask = f.kpm, .attn_mask = am3});
  expect_values(transpose(r.output, 0, 1).contiguous(), kBoolOut, 1e-12);
  expect_values(r.attn_weights, kBoolWeights, 1e-12);
}

TEST(MultiheadAttentionMasks, IsCausal) {
  Fixture f;
  const Tensor q = pattern({4, 2, 4}, 5);
  // triu(ones(4, 4), 1) as bool: the module's causal mask.
  const Tensor causal = bools({0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0}, {4, 4});
  const nn::MultiheadAttentionOutput want =
      f.mha->forward(q, f.k, f.v, {.key_padding_mask = f.kpm, .attn_mask = causal});
  // The hint alone applies the causal mask, with or without weights or a key_padding_mask.
  const nn::MultiheadAttentionOutput got = f.mha->forward(q, f.k, f.v, {.key_padding_mask = f.kpm, .is_causal = true});
  expect_close(got.output, want.output, 1e-12, 1e-12);
  expect_close(got.attn_weights, want.attn_weights, 1e-12, 1e-12);
  expect_close(f.mha->attend(q, f.k, f.v, Tensor(), true), f.mha->attend(q, f.k, f.v, causal), 1e-12, 1e-12);
  // With a mask the hint defers to it. Query 0 of batch 1 sees no key (its one causal key is
  // padded): the weights path's softmax gives NaN there, as PyTorch's does, while attend() runs
  // SDPA, whose safe softmax (PyTorch 2.5+) gives it no attention at all, so no NaN.
  const Tensor sdpa = f.mha->attend(q, f.k, f.v, causal, true, f.kpm);
  const Tensor unseen = ne(want.output, want.output);
  EXPECT_GT(unseen.sum().item<int64_t>(), 0);
  EXPECT_EQ(ne(sdpa, sdpa).sum().item<int64_t>(), 0);
  expect_close(masked_fill(sdpa, unseen, 0.0), masked_fill(want.output, unseen, 0.0), 1e-12, 1e-12);
}

// The number of `name` nodes in the forward and backward graphs of fn over fake CPU inputs.
int traced_ops(const graphs::GraphFn& fn, const TensorList& args, std::string_view name) {
  const graphs::Partition p = graphs::partition(graphs::trace_joint(fn, args), graphs::PartitionerKind::Default);
  int n = 0;
  for (const graphs::Graph* g : {&p.forward, &p.backward})
    for (const graphs::GraphNode& node : g->nodes) n += node.op->name() == name;
  return n;
}

// A causal mask alone cannot empty a row (every query sees the first key), so SDPA takes the plain
// softmax and its graphs hold no safe-softmax maximum; a given mask (never beside is_causal, as in
// PyTorch) can, and keeps it.
TEST(ScaledDotProductAttention, CausalWithoutAMaskSkipsTheSafeSoftmax) {
  const auto fake = [](const Shape& s) { return graphs::fake_tensor(s, kFloat32, kCPU, true); };
  const TensorList qkv{fake({2, 3, 5, 4}), fake({2, 3, 6, 4}), fake({2, 3, 6, 4})};
  const auto causal = [](const TensorList& x) {
    return TensorList{scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, true)};
  };
  EXPECT_EQ(traced_ops(causal, qkv, "amax"), 0);
  const auto masked = [](const TensorList& x) {
    const Tensor mask = ne(ones({5, 6}, {.dtype = kInt64}), 0);
    return TensorList{scaled_dot_product_attention(x[0], x[1], x[2], mask)};
  };
  EXPECT_EQ(traced_ops(masked, qkv, "amax"), 1);
  // More queries than keys: the last queries still see the first key.
  const Tensor q = random_tensor({1, 1, 4, 2}, kFloat64), k = random_tensor({1, 1, 2, 2}, kFloat64);
  const Tensor out = scaled_dot_product_attention(q, k, k, Tensor(), 0.0, true);
  EXPECT_EQ(ne(out, out).sum().item<int64_t>(), 0);
  expect_close(out.narrow(2, 2, 2), scaled_dot_product_attention(q.narrow(2, 2, 2), k, k), 1e-12, 1e-12);
}

TEST(MultiheadAttentionMasks, BadMasks) {
  Fixture f;
  EXPECT_THROW_MSG(f.mha->attend(f.q, f.k, f.v, bools({0, 0, 0}, {1, 3})),
                   "expected attn_mask of shape [3, 4] or [4, 3, 4], got [1, 3]");
  EXPECT_THROW_MSG(f.mha->attend(f.q, f.k, f.v, Tensor(), false, bools({0, 0, 0, 0}, {4})),
                   "expected key_padding_mask of shape [2, 4], got [4]");
  EXPECT_THROW_MSG(f.mha->attend(f.q, f.k, f.v, zeros({3, 4}, {.dtype = kInt64})),
                   "expected attn_mask to be bool or float64 (the query's dtype), got int64");
  EXPECT_THROW_MSG(f.mha->attend(f.q, f.k, f.v, Tensor(), false, zeros({2, 4}, {.dtype = kFloat32})),
                   "expected key_padding_mask to be bool or float64 (the query's dtype), got float32");
  EXPECT_THROW_MSG(f.mha->attend(f.q, f.k.select(1, 0), f.v), "for a 3-D query, expected 3-D key and value");
}

TEST(MultiheadAttentionMasks, EmptyQuery) {
  Fixture f;
  const Tensor q = zeros({0, 2, 4}, {.dtype = kFloat64});
  const nn::MultiheadAttentionOutput r =
      f.mha->forward(q, f.k, f.v, {.key_padding_mask = f.kpm, .attn_mask = zeros({0, 4}, {.dtype = kBool})});
  EXPECT_EQ(r.output.sizes(), (Shape{0, 2, 4}));
  EXPECT_EQ(r.attn_weights.sizes(), (Shape{2, 0, 4}));
  EXPECT_EQ(f.mha->attend(q, f.k, f.v, Tensor(), false, f.kpm).sizes(), (Shape{0, 2, 4}));
}

TEST(MultiheadAttentionMasks, Gradients) {
  Fixture f;
  const Tensor kpm = f.kpm;
  auto mha = f.mha;
  // Output and per-head weights of the composed path, and the output of the fused one, as one vector.
  testing::expect_gradcheck(
      [mha, kpm](const TensorList& in) {
        const nn::MultiheadAttentionOutput r = mha->forward(
            in[0], in[1], in[2], {.key_padding_mask = kpm, .attn_mask = in[3], .average_attn_weights = false});
        const Tensor fast = mha->attend(in[0], in[1], in[2], in[3], false, kpm);
        return cat({r.output.reshape({-1}), r.attn_weights.reshape({-1}), fast.reshape({-1})});
      },
      {random_tensor({3, 2, 4}, kFloat64, true), random_tensor({4, 2, 4}, kFloat64, true),
       random_tensor({4, 2, 4}, kFloat64, true), random_tensor({4, 3, 4}, kFloat64, true)});
}

TEST(MultiheadAttentionMasks, CompiledMatchesEager) {
  Fixture f;
  auto mha = f.mha;
  const Tensor kpm = f.kpm, am = f.am;
  testing::expect_compiled_matches_eager(
      [mha, kpm, am](const TensorList& in) {
        const nn::MultiheadAttentionOutput r =
            mha->forward(in[0], in[1], in[2], {.key_padding_mask = kpm, .attn_mask = am});
        return TensorList{r.output, r.attn_weights, mha->attend(in[0], in[1], in[2], am, false, kpm)};
      },
      {random_tensor({3, 2, 4}, kFloat64, true), random_tensor({4, 2, 4}, kFloat64, true),
       random_tensor({4, 2, 4}, kFloat64, true)},
      {.compile = {.backend = "aot_eager"}});
}

// layer = nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0, norm_first=nf,
// dtype=torch.float64), parameters pattern(..., 1..12) in named_parameters order, eval();
// src = pattern([4, 2, 4], 20); out = layer(src, src_mask=sm, src_key_padding_mask=kpm)
TEST(TransformerEncoderLayerMasks, MatchPyTorch) {
  const std::vector<std::vector<double>> want = {
      {-0.3812151957356449, -0.27088072644676336, -1.1477194505641468, 0.2310051880933369, -0.39634148919353573,
       -0.37389145050630346, -1.1544132812426655, 0.23211129674054545, -0.35740428372800864, -0.06758079991714164,
       -1.1389861563150594, 0.20733793153825036, -0.38810196915468226, -0.32242280867817963, -1.1692498933185511,
       0.21996807688612982, -0.40953790731671436, -0.4524075154888011, -1.1633703811468508, 0.22506224993411944,
       -0.38623955746812, -0.30780411295272364, -1.1553131643655743, 0.2286985107978211, -0.384405622910124,
       -0.29586591329743483, -1.1609106367478637, 0.2240331103574478, -0.39822066704378956, -0.3847100663924922,
       -1.1496970982192276, 0.23542020840045672},
      {-1.937378399951739, 1.38523812817889, 0.2635265982264793, -0.39336320623095006, -0.8150299277685582,
       0.7096680239935906, 1.2028514396273737, -1.1841520987331076, -1.6370765671005831, 0.12853168652699545,
       1.256296560519334, -0.23951531645649338, -2.1759090529804346, 1.245847582162704, 0.13038133487509884,
       -0.6157441227834451, -0.9983413350005509, 0.5213670543027701, 1.978565229018709, -1.6228921670743468,
       -1.5956281413515165, 1.7774037435833188, 0.6486188862612037, -0.046667853597724296, -2.3028000253150163,
       1.1630394842278224, 0.6049316151136205, -0.8444064958469445, -1.0487001297364862, 0.47803659898158385,
       0.9977893928510941, -1.411392806471393}};
  // sm = [[F, T, F, F], [F, F, T, T], [T, F, F, F], [F, F, F, F]]; kpm = [[F, F, F, T], [T, F, F, F]]
  const Tensor sm = bools({0, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, {4, 4});
  const Tensor kpm = bools({0, 0, 0, 1, 1, 0, 0, 0}, {2, 4});
  for (bool norm_first : {false, true}) {
    SCOPED_TRACE(norm_first ? "norm_first" : "post-norm");
    nn::TransformerEncoderLayer layer(4, 2, {.dim_feedforward = 6, .dropout = 0.0, .norm_first = norm_first},
                                      {.dtype = kFloat64});
    std::vector<std::string> names;
    for (const auto& [name, p] : layer.named_parameters()) names.push_back(name);
    ASSERT_EQ(names, (std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias",
                                               "self_attn.out_proj.weight", "self_attn.out_proj.bias", "linear1.weight",
                                               "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight",
                                               "norm1.bias", "norm2.weight", "norm2.bias"}));
    set_parameters(layer);
    layer.eval();
    expect_values(layer.encode(pattern({4, 2, 4}, 20), sm, kpm), want[norm_first ? 1 : 0], 1e-12);
  }
}

// Autocast puts scaled_dot_product_attention on the low-precision list: every floating argument,
// the additive mask too, is cast, so SDPA equals SDPA on inputs cast by hand (exactly on the CPU;
// CUDA's autocast also runs the softmax in float32).
void check_sdpa_autocast(Device device) {
  manual_seed(3);
  const Tensor q = random_tensor({2, 2, 3, 8}, kFloat32).to(device);
  const Tensor k = random_tensor({2, 2, 5, 8}, kFloat32).to(device);
  const Tensor v = random_tensor({2, 2, 5, 8}, kFloat32).to(device);
  const Tensor mask = random_tensor({3, 5}, kFloat32).to(device);
  Tensor got;
  {
    AutocastGuard amp(device, kBFloat16);
    got = scaled_dot_product_attention(q, k, v, mask);
  }
  EXPECT_EQ(got.dtype(), kBFloat16);
  const Tensor want = scaled_dot_product_attention(q.to(kBFloat16), k.to(kBFloat16), v.to(kBFloat16),
                                                   mask.to(kBFloat16));
  const double tol = device.is_cuda() ? 2e-2 : 0.0;
  expect_close(got, want, tol, tol);
  // Outside autocast a float32 mask with bfloat16 q/k/v is still an error.
  EXPECT_THROW_MSG(scaled_dot_product_attention(q.to(kBFloat16), k.to(kBFloat16), v.to(kBFloat16), mask),
                   "expected a bool attn_mask or one of the query's dtype (bfloat16), got float32");
  // The module, with and without weights, float masks of the input's dtype.
  nn::MultiheadAttention mha(8, 2, 0.0, true, false, {.device = device});
  const Tensor x = random_tensor({3, 2, 8}, kFloat32).to(device);
  const Tensor kpm = random_tensor({2, 3}, kFloat32).to(device);
  const Tensor am = random_tensor({3, 3}, kFloat32).to(device);
  const Tensor ref = mha.attend(x, x, x, am, false, kpm);
  AutocastGuard amp(device, kBFloat16);
  const Tensor fast = mha.attend(x, x, x, am, false, kpm);
  const nn::MultiheadAttentionOutput composed = mha.forward(x, x, x, {.key_padding_mask = kpm, .attn_mask = am});
  EXPECT_EQ(fast.dtype(), kBFloat16);
  expect_close(fast.to(kFloat32), ref, 0.05, 0.05);
  expect_close(composed.output.to(kFloat32), ref, 0.05, 0.05);
}

TEST(AttentionAutocast, FloatMaskIsCastOnCpu) { check_sdpa_autocast(kCPU); }

TEST(AttentionAutocast, FloatMaskIsCastOnCuda) {
  TG_REQUIRE_CUDA();
  check_sdpa_autocast(cuda_device());
}

TEST(MultiheadAttentionMasks, CudaMatchesCpu) {
  TG_REQUIRE_CUDA();
  Fixture f;
  auto cpu = f.mha;
  Fixture g;
  g.mha->to(cuda_device());
  auto gpu = g.mha;
  const Tensor kpm = f.kpm, am = f.am;
  auto run = [kpm, am](nn::MultiheadAttention& m, const TensorList& in) {
    const Device d = in[0].device();
    const nn::MultiheadAttentionOutput r = m.forward(in[0], in[1], in[2],
                                                     {.key_padding_mask = kpm.to(d), .attn_mask = in[3]});
    return cat({r.output.reshape({-1}), r.attn_weights.reshape({-1}),
                m.attend(in[0], in[1], in[2], in[3], false, kpm.to(d)).reshape({-1})});
  };
  const TensorList in{f.q, f.k, f.v, pattern({4, 3, 4}, 8)};
  TensorList in_gpu;
  for (const Tensor& t : in) in_gpu.push_back(t.to(cuda_device()));
  expect_close(run(*gpu, in_gpu), run(*cpu, in), 1e-10, 1e-12);
}

}  // namespace
}  // namespace tg
