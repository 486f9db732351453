// Uses an installed tapegraph: trains a linear layer a few steps, round-trips its state through a
// safetensors file and checks the reloaded model gives the same output.
#include <cstdio>
#include <filesystem>

#include "io/safetensors.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tapegraph.h"

int main() {
  tg::manual_seed(0);
  tg::nn::Linear model(4, 2);
  tg::optim::SGD sgd(model.parameters(), {.lr = 0.1});
  const tg::Tensor x = tg::randn({8, 4});
  for (int i = 0; i < 3; ++i) {
    tg::Tensor loss = model(x).pow(2).mean();
    sgd.zero_grad();
    loss.backward();
    sgd.step();
  }
  const auto path = (std::filesystem::temp_directory_path() / "tapegraph_consumer.safetensors").string();
  tg::save_safetensors(path, model.state_dict(), {{"format", "pt"}});
  tg::nn::Linear copy(4, 2);
  copy.load_state_dict(tg::load_safetensors(path).tensors);
  std::filesystem::remove(path);
  tg::NoGradGuard no_grad;
  const double diff = (model(x) - copy(x)).abs().sum().item<float>();
  std::printf("consumer: tapegraph found; reloaded model differs by %g%s\n", diff,
              tg::cuda_is_available() ? " (CUDA available)" : "");
  return diff == 0.0 ? 0 : 1;
}
