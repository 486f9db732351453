// The models train_digits can train on the 8x8 digits (64 features per sample): the MLP, or a small
// CNN that reads each sample as a 1x8x8 image.
#pragma once

#include <memory>
#include <string>

#include "nn/nn.h"

namespace digits {

// "mlp": 64-128-10 with ReLU. "cnn": two conv3x3-BatchNorm-ReLU blocks (16 and 32 channels), a 2x2
// max pool, then Linear(32*4*4, 10). Both take [N, 64] and return [N, 10] logits.
inline std::shared_ptr<tg::nn::Sequential> make_model(const std::string& name, int64_t features, int64_t classes) {
  namespace nn = tg::nn;
  auto m = std::make_shared<nn::Sequential>();
  if (name == "mlp") {
    m->push_back(std::make_shared<nn::Linear>(features, 128));
    m->push_back(std::make_shared<nn::ReLU>());
    m->push_back(std::make_shared<nn::Linear>(128, classes));
    return m;
  }
  TG_CHECK(name == "cnn", "[train_digits] unknown --model \"", name, "\": expected mlp or cnn");
  TG_CHECK(features == 64, "[train_digits] the cnn reads 8x8 images (64 features), got ", features);
  m->push_back(std::make_shared<nn::Unflatten>(1, tg::Shape{1, 8, 8}));
  m->push_back(std::make_shared<nn::Conv2d>(1, 16, tg::Shape{3}, tg::Shape{1}, tg::ConvPadding(1)));
  m->push_back(std::make_shared<nn::BatchNorm2d>(16));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Conv2d>(16, 32, tg::Shape{3}, tg::Shape{1}, tg::ConvPadding(1)));
  m->push_back(std::make_shared<nn::BatchNorm2d>(32));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::MaxPool2d>(tg::Shape{2}));
  m->push_back(std::make_shared<nn::Flatten>());
  m->push_back(std::make_shared<nn::Linear>(32 * 4 * 4, classes));
  return m;
}

}  // namespace digits
