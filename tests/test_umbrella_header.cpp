// A first program that includes only the umbrella header: checkpoints through safetensors and a
// DataLoader feeding a compiled training step must compile and run with nothing else included.
#include <gtest/gtest.h>

#include <cmath>
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

// The torch.Tensor methods a typical training script calls (nanoGPT's attention, llm.c's
// sampling), written as methods: they forward to the free functions.
TEST(UmbrellaHeader, TheTensorMethodsOfATrainingScript) {
  tg::manual_seed(5);
  const tg::Tensor qkv = tg::randn({2, 5, 12});
  const std::vector<tg::Tensor> parts = qkv.split(4, 2);
  ASSERT_EQ(parts.size(), 3u);
  auto heads = [](const tg::Tensor& t) { return t.view({2, 5, 2, 2}).transpose(1, 2); };
  const tg::Tensor q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
  const tg::Tensor bias = tg::ones({5, 5}).tril().view({1, 1, 5, 5});
  tg::Tensor att = q.matmul(k.transpose(-2, -1)) * (1.0 / std::sqrt(2.0));
  att = att.masked_fill(bias.eq(0), -INFINITY).softmax(-1);
  const tg::Tensor y = att.matmul(v).transpose(1, 2).contiguous().view_as(parts[0]);
  const tg::Tensor want = tg::scaled_dot_product_attention(q, k, v, tg::Tensor(), 0.0, true);
  EXPECT_TRUE(tg::allclose(y, want.transpose(1, 2).contiguous().view({2, 5, 4}), 1e-5, 1e-6));
  EXPECT_TRUE(tg::equal(qkv.chunk(3, 2)[1], parts[1]));
  EXPECT_EQ(qkv.unbind(0).size(), 2u);
  EXPECT_EQ(qkv.type_as(tg::zeros({1}, {.dtype = tg::kFloat64})).dtype(), tg::kFloat64);
  const auto [values, indices] = qkv.topk(3);
  EXPECT_TRUE(tg::equal(qkv.gather(-1, indices), values));
  EXPECT_TRUE(tg::allclose(qkv.erf(), tg::erf(qkv)));
  EXPECT_TRUE(tg::equal(qkv.triu(1) + qkv.tril(), qkv));
}

}  // namespace
