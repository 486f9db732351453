// Text generation from a trained GPT: temperature and top-k sampling, one token per step. The model
// always sees a window of exactly `context` tokens (the text so far cropped to its last `context`
// tokens, padded at the end while shorter; causal attention keeps the padding out of the position
// read), and the position read is a tensor, so a compiled step traces once for the whole text.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "examples/text_corpus.h"
#include "tapegraph.h"

namespace gpt {

// How the next token is drawn.
struct SamplerOptions {
  double temperature = 1.0;  // logits are divided by it: < 1 sharpens, > 1 flattens
  int64_t top_k = 40;        // only the k most likely tokens can be drawn
  bool bf16 = false;         // run the model under bf16 autocast
  std::string compile = "none";
};

// One sampling step: window [1, context] and position [1] -> the drawn token id [1, 1].
struct NextToken {
  std::shared_ptr<tg::nn::GPT> model;
  SamplerOptions options;

  tg::Tensor operator()(const tg::Tensor& window, const tg::Tensor& position) const {
    tg::AutocastGuard autocast(window.device(), tg::kBFloat16, options.bf16);
    const tg::Tensor logits = model->forward(window).index_select(1, position);  // [1, 1, vocab]
    const tg::Tensor scaled = logits.reshape({1, -1}).to(tg::kFloat32) / options.temperature;
    auto [top, ids] = tg::topk(scaled, options.top_k, -1);
    const tg::Tensor choice = tg::multinomial(tg::softmax(top, -1), 1);  // [1, 1] index into the top k
    return tg::gather(ids, 1, choice);
  }
};

// Draws text from a model, eagerly or through compile() with the model's compile backend.
class Sampler {
 public:
  Sampler(std::shared_ptr<tg::nn::GPT> model, SamplerOptions options)
      : step_{std::move(model), options}, device_(step_.model->parameters().front().device()) {
    if (options.compile != "none") {
      compiled_ = std::make_unique<tg::Compiled<NextToken>>(step_, tg::CompileOptions{.backend = options.compile});
    }
  }

  // `prompt` followed by `chars` sampled bytes (as text). The model is in eval mode meanwhile.
  std::string generate(const std::string& prompt, int64_t chars) {
    tg::NoGradGuard no_grad;
    step_.model->eval();
    const int64_t context = step_.model->config().context;
    std::vector<int64_t> tokens(prompt.begin(), prompt.end());
    for (auto& t : tokens) t = static_cast<unsigned char>(t);
    for (int64_t i = 0; i < chars; ++i) {
      const auto n = static_cast<int64_t>(tokens.size());
      const int64_t used = std::min(n, context);
      std::vector<int64_t> window(static_cast<size_t>(context), 0);
      std::copy(tokens.end() - used, tokens.end(), window.begin());
      const tg::Tensor w = tg::from_vector(window, {1, context}).to(device_);
      const tg::Tensor pos = tg::from_vector(std::vector<int64_t>{used - 1}, {1}).to(device_);
      const tg::Tensor next = compiled_ ? (*compiled_)(w, pos) : step_(w, pos);
      tokens.push_back(next.item<int64_t>());
    }
    step_.model->train();
    return text::decode(tokens);
  }

  // The compiled step's counters (null when sampling eagerly).
  const tg::graphs::CompileCounters* counters() const { return compiled_ ? &compiled_->counters() : nullptr; }

 private:
  NextToken step_;
  tg::Device device_;
  std::unique_ptr<tg::Compiled<NextToken>> compiled_;
};

}  // namespace gpt
