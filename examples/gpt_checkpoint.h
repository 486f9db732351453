// A training run's checkpoint for train_gpt: the model, the optimizer, the learning-rate schedule,
// the data loader's position and the random generator, in one safetensors file, so that a resumed
// run continues mid-epoch with the losses the uninterrupted run would have had.
#pragma once

#include <map>
#include <stdexcept>
#include <string>

#include "io/safetensors.h"
#include "ops/random/random.h"
#include "tapegraph.h"

namespace gpt_checkpoint {

// Where the run stood when the checkpoint was written.
struct Position {
  int64_t step = 0;         // optimizer steps taken
  int64_t epoch = 0;        // the loader's epoch ...
  int64_t batch_index = 0;  // ... and the batches of it already trained on
  uint64_t loader_seed = 0;
};

// The metadata entries that fix the model's shape (a checkpoint loads only into the same shape).
inline std::map<std::string, std::string> shape_of(const tg::nn::GPTConfig& c) {
  return {{"vocab_size", std::to_string(c.vocab_size)},
          {"context", std::to_string(c.context)},
          {"d_model", std::to_string(c.d_model)},
          {"heads", std::to_string(c.heads)},
          {"layers", std::to_string(c.layers)}};
}

// Writes the checkpoint (under a temporary name, renamed into place: a crash leaves the last one).
inline void save(const std::string& path, const tg::nn::GPT& model, const tg::optim::Optimizer& optimizer,
                 const tg::optim::LRScheduler& scheduler, const Position& at) {
  tg::TensorDict all;
  for (auto& [k, t] : model.state_dict()) all["model." + k] = t;
  for (auto& [k, t] : optimizer.state_dict()) all["optimizer." + k] = t;
  for (auto& [k, t] : scheduler.state_dict()) all["scheduler." + k] = t;
  std::map<std::string, std::string> meta = shape_of(model.config());
  const tg::PhiloxState rng = tg::Generator::global().state();
  meta.insert({{"format", "tapegraph-gpt-checkpoint"},
                {"step", std::to_string(at.step)},
                {"epoch", std::to_string(at.epoch)},
                {"batch_index", std::to_string(at.batch_index)},
                {"loader_seed", std::to_string(at.loader_seed)},
                {"rng_seed", std::to_string(rng.seed)},
                {"rng_offset", std::to_string(rng.offset)}});
  tg::save_safetensors(path, all, meta);
}

// Restores save()'s file into the run and returns its position. Everything is checked before
// anything changes: a file that is not such a checkpoint, or one of another model shape, is an error
// naming what differs, and a load that fails halfway puts the model back as it was.
inline Position load(const std::string& path, tg::nn::GPT& model, tg::optim::Optimizer& optimizer,
                     tg::optim::LRScheduler& scheduler) {
  const tg::SafetensorsFile f = tg::load_safetensors(path, model.parameters().front().device());
  auto meta = [&](const std::string& key) -> const std::string& {
    auto it = f.metadata.find(key);
    if (it == f.metadata.end()) throw std::runtime_error(path + ": not a train_gpt checkpoint (no \"" + key + "\")");
    return it->second;
  };
  if (meta("format") != "tapegraph-gpt-checkpoint") {
    throw std::runtime_error(path + ": format \"" + meta("format") + "\", expected \"tapegraph-gpt-checkpoint\"");
  }
  for (const auto& [key, value] : shape_of(model.config())) {
    if (meta(key) != value) {
      throw std::runtime_error(path + ": the checkpoint's model has " + key + " " + meta(key) + ", this run's has " +
                               value + " (pass the options the checkpoint was trained with)");
    }
  }
  std::map<std::string, tg::Tensor> m, o, s;
  for (const auto& [k, t] : f.tensors) {
    if (k.rfind("model.", 0) == 0) m[k.substr(6)] = t;
    else if (k.rfind("optimizer.", 0) == 0) o[k.substr(10)] = t;
    else if (k.rfind("scheduler.", 0) == 0) s[k.substr(10)] = t;
    else throw std::runtime_error(path + ": unexpected key \"" + k + "\" in a checkpoint");
  }
  Position at{.step = std::stoll(meta("step")),
              .epoch = std::stoll(meta("epoch")),
              .batch_index = std::stoll(meta("batch_index")),
              .loader_seed = std::stoull(meta("loader_seed"))};
  const tg::PhiloxState rng{.seed = std::stoull(meta("rng_seed")), .offset = std::stoull(meta("rng_offset"))};
  // Each part checks every entry before it changes anything, so a failure needs undoing only in the
  // parts loaded before it.
  auto copy_of = [](const std::map<std::string, tg::Tensor>& state) {
    std::map<std::string, tg::Tensor> out;
    for (const auto& [k, t] : state) out[k] = t.clone();
    return out;
  };
  const auto model_before = copy_of(model.state_dict());
  const auto optimizer_before = copy_of(optimizer.state_dict());
  model.load_state_dict(m);
  try {
    optimizer.load_state_dict(o);
    try {
      scheduler.load_state_dict(s);
    } catch (...) {
      optimizer.load_state_dict(optimizer_before);
      throw;
    }
  } catch (...) {
    model.load_state_dict(model_before);
    throw;
  }
  tg::Generator::global().set_state(rng);
  return at;
}

}  // namespace gpt_checkpoint
