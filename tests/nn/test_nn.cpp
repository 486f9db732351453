// Modules: registration and dotted names, Linear shapes and init, Sequential, modes, devices.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "nn/nn.h"
#include "optim/optim.h"
#include "ops/random/random.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;

// A module with one parameter, one buffer and one child, as a user would write it.
class Block : public nn::Module {
 public:
  Block() {
    scale = register_parameter("scale", ones({4}));
    running = register_buffer("running", zeros({4}));
    fc = register_module("fc", std::make_shared<nn::Linear>(4, 2));
  }
  Tensor forward(const Tensor& x) override { return fc->forward(x * scale); }
  std::string type_name() const override { return "Block"; }

  Tensor scale;
  Tensor running;
  std::shared_ptr<nn::Linear> fc;
};

std::vector<std::string> names(const std::vector<nn::NamedTensor>& named) {
  std::vector<std::string> out;
  for (const auto& [n, _] : named) out.push_back(n);
  return out;
}

TEST(Module, NamedParametersAreRecursiveAndDotted) {
  Block b;
  EXPECT_EQ(names(b.named_parameters()), (std::vector<std::string>{"scale", "fc.weight", "fc.bias"}));
  EXPECT_EQ(names(b.named_parameters(false)), (std::vector<std::string>{"scale"}));
  EXPECT_EQ(names(b.named_buffers()), (std::vector<std::string>{"running"}));
  EXPECT_EQ(b.parameters().size(), 3u);
  for (const Tensor& p : b.parameters()) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
  }
  EXPECT_FALSE(b.running.requires_grad());
  // Handles are shared: the registry, the member and the accessor are one tensor.
  EXPECT_TRUE(b.parameters()[0].is_same(b.scale));
  EXPECT_TRUE(b.parameter("fc.weight").is_same(b.fc->weight()));
  EXPECT_THROW_MSG(b.parameter("fc.nope"), "has no parameter or buffer \"nope\"");
}

TEST(Module, NestedSequentialNames) {
  auto inner = std::make_shared<nn::Sequential>(
      std::initializer_list<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(2, 3)});
  nn::Sequential outer{inner, std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(3, 1, false)};
  EXPECT_EQ(names(outer.named_parameters()), (std::vector<std::string>{"0.0.weight", "0.0.bias", "2.weight"}));
  std::vector<std::string> modules;
  for (const auto& [n, _] : outer.named_modules()) modules.push_back(n);
  EXPECT_EQ(modules, (std::vector<std::string>{"", "0", "0.0", "1", "2"}));
}

TEST(Module, RejectsBadNames) {
  Block b;
  EXPECT_THROW_MSG(b.register_parameter("scale", ones({1})), "\"scale\" is already registered");
  EXPECT_THROW_MSG(b.register_buffer("fc", ones({1})), "\"fc\" is already registered");
  EXPECT_THROW_MSG(b.register_parameter("a.b", ones({1})), "must not contain \".\"");
  EXPECT_THROW_MSG(b.register_parameter("", ones({1})), "cannot be empty");
  EXPECT_THROW_MSG(b.register_parameter("idx", zeros({2}, {.dtype = kInt64})), "must have a floating dtype");
}

TEST(Module, ParameterFromComputationBecomesLeaf) {
  Block b;
  Tensor w = ones({2}, {.requires_grad = true});
  Tensor p = b.register_parameter("derived", w * 2);
  EXPECT_TRUE(p.is_leaf());
  EXPECT_TRUE(p.requires_grad());
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{2, 2}));
}

TEST(Module, TrainEvalPropagates) {
  Block b;
  EXPECT_TRUE(b.is_training());
  EXPECT_TRUE(b.fc->is_training());
  b.eval();
  EXPECT_FALSE(b.is_training());
  EXPECT_FALSE(b.fc->is_training());
  b.train();
  EXPECT_TRUE(b.fc->is_training());
}

TEST(Module, ZeroGrad) {
  Block b;
  b(ones({3, 4})).sum().backward();
  for (const Tensor& p : b.parameters()) ASSERT_TRUE(p.grad().defined());
  b.zero_grad(/*set_to_none=*/false);
  for (const Tensor& p : b.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    expect_close(p.grad(), zeros_like(p));
  }
  b.zero_grad();
  for (const Tensor& p : b.parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(Module, PrintsLikePyTorch) {
  nn::Sequential m{std::make_shared<nn::Linear>(64, 128), std::make_shared<nn::ReLU>(),
                   std::make_shared<nn::Linear>(128, 10, false)};
  EXPECT_EQ(m.to_string(),
            "Sequential(\n"
            "  (0): Linear(in_features=64, out_features=128, bias=true)\n"
            "  (1): ReLU()\n"
            "  (2): Linear(in_features=128, out_features=10, bias=false)\n"
            ")");
}

TEST(Linear, ShapesAndFormula) {
  nn::Linear fc(3, 4);
  EXPECT_EQ(fc.weight().sizes(), (Shape{4, 3}));
  EXPECT_EQ(fc.bias().sizes(), (Shape{4}));
  const Tensor x = randn({5, 3});
  expect_close(fc(x), matmul(x, fc.weight().t()) + fc.bias(), 1e-5, 1e-6);
  EXPECT_EQ(fc(randn({2, 5, 3})).sizes(), (Shape{2, 5, 4}));
  EXPECT_EQ(fc(randn({3})).sizes(), (Shape{4}));
  EXPECT_THROW_MSG(fc(randn({5, 2})), "expected input with last dim 3 (in_features), got shape [5, 2]");

  nn::Linear no_bias(3, 4, false);
  EXPECT_FALSE(no_bias.bias().defined());
  EXPECT_EQ(names(no_bias.named_parameters()), (std::vector<std::string>{"weight"}));
  expect_close(no_bias(x), matmul(x, no_bias.weight().t()), 1e-5, 1e-6);
}

TEST(Linear, Float64Options) {
  nn::Linear fc(2, 2, true, {.dtype = kFloat64});
  EXPECT_EQ(fc.weight().dtype(), kFloat64);
  EXPECT_EQ(fc.bias().dtype(), kFloat64);
  EXPECT_THROW_MSG(nn::Linear(2, 2, true, {.dtype = kInt64}), "need a floating dtype");
  EXPECT_THROW_MSG(nn::Linear(0, 2), "must be positive");
}

// PyTorch's default: kaiming_uniform(a=sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the
// weight, and the bias uses the same bound.
TEST(Linear, InitBoundsMatchPyTorch) {
  manual_seed(3);
  nn::Linear fc(100, 200);
  const double bound = 1.0 / std::sqrt(100.0);
  for (const Tensor* t : {&fc.weight(), &fc.bias()}) {
    const std::vector<double> v = t->to_vector<double>();
    double lo = 1, hi = -1, sq = 0;
    for (double e : v) {
      lo = std::min(lo, e);
      hi = std::max(hi, e);
      sq += e * e;
    }
    EXPECT_GE(lo, -bound);
    EXPECT_LE(hi, bound);
    // Uniform on the whole interval, not a narrower one.
    EXPECT_LT(lo, -0.9 * bound);
    EXPECT_GT(hi, 0.9 * bound);
    if (v.size() > 1000) EXPECT_NEAR(std::sqrt(sq / static_cast<double>(v.size())), bound / std::sqrt(3.0), 0.05 * bound);
  }
}

TEST(Linear, InitIsReproducibleFromSeed) {
  manual_seed(11);
  nn::Linear a(5, 7);
  manual_seed(11);
  nn::Linear b(5, 7);
  nn::Linear c(5, 7);
  expect_close(a.weight(), b.weight(), 0, 0);
  expect_close(a.bias(), b.bias(), 0, 0);
  EXPECT_NE(b.weight().to_vector<float>(), c.weight().to_vector<float>());
}

TEST(Init, FansAndBounds) {
  Tensor conv = empty({4, 3, 2, 2});
  EXPECT_EQ(nn::init::fan_in_and_fan_out(conv), (std::pair<int64_t, int64_t>{12, 16}));
  EXPECT_THROW_MSG(nn::init::fan_in_and_fan_out(empty({5})), "at least 2 dims");

  Tensor w = empty({30, 50});
  nn::init::xavier_uniform_(w);
  const double xb = std::sqrt(6.0 / 80.0);
  EXPECT_LE(w.abs().amax().item<float>(), xb);
  EXPECT_GT(w.abs().amax().item<float>(), 0.9 * xb);

  nn::init::kaiming_uniform_(w, 0.0);
  const double kb = std::sqrt(2.0) * std::sqrt(3.0 / 50.0);
  EXPECT_LE(w.abs().amax().item<float>(), kb);
  EXPECT_GT(w.abs().amax().item<float>(), 0.9 * kb);

  nn::init::zeros_(w);
  EXPECT_EQ(w.abs().amax().item<float>(), 0.0f);
  nn::init::normal_(w, 5.0, 0.0);
  expect_close(w, full({30, 50}, 5.0));
}

// True when a and b have the same sizes, dtype and bytes.
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel()) * dtype_size(x.dtype())) == 0;
}

TEST(Init, DrawsInPlaceTheValuesOfADrawScaledAndCopiedIn) {
  // normal_ and uniform_ write into the tensor itself; the values are those of the draw, scaled and
  // shifted, then copied in (what they computed before), on contiguous and strided targets.
  for (DType dtype : {kFloat32, kFloat64, kFloat16}) {
    for (bool strided : {false, true}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << (strided ? " strided" : " contiguous"));
      const Shape sizes{300, 457};  // above the threaded fills' threshold, and odd
      manual_seed(21);
      Tensor expected_normal = randn(sizes, {.dtype = dtype}).mul_(0.02).add_(0.5);
      Tensor expected_uniform = rand(sizes, {.dtype = dtype}).mul_(0.75 - -0.25).add_(-0.25);
      const uint64_t offset = Generator::global().offset();
      manual_seed(21);
      Tensor t = strided ? empty({457, 300}, {.dtype = dtype}).t() : empty(sizes, {.dtype = dtype});
      Tensor u = strided ? empty({457, 300}, {.dtype = dtype}).t() : empty(sizes, {.dtype = dtype});
      nn::init::normal_(t, 0.5, 0.02);
      nn::init::uniform_(u, -0.25, 0.75);
      EXPECT_TRUE(same_bits(t, expected_normal));
      EXPECT_TRUE(same_bits(u, expected_uniform));
      EXPECT_EQ(Generator::global().offset(), offset);
    }
  }
}

TEST(Init, SkipDrawsGuardOnlyAdvancesTheGenerator) {
  manual_seed(6);
  Tensor a = zeros({10, 30});
  nn::init::kaiming_uniform_(a);
  nn::init::normal_(a);
  const Tensor next = rand({5});
  manual_seed(6);
  Tensor b = zeros({10, 30});
  {
    nn::init::SkipDrawsGuard skip;
    EXPECT_TRUE(nn::init::skipping_draws());
    {
      nn::init::SkipDrawsGuard nested;
      nn::init::kaiming_uniform_(b);
    }
    EXPECT_TRUE(nn::init::skipping_draws());  // the outer guard still holds
    nn::init::normal_(b);
  }
  EXPECT_FALSE(nn::init::skipping_draws());
  EXPECT_EQ(b.abs().amax().item<float>(), 0.0f);  // left as it was
  EXPECT_TRUE(same_bits(rand({5}), next));         // the same draws follow
}

TEST(Activation, ModulesMatchFunctions) {
  const Tensor x = randn({4, 5});
  expect_close(nn::ReLU()(x), relu(x));
  expect_close(nn::GELU()(x), gelu(x));
  expect_close(nn::GELU("tanh")(x), gelu(x, "tanh"));
  expect_close(nn::Tanh()(x), tanh(x));
  EXPECT_THROW_MSG(nn::GELU("fast"), "approximate must be \"none\" or \"tanh\"");
  EXPECT_EQ(nn::GELU("tanh").to_string(), "GELU(approximate='tanh')");
}

TEST(Sequential, ChainsAndIndexes) {
  auto l1 = std::make_shared<nn::Linear>(3, 5);
  auto l2 = std::make_shared<nn::Linear>(5, 2);
  nn::Sequential seq{l1, std::make_shared<nn::ReLU>(), l2};
  EXPECT_EQ(seq.size(), 3u);
  EXPECT_EQ(&seq[0], l1.get());
  EXPECT_EQ(&seq[-1], l2.get());
  EXPECT_THROW_MSG(seq[3], "index 3 is out of range for a Sequential of 3 modules");
  EXPECT_EQ(names(seq.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  const Tensor x = randn({6, 3});
  expect_close(seq(x), (*l2)(relu((*l1)(x))));
  seq.push_back(std::make_shared<nn::Tanh>());
  EXPECT_EQ(seq.size(), 4u);
  expect_close(seq(x), tanh((*l2)(relu((*l1)(x)))));
}

TEST(Module, ToSameDeviceKeepsStorage) {
  nn::Linear fc(2, 3);
  const void* before = fc.weight().raw_data();
  fc.to(kCPU);
  EXPECT_EQ(fc.weight().raw_data(), before);
}

// Moving a module keeps the handles the optimizer holds, so its steps reach the moved parameters.
TEST(ModuleCuda, ToDeviceKeepsOptimizerReferences) {
  TG_REQUIRE_CUDA();
  manual_seed(5);
  auto make = [] {
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 1)});
  };
  auto gpu = make();
  auto cpu = make();
  for (size_t i = 0; i < cpu->parameters().size(); ++i) {
    NoGradGuard ng;
    Tensor p = cpu->parameters()[i];
    p.copy_(gpu->parameters()[i]);
  }
  optim::SGD opt_gpu(gpu->parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD opt_cpu(cpu->parameters(), {.lr = 0.1, .momentum = 0.9});
  const TensorList handles = gpu->parameters();
  gpu->to(cuda_device(0));
  for (size_t i = 0; i < handles.size(); ++i) {
    EXPECT_TRUE(handles[i].is_same(gpu->parameters()[i]));
    EXPECT_TRUE(handles[i].is_same(opt_gpu.params()[i]));
    EXPECT_TRUE(handles[i].is_cuda());
    EXPECT_TRUE(handles[i].requires_grad());
  }
  const Tensor x = randn({16, 4}), y = randn({16, 1});
  for (int step = 0; step < 3; ++step) {
    opt_gpu.zero_grad();
    mse_loss((*gpu)(x.cuda()), y.cuda()).backward();
    opt_gpu.step();
    opt_cpu.zero_grad();
    mse_loss((*cpu)(x), y).backward();
    opt_cpu.step();
  }
  for (size_t i = 0; i < handles.size(); ++i) expect_close(handles[i], cpu->parameters()[i], 1e-4, 1e-5);
  // And back: gradients and optimizer state follow.
  gpu->to(kCPU);
  EXPECT_TRUE(handles[0].is_cpu());
  EXPECT_TRUE(handles[0].grad().is_cpu());
  opt_gpu.step();
  opt_cpu.step();
  for (size_t i = 0; i < handles.size(); ++i) expect_close(handles[i], cpu->parameters()[i], 1e-4, 1e-5);
}

}  // namespace
}  // namespace tg
