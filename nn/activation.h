// Activation and dropout modules: parameter-free wrappers so they can sit inside Sequential.
#pragma once

#include <string>

#include "nn/module.h"

namespace tg::nn {

// max(x, 0).
class ReLU : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "ReLU"; }
};

// x * Phi(x); approximate = "tanh" uses the tanh formula, "none" the exact erf form.
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override;

 private:
  std::string approximate_;
};

// x * sigmoid(x) (also called swish).
class SiLU : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "SiLU"; }
};

// log(1 + exp(beta * x)) / beta, reverting to x where beta * x > threshold.
class Softplus : public Module {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Softplus"; }
  std::string extra_repr() const override;

 private:
  double beta_, threshold_;
};

// Zeroes elements with probability p in training mode (scaling the rest by 1 / (1 - p)); identity in eval mode.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;
  // Changes the probability (compiled functions that used the old one recompile).
  void set_p(double p);

 private:
  Guarded<double> p_{"dropout.p", 0.5};
};

// tanh(x).
class Tanh : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Tanh"; }
};

}  // namespace tg::nn
