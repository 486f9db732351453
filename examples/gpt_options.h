// train_gpt's command line: presets for a GPU and for a small CPU, and flags that override them.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "tapegraph.h"
#include "tensor/cuda_runtime.h"

namespace gpt {

// Everything a run is configured by.
struct Options {
  tg::Device device = tg::kCPU;
  std::string compile;  // none | aot_eager | cudagraphs
  std::string dtype;    // bf16 (autocast) | fp32
  std::string data = ".data/fortunes.txt";
  std::string logdir = "runs/gpt";
  std::string save, resume;
  // The model.
  int64_t layers = 0, d_model = 0, heads = 0, context = 0;
  double dropout = 0;
  // The optimization.
  int64_t batch_size = 0, steps = 0, warmup = 0;
  int64_t stop_at = 0;  // end this run after this many steps (a time-limited job); 0: run all --steps
  double lr = 0, min_lr = 0, weight_decay = 0.1, clip = 1.0;
  uint64_t seed = 1337;
  // Logging, evaluation, checkpoints.
  int64_t log_every = 10, eval_every = 0, eval_batches = 0, ckpt_every = 0;
  // Sampling at the end.
  int64_t sample_chars = 400, top_k = 40;
  double temperature = 0.8;
  double min_gain = 0;  // exit 3 unless the validation loss ends this far below the unigram entropy
  // Profiling: a Chrome trace of `profile_steps` steps after `profile_warmup` steps ("": none).
  std::string profile;
  int64_t profile_warmup = 5, profile_steps = 5;
};

inline void usage() {
  std::fprintf(stderr,
               "usage: train_gpt [--preset gpu|cpu] [--device cpu|cuda] [--compile none|aot_eager|cudagraphs]\n"
               "  [--dtype bf16|fp32] [--data PATH] [--logdir DIR] [--save PATH] [--ckpt-every N] [--resume PATH]\n"
               "  [--layers N] [--d-model N] [--heads N] [--context N] [--dropout P] [--batch-size N] [--steps N]\n"
               "  [--stop-at STEP] [--warmup N] [--lr LR] [--min-lr LR] [--weight-decay WD] [--clip NORM] [--seed S]\n"
               "  [--log-every N] [--eval-every N] [--eval-batches N] [--sample-chars N] [--temperature T]\n"
               "  [--top-k K] [--min-gain NATS] [--profile TRACE.json] [--profile-warmup N] [--profile-steps N]\n"
               "Presets: gpu (6 layers, d_model 384, 6 heads, context 256, batch 64, 2500 steps, bf16, cudagraphs)\n"
               "and cpu (3 layers, d_model 128, 4 heads, context 128, batch 16, 800 steps, fp32, aot_eager);\n"
               "the default is the preset of --device, else gpu when a CUDA device is present.\n"
               "--profile records --profile-steps steps (5) after --profile-warmup steps (5), writes their Chrome\n"
               "trace to TRACE.json and prints the table of ops and kernels, the device time per stage and the\n"
               "memory summary.\n");
}

// Fills the model and optimization fields of `o` from a preset.
inline void apply_preset(Options& o, const std::string& preset) {
  if (preset == "gpu") {
    o.device = tg::cuda_device(0);
    o.compile = "cudagraphs";
    o.dtype = "bf16";
    o.layers = 6, o.d_model = 384, o.heads = 6, o.context = 256, o.dropout = 0.1;
    o.batch_size = 64, o.steps = 2500, o.warmup = 100, o.lr = 1e-3, o.min_lr = 1e-4;
    o.eval_every = 250, o.eval_batches = 20, o.ckpt_every = 500;
  } else if (preset == "cpu") {
    o.device = tg::kCPU;
    o.compile = "aot_eager";
    o.dtype = "fp32";
    o.layers = 3, o.d_model = 128, o.heads = 4, o.context = 128, o.dropout = 0.0;
    o.batch_size = 16, o.steps = 800, o.warmup = 40, o.lr = 2e-3, o.min_lr = 2e-4;
    o.eval_every = 100, o.eval_batches = 16, o.ckpt_every = 200;
  } else {
    throw std::runtime_error("--preset must be gpu or cpu, got \"" + preset + "\"");
  }
}

inline int64_t positive(const std::string& flag, const std::string& value) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || v <= 0) {
    throw std::runtime_error(flag + " takes a positive integer, got \"" + value + "\"");
  }
  return v;
}

inline double number(const std::string& flag, const std::string& value) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size()) throw std::runtime_error(flag + " takes a number, got \"" + value + "\"");
  return v;
}

// The options of `argv`: the preset first (named, or chosen by the device), then each flag.
inline Options parse(int argc, char** argv) {
  // The preset: the one named, else the one of the --device named, else gpu where a GPU is present.
  std::string preset = tg::cuda_is_available() ? "gpu" : "cpu";
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--device") preset = tg::Device(argv[i + 1]).is_cuda() ? "gpu" : "cpu";
  }
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--preset") preset = argv[i + 1];
  }
  Options o;
  apply_preset(o, preset);
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      usage();
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::runtime_error(flag + " needs a value (--help lists the options)");
    const std::string value = argv[++i];
    if (flag == "--preset") continue;
    else if (flag == "--device") o.device = tg::Device(value);
    else if (flag == "--compile") o.compile = value;
    else if (flag == "--dtype") o.dtype = value;
    else if (flag == "--data") o.data = value;
    else if (flag == "--logdir") o.logdir = value;
    else if (flag == "--save") o.save = value;
    else if (flag == "--resume") o.resume = value;
    else if (flag == "--layers") o.layers = positive(flag, value);
    else if (flag == "--d-model") o.d_model = positive(flag, value);
    else if (flag == "--heads") o.heads = positive(flag, value);
    else if (flag == "--context") o.context = positive(flag, value);
    else if (flag == "--dropout") o.dropout = number(flag, value);
    else if (flag == "--batch-size") o.batch_size = positive(flag, value);
    else if (flag == "--steps") o.steps = positive(flag, value);
    else if (flag == "--stop-at") o.stop_at = positive(flag, value);
    else if (flag == "--warmup") o.warmup = positive(flag, value);
    else if (flag == "--lr") o.lr = number(flag, value);
    else if (flag == "--min-lr") o.min_lr = number(flag, value);
    else if (flag == "--weight-decay") o.weight_decay = number(flag, value);
    else if (flag == "--clip") o.clip = number(flag, value);
    else if (flag == "--seed") o.seed = static_cast<uint64_t>(positive(flag, value));
    else if (flag == "--log-every") o.log_every = positive(flag, value);
    else if (flag == "--eval-every") o.eval_every = positive(flag, value);
    else if (flag == "--eval-batches") o.eval_batches = positive(flag, value);
    else if (flag == "--ckpt-every") o.ckpt_every = positive(flag, value);
    else if (flag == "--sample-chars") o.sample_chars = number(flag, value) > 0 ? positive(flag, value) : 0;
    else if (flag == "--temperature") o.temperature = number(flag, value);
    else if (flag == "--top-k") o.top_k = positive(flag, value);
    else if (flag == "--min-gain") o.min_gain = number(flag, value);
    else if (flag == "--profile") o.profile = value;
    else if (flag == "--profile-warmup") o.profile_warmup = number(flag, value) > 0 ? positive(flag, value) : 0;
    else if (flag == "--profile-steps") o.profile_steps = positive(flag, value);
    else throw std::runtime_error("unknown option " + flag + " (--help lists them)");
  }
  if (o.compile != "none" && o.compile != "aot_eager" && o.compile != "cudagraphs") {
    throw std::runtime_error("--compile must be none, aot_eager or cudagraphs, got \"" + o.compile + "\"");
  }
  if (o.dtype != "bf16" && o.dtype != "fp32") throw std::runtime_error("--dtype must be bf16 or fp32, got \"" + o.dtype + "\"");
  if (o.device.is_cuda() && !tg::cuda_is_available()) throw std::runtime_error("--device cuda, but no CUDA device is present");
  if (o.compile == "cudagraphs" && !o.device.is_cuda()) {
    throw std::runtime_error("--compile cudagraphs needs --device cuda (on the CPU use aot_eager)");
  }
  if (o.d_model % o.heads != 0) {
    throw std::runtime_error("--d-model " + std::to_string(o.d_model) + " is not a multiple of --heads " +
                             std::to_string(o.heads));
  }
  if (o.temperature <= 0) throw std::runtime_error("--temperature must be positive, got " + std::to_string(o.temperature));
  if (o.dropout < 0 || o.dropout >= 1) throw std::runtime_error("--dropout must be in [0, 1), got " + std::to_string(o.dropout));
  o.top_k = std::min<int64_t>(o.top_k, 256);
  return o;
}

}  // namespace gpt
