// resnet_tiny as the anchors define it (pt_models.py): conv3x3(3->32)+BN+ReLU; two basic blocks at
// 32; a basic block 32->64 with stride 2 and a 1x1 conv+BN shortcut; one basic block at 64; global
// average pool; Linear(64, 10). Shared by the single-GPU and data-parallel benchmarks.
#pragma once

#include <memory>

#include "tapegraph.h"

namespace bench {

namespace resnet_detail {
using tg::Shape;
using tg::Tensor;
namespace nn = tg::nn;

inline std::shared_ptr<nn::Conv2d> conv(int64_t cin, int64_t cout, int64_t k, int64_t stride, int64_t padding) {
  return std::make_shared<nn::Conv2d>(cin, cout, Shape{k}, Shape{stride}, tg::ConvPadding(padding), Shape{1}, 1,
                                      /*bias=*/false);
}

// relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), the shortcut a 1x1 conv + BN when the shape changes.
class Block : public nn::Module {
 public:
  Block(int64_t cin, int64_t cout, int64_t stride) {
    c1_ = register_module("c1", conv(cin, cout, 3, stride, 1));
    b1_ = register_module("b1", std::make_shared<nn::BatchNorm2d>(cout));
    c2_ = register_module("c2", conv(cout, cout, 3, 1, 1));
    b2_ = register_module("b2", std::make_shared<nn::BatchNorm2d>(cout));
    if (stride != 1 || cin != cout) {
      sc_ = register_module("short_conv", conv(cin, cout, 1, stride, 0));
      sb_ = register_module("short_bn", std::make_shared<nn::BatchNorm2d>(cout));
    }
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = (*b1_)((*c1_)(x)).relu();
    y = (*b2_)((*c2_)(y));
    return (y + (sc_ ? (*sb_)((*sc_)(x)) : x)).relu();
  }
  std::string type_name() const override { return "Block"; }

 private:
  std::shared_ptr<nn::Conv2d> c1_, c2_, sc_;
  std::shared_ptr<nn::BatchNorm2d> b1_, b2_, sb_;
};

}  // namespace resnet_detail

// A freshly initialized resnet_tiny (seed it first for reproducible weights).
inline std::shared_ptr<tg::nn::Sequential> resnet_tiny() {
  using namespace resnet_detail;
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(conv(3, 32, 3, 1, 1));
  m->push_back(std::make_shared<nn::BatchNorm2d>(32));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<Block>(32, 32, 1));
  m->push_back(std::make_shared<Block>(32, 32, 1));
  m->push_back(std::make_shared<Block>(32, 64, 2));
  m->push_back(std::make_shared<Block>(64, 64, 1));
  m->push_back(std::make_shared<nn::AdaptiveAvgPool2d>(Shape{1}));
  m->push_back(std::make_shared<nn::Flatten>());
  m->push_back(std::make_shared<nn::Linear>(64, 10));
  return m;
}

}  // namespace bench
