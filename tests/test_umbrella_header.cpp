// A first program that includes only the umbrella header: checkpoints through safetensors and a
// DataLoader feeding a compiled training step must compile and run with nothing else included.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "tapegraph.h"

namespace {

TEST(UmbrellaHeader, SafetensorsAndDataLoaderTrainAModel) {
  tg::manual_seed(3);
  auto model = std::make_shared<tg::nn::Linear>(4, 2);
  tg::optim::SGD sgd(model->parameters(), {.lr = 0.1});
  const tg::Tensor x = tg::randn({12, 4});
  const tg::Tensor y = tg::randint(0, 2, {12});
  tg::data::DataLoader loader(tg::data::TensorDataset({x, y}), {.batch_size = 4, .shuffle = true, .seed = 1});
  auto loss_fn = tg::compile([model](const tg::Tensor& xb, const tg::Tensor& yb) {
    return tg::cross_entropy((*model)(xb), yb);
  });
  loader.start_epoch(0);
  int batches = 0;
  while (auto batch = loader.next()) {
    sgd.zero_grad();
    loss_fn((*batch)[0], (*batch)[1]).backward();
    sgd.step();
    ++batches;
  }
  EXPECT_EQ(batches, 3);

  const std::string path = (std::filesystem::temp_directory_path() / "tg_umbrella_header.safetensors").string();
  tg::save_safetensors(path, model->state_dict());
  const tg::SafetensorsFile loaded = tg::load_safetensors(path);
  std::remove(path.c_str());
  auto copy = std::make_shared<tg::nn::Linear>(4, 2);
  copy->load_state_dict(loaded.tensors);
  EXPECT_TRUE(tg::equal((*copy)(x), (*model)(x)));
}

}  // namespace
