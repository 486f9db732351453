// Seed: test_eager_sequence_nr with the seed's own model: Conv2d(16, 16, 1x1, stride 1, padding
// "same", bias), BatchNorm2d(16), ReLU, the residual add, flatten, Linear(1638400, 1), L1Loss, on x of
// 100x16x32x32 that requires grad, and grad(..., create_graph=true) inside the compiled function.
// Every backward op of the joint graph carries the sequence number of its forward op. Runs with
// aot_eager on the CPU and with cudagraphs on a GPU.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "graphs/compile.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;

class SeedModel : public nn::Module {
 public:
  explicit SeedModel(Device device) {
    TensorOptions o{.device = device};
    conv1_ = register_module("conv1", std::make_shared<nn::Conv2d>(16, 16, Shape{1, 1}, Shape{1}, ConvPadding("same"),
                                                                    Shape{1}, 1, true, o));
    bn1_ = register_module("bn1", std::make_shared<nn::BatchNorm2d>(16));
    relu1_ = register_module("relu1", std::make_shared<nn::ReLU>());
    fc1_ = register_module("fc1", std::make_shared<nn::Linear>(1638400, 1, true, o));
    to(device);
  }
  Tensor forward(const Tensor&) override { TG_FAIL("[SeedModel] call loss(x, target)"); }
  Tensor loss(const Tensor& input, const Tensor& target) {
    const Tensor& y = input;
    Tensor x = (*conv1_)(input);
    x = (*bn1_)(x);
    x = (*relu1_)(x);
    x = x + y;
    x = flatten(x);
    x = (*fc1_)(x);
    return l1_loss(x, target);
  }
  std::string type_name() const override { return "SeedModel"; }

 private:
  std::shared_ptr<nn::Conv2d> conv1_;
  std::shared_ptr<nn::BatchNorm2d> bn1_;
  std::shared_ptr<nn::ReLU> relu1_;
  std::shared_ptr<nn::Linear> fc1_;
};

// Runs the seed on `device` with `backend`: compiled gx equals eager gx, and each dedicated backward
// op (conv2d_backward_input, batch norm's backward, ...) carries its forward op's sequence number.
void run_seed(Device device, const std::string& backend) {
  manual_seed(0);
  auto eager_mod = std::make_shared<SeedModel>(device);
  manual_seed(0);
  auto compiled_mod = std::make_shared<SeedModel>(device);
  Tensor grad_output = scalar_tensor(1.0f, {.device = device});
  grad_output.requires_grad_(true);
  auto grad_with_create_graph = [grad_output](SeedModel& mod, const Tensor& x, const Tensor& target) {
    Tensor y = mod.loss(x, target);
    return grad({y}, {x}, {grad_output}, {}, /*create_graph=*/true)[0];
  };
  Tensor x = rand({100, 16, 32, 32}, {.device = device}).requires_grad_(true);
  Tensor target = rand({1}, {.device = device});
  auto compiled = compile([&, m = compiled_mod](const Tensor& xs, const Tensor& t) {
    return grad_with_create_graph(*m, xs, t);
  }, CompileOptions{.backend = backend});
  for (int i = 0; i < 3; ++i) {  // warm-up, recording and replay under cudagraphs
    Tensor expected = grad_with_create_graph(*eager_mod, x, target);
    Tensor got = compiled(x, target);
    expect_close(got, expected, 1e-4, 1e-6);
  }
  const auto eb = eager_mod->named_buffers(), cb = compiled_mod->named_buffers();
  ASSERT_EQ(eb.size(), cb.size());
  for (size_t i = 0; i < eb.size(); ++i) expect_close(cb[i].second, eb[i].second, 1e-5, 1e-6);

  const graphs::Graph& g = compiled.last_joint()->graph;
  std::map<int64_t, std::string> first_op;  // sequence number -> the forward op that took it
  std::set<int64_t> reused;
  int backward_ops = 0, conv_backward_ops = 0;
  for (const auto& n : g.nodes) {
    if (n.sequence_nr < 0) continue;
    const std::string name(n.op->name());
    if (!first_op.emplace(n.sequence_nr, name).second) reused.insert(n.sequence_nr);
    if (name.find("_backward") == std::string::npos) continue;
    ++backward_ops;
    // The number a backward op carries was first taken by a forward op (relu's threshold_backward
    // by relu); the convolution's gradient ops by conv2d itself.
    EXPECT_EQ(first_op[n.sequence_nr].find("backward"), std::string::npos)
        << name << " carries seq " << n.sequence_nr << " of " << first_op[n.sequence_nr];
    if (name.rfind("conv2d_backward", 0) == 0) {
      EXPECT_EQ(first_op[n.sequence_nr], "conv2d") << name << " carries seq " << n.sequence_nr;
      ++conv_backward_ops;
    }
  }
  EXPECT_GE(conv_backward_ops, 1) << g.to_text();  // conv2d_backward_input at least
  EXPECT_GE(backward_ops, 2) << g.to_text();
  // conv, batch norm, relu, add, flatten, linear, l1 loss: each forward op's number is reused by its backward.
  EXPECT_GE(reused.size(), 6u) << g.to_text();
  for (int64_t s : reused) EXPECT_EQ(first_op[s].find("backward"), std::string::npos) << "seq " << s;
}

TEST(SequenceNrSeed, test_eager_sequence_nr_aot_eager) { run_seed(kCPU, "aot_eager"); }

TEST(SequenceNrSeed, test_eager_sequence_nr_cudagraphs) {
  TG_REQUIRE_CUDA();
  run_seed(cuda_device(0), "cudagraphs");
}

}  // namespace
}  // namespace tg
