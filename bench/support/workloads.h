// The anchor workloads shared by the benchmarks: an MLP (Linear layers with ReLU between),
// cross-entropy, SGD lr 1e-3, fp32.
//   mlp_small: batch 64, widths 128-256-256-10;  mlp_wide: batch 256, widths 1024-4096-4096-1024.
#pragma once

#include <memory>
#include <vector>

#include "tapegraph.h"

namespace bench {

// Batch size and layer widths of one workload.
struct Workload {
  int64_t batch;
  std::vector<int64_t> widths;
};

inline const Workload kMlpSmall{64, {128, 256, 256, 10}};
inline const Workload kMlpWide{256, {1024, 4096, 4096, 1024}};

// A workload's model, batch and optimizer on `device`, built from a fixed seed.
struct MlpSetup {
  std::shared_ptr<tg::nn::Sequential> model = std::make_shared<tg::nn::Sequential>();
  tg::Tensor x, y;
  std::unique_ptr<tg::optim::SGD> sgd;

  MlpSetup(const Workload& w, tg::Device device) {
    tg::manual_seed(0);
    for (size_t i = 0; i + 1 < w.widths.size(); ++i) {
      model->push_back(std::make_shared<tg::nn::Linear>(w.widths[i], w.widths[i + 1]));
      if (i + 2 < w.widths.size()) model->push_back(std::make_shared<tg::nn::ReLU>());
    }
    model->to(device);
    x = tg::randn({w.batch, w.widths.front()}, {.device = device});
    y = tg::randint(0, w.widths.back(), {w.batch}, {.device = device});
    sgd = std::make_unique<tg::optim::SGD>(model->parameters(), tg::optim::SGDOptions{.lr = 1e-3});
  }

  // The loss of the model on (xs, ys).
  tg::Tensor loss(const tg::Tensor& xs, const tg::Tensor& ys) const { return tg::cross_entropy((*model)(xs), ys); }
};

}  // namespace bench
