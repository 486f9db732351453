// Linear: y = x W^T + b, initialized as torch.nn.Linear is.
#pragma once

#include "nn/module.h"

namespace tg::nn {

// A fully connected layer with weight [out_features, in_features] and optional bias [out_features].
// Init follows PyTorch: weight ~ kaiming_uniform(a = sqrt(5)), bias ~ U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, TensorOptions options = {});

  // Accepts [*, in_features] and returns [*, out_features].
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  Tensor& weight() { return weight_; }
  // Undefined when built with bias = false.
  Tensor& bias() { return bias_; }

 private:
  int64_t in_features_;
  int64_t out_features_;
  Tensor weight_;
  Tensor bias_;
};

}  // namespace tg::nn
