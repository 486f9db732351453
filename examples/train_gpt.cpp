// train_gpt: trains a GPT-style byte-level language model (nn::GPT, the model of bench_gpt2) on the
// fortune cookie corpus, the way a training script does: a DataLoader over windows of text, AdamW
// under a warm-up + cosine schedule with the learning rate on the device, gradient clipping inside
// the compiled update, bf16 autocast and CUDA graphs on the GPU (float32 and aot_eager on the CPU),
// validation loss every few hundred steps, checkpoints with --resume that continue mid-epoch,
// TensorBoard event files and an SVG of the loss curves, and at the end a sample of text drawn from
// the model (temperature, top-k) by a compiled sampling step that never recompiles.
//
//   train_gpt [--preset gpu|cpu] [--device cpu|cuda] [--compile none|aot_eager|cudagraphs]
//             [--dtype bf16|fp32] [--data PATH] [--logdir DIR] [--save PATH] [--resume PATH] ...
//             (--help lists every option)
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <sys/resource.h>

#include "examples/gpt_checkpoint.h"
#include "examples/gpt_options.h"
#include "examples/gpt_profiler.h"
#include "examples/gpt_sampler.h"
#include "examples/text_corpus.h"
#include "io/summary_writer.h"
#include "io/svg_plot.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"
#include "tensor/memory/cuda_memory.h"

namespace {

using tg::Tensor;
using Clock = std::chrono::steady_clock;

// Peak memory in MiB: the device allocator's peak on a GPU, the process's peak resident set on the CPU.
double peak_memory_mib(const tg::Device& device) {
  if (device.is_cuda()) return static_cast<double>(tg::cuda::max_memory_allocated(device.index)) / (1 << 20);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// The schedule: a linear warm-up from 1% of the peak rate, then cosine annealing down to min_lr.
std::unique_ptr<tg::optim::SequentialLR> warmup_cosine(tg::optim::Optimizer& opt, const gpt::Options& o) {
  using namespace tg::optim;
  const int64_t warmup = std::max<int64_t>(1, std::min(o.warmup, o.steps - 1));
  return std::make_unique<SequentialLR>(
      opt,
      std::vector<std::shared_ptr<LRScheduler>>{
          std::make_shared<LinearLR>(opt, 0.01, 1.0, warmup),
          std::make_shared<CosineAnnealingLR>(opt, std::max<int64_t>(1, o.steps - warmup), o.min_lr)},
      std::vector<int64_t>{warmup});
}

void print_counters(const char* name, const tg::graphs::CompileCounters& c) {
  std::printf("%s: compilations %d, recompiles %d, compiled calls %d, graphs captured %d, replays %d, "
              "eager fallbacks %d\n",
              name, c.compilations, c.recompiles, c.compiled_calls, c.graphs_captured, c.replays, c.eager_fallbacks);
  for (const auto& r : c.fallback_reasons) std::printf("  fallback: %s\n", r.c_str());
  for (const auto& r : c.recompile_reasons) std::printf("  recompile: %s\n", r.c_str());
  for (const auto& [r, k] : c.cudagraph_skips) std::printf("  not captured (%d): %s\n", k, r.c_str());
}

}  // namespace

static int run(int argc, char** argv) {
  const gpt::Options opt = gpt::parse(argc, argv);
  const text::Corpus corpus = text::load_corpus(opt.data);
  // The log directory is opened before any training, so that an unwritable one costs nothing.
  tg::SummaryWriter writer(opt.logdir);
  const double unigram = text::unigram_entropy(corpus.train);
  const bool cuda = opt.device.is_cuda();
  const bool bf16 = opt.dtype == "bf16";

  // Training windows overlap by half; validation reads fixed windows spread over its split.
  const text::Windows train = text::make_windows(corpus.train, opt.context, std::max<int64_t>(1, opt.context / 2));
  const text::Windows val = text::make_windows(corpus.validation, opt.context, opt.context);
  const int64_t eval_rows = std::min(val.inputs.size(0), opt.eval_batches * opt.batch_size) / opt.batch_size *
                            opt.batch_size;
  if (eval_rows == 0) throw std::runtime_error("the validation split is smaller than one batch");
  const Tensor val_x = val.inputs.narrow(0, 0, eval_rows).to(opt.device);
  const Tensor val_y = val.targets.narrow(0, 0, eval_rows).to(opt.device);
  tg::data::DataLoader loader(tg::data::TensorDataset({train.inputs, train.targets}),
                              {.batch_size = opt.batch_size, .shuffle = true, .seed = opt.seed, .drop_last = true,
                               .device = opt.device, .prefetch = 4, .static_buffers = opt.compile == "cudagraphs"});

  tg::manual_seed(opt.seed);
  const tg::nn::GPTConfig config{.vocab_size = text::kVocabSize, .context = opt.context, .d_model = opt.d_model,
                                 .heads = opt.heads, .layers = opt.layers, .dropout = opt.dropout};
  auto model = std::make_shared<tg::nn::GPT>(config);
  model->to(opt.device);
  tg::optim::AdamW optimizer(model->parameters(),
                             {.lr = opt.lr, .beta1 = 0.9, .beta2 = 0.95, .weight_decay = opt.weight_decay});
  optimizer.set_capturable(opt.compile == "cudagraphs");
  auto scheduler = warmup_cosine(optimizer, opt);

  // The loss (its backward compiled with it) and the update (clipping inside it), compiled or eager.
  // The clipped gradients' total norm is copied into grad_norm for the logs, on the device.
  Tensor grad_norm = tg::zeros({}, {.device = opt.device});
  auto loss_of = [model, bf16](const Tensor& x, const Tensor& y) {
    tg::AutocastGuard autocast(x.device(), tg::kBFloat16, bf16);
    return model->loss(x, y);
  };
  auto clip = [&grad_norm, max_norm = opt.clip](const tg::TensorList& grads) {
    grad_norm.copy_(tg::nn::utils::clip_norm_(grads, max_norm));
  };
  std::function<Tensor(const Tensor&, const Tensor&)> loss_fn = loss_of;
  std::shared_ptr<tg::Compiled<decltype(loss_of)>> compiled_loss;
  std::unique_ptr<tg::optim::CompiledStep> compiled_update;
  if (opt.compile != "none") {
    const tg::CompileOptions co{.backend = opt.compile};
    compiled_loss = std::make_shared<tg::Compiled<decltype(loss_of)>>(loss_of, co);
    loss_fn = [f = compiled_loss](const Tensor& x, const Tensor& y) { return (*f)(x, y); };
    compiled_update = std::make_unique<tg::optim::CompiledStep>(optimizer, co);
    compiled_update->set_grad_transform(clip);
  }
  auto update = [&] {
    if (compiled_update) {
      compiled_update->step();
    } else {
      tg::TensorList grads;
      for (const Tensor& p : model->parameters()) grads.push_back(p.grad());
      clip(grads);
      optimizer.step();
    }
    scheduler->step();
  };

  gpt_checkpoint::Position at{.loader_seed = opt.seed};
  if (!opt.resume.empty()) {
    at = gpt_checkpoint::load(opt.resume, *model, optimizer, *scheduler);
    if (at.loader_seed != opt.seed) {
      throw std::runtime_error(opt.resume + ": saved with --seed " + std::to_string(at.loader_seed) +
                               ", this run has --seed " + std::to_string(opt.seed));
    }
    loader.start_epoch(at.epoch, at.batch_index);
    std::printf("resumed from %s at step %lld (epoch %lld, batch %lld)\n", opt.resume.c_str(),
                static_cast<long long>(at.step), static_cast<long long>(at.epoch),
                static_cast<long long>(at.batch_index));
  }

  int64_t params = 0;
  for (const Tensor& p : model->parameters()) params += p.numel();
  std::printf("corpus: %s, %lld fortunes, %zu train / %zu validation bytes; unigram entropy %.3f nats\n",
              opt.data.c_str(), static_cast<long long>(corpus.entries), corpus.train.size(), corpus.validation.size(),
              unigram);
  std::printf("model: %lld layers, d_model %lld, %lld heads, context %lld, %.2fM parameters; batch %lld, %lld steps, "
              "%lld batches per epoch\n",
              static_cast<long long>(opt.layers), static_cast<long long>(opt.d_model),
              static_cast<long long>(opt.heads), static_cast<long long>(opt.context), static_cast<double>(params) / 1e6,
              static_cast<long long>(opt.batch_size), static_cast<long long>(opt.steps),
              static_cast<long long>(loader.num_batches()));
  std::printf("device %s, compile %s, %s\n", opt.device.str().c_str(), opt.compile.c_str(),
              bf16 ? "bf16 autocast" : "float32");

  // Mean loss over the validation windows, in eval mode (no dropout), without gradients.
  auto validation_loss = [&] {
    tg::NoGradGuard no_grad;
    model->eval();
    Tensor sum = tg::zeros({}, {.device = opt.device});
    for (int64_t r = 0; r < eval_rows; r += opt.batch_size) {
      sum.add_(loss_of(val_x.narrow(0, r, opt.batch_size), val_y.narrow(0, r, opt.batch_size)).detach().to(tg::kFloat32));
    }
    model->train();
    return sum.item<double>() / static_cast<double>(eval_rows / opt.batch_size);
  };
  auto sync = [&] {
    if (cuda) tg::cuda::synchronize(opt.device.index);
  };

  tg::PlotSeries train_curve{.name = "train"}, val_curve{.name = "validation"};
  Tensor loss_sum = tg::zeros({}, {.device = opt.device});  // summed on the device between log points
  int64_t step = at.step, logged_from = at.step;
  double last_val = NAN;
  sync();
  const auto start = Clock::now();
  auto interval_start = start;
  double train_seconds = 0;
  int64_t timed_tokens = 0;
  // The schedule spans --steps; --stop-at ends this run earlier, as a job's time limit would.
  const int64_t last_step = opt.stop_at > 0 ? std::min(opt.stop_at, opt.steps) : opt.steps;
  gpt::StepProfiler profiler(opt.profile, opt.profile_warmup, opt.profile_steps);
  while (step < last_step) {
    for (tg::TensorList& batch : loader) {
      Tensor loss = loss_fn(batch[0], batch[1]);
      optimizer.zero_grad();
      loss.backward();
      update();
      loss_sum.add_(loss.detach().to(tg::kFloat32));
      ++step;
      profiler.after_step(step - at.step);
      if (step % opt.log_every == 0 || step == last_step) {
        const double mean = loss_sum.item<double>() / static_cast<double>(step - logged_from);  // synchronizes
        const auto now = Clock::now();
        const double seconds = std::chrono::duration<double>(now - interval_start).count();
        const double tokens = static_cast<double>((step - logged_from) * opt.batch_size * opt.context);
        train_seconds += seconds;
        timed_tokens += static_cast<int64_t>(tokens);
        writer.add_scalar("train/loss", static_cast<float>(mean), step);
        writer.add_scalar("train/lr", static_cast<float>(optimizer.lr()), step);
        writer.add_scalar("train/grad_norm", grad_norm.item<float>(), step);
        writer.add_scalar("perf/tokens_per_s", static_cast<float>(tokens / seconds), step);
        writer.add_scalar("perf/peak_memory_mib", static_cast<float>(peak_memory_mib(opt.device)), step);
        train_curve.x.push_back(static_cast<double>(step));
        train_curve.y.push_back(mean);
        loss_sum.zero_();
        logged_from = step;
        interval_start = Clock::now();
      }
      if (step % opt.eval_every == 0 || step == opt.steps) {
        last_val = validation_loss();
        writer.add_scalar("val/loss", static_cast<float>(last_val), step);
        val_curve.x.push_back(static_cast<double>(step));
        val_curve.y.push_back(last_val);
        std::printf("step %6lld  train loss %.4f  val loss %.4f  lr %.2e  %.0f tokens/s\n", static_cast<long long>(step),
                    train_curve.y.empty() ? NAN : train_curve.y.back(), last_val, optimizer.lr(),
                    train_seconds > 0 ? static_cast<double>(timed_tokens) / train_seconds : 0.0);
        std::fflush(stdout);
        interval_start = Clock::now();  // validation is not training time
      }
      if (!opt.save.empty() && (step % opt.ckpt_every == 0 || step == last_step)) {
        gpt_checkpoint::save(opt.save, *model, optimizer, *scheduler,
                             {.step = step, .epoch = loader.epoch(), .batch_index = loader.batch_index(),
                              .loader_seed = opt.seed});
        interval_start = Clock::now();
      }
      if (step == last_step) break;
    }
  }
  sync();
  profiler.finish();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  writer.flush();

  if (std::isnan(last_val)) last_val = validation_loss();
  std::printf("\nvalidation loss %.4f nats (%.3f below the unigram entropy %.3f) after %lld steps in %.1f s, "
              "%.0f tokens/s while training, peak memory %.0f MiB\n",
              last_val, unigram - last_val, unigram, static_cast<long long>(step), wall,
              train_seconds > 0 ? static_cast<double>(timed_tokens) / train_seconds : 0.0,
              peak_memory_mib(opt.device));
  if (compiled_loss) {
    print_counters("forward+backward", compiled_loss->counters());
    print_counters("optimizer", compiled_update->counters());
  }

  if (opt.sample_chars > 0) {
    gpt::Sampler sampler(model, {.temperature = opt.temperature, .top_k = opt.top_k, .bf16 = bf16,
                                 .compile = opt.compile});
    tg::manual_seed(opt.seed + 1);
    const std::string text = sampler.generate("%\n", opt.sample_chars);
    std::printf("\n--- %lld characters sampled (temperature %.2f, top-k %lld, seed %llu) ---\n%s\n---\n",
                static_cast<long long>(opt.sample_chars), opt.temperature, static_cast<long long>(opt.top_k),
                static_cast<unsigned long long>(opt.seed + 1), text.c_str());
    if (sampler.counters()) print_counters("sampling step", *sampler.counters());
  }

  const std::string svg = opt.logdir + "/loss.svg";
  tg::write_svg_plot(svg, {train_curve, val_curve},
                     {.title = "train_gpt on " + opt.data, .y_label = "cross-entropy (nats per byte)"});
  std::printf("event files: %s (tensorboard --logdir %s); loss curve: %s\n", opt.logdir.c_str(), opt.logdir.c_str(),
              svg.c_str());
  if (opt.min_gain > 0 && unigram - last_val < opt.min_gain) {
    std::fprintf(stderr, "validation loss %.4f is not %.2f nats below the unigram entropy %.4f\n", last_val,
                 opt.min_gain, unigram);
    return 3;
  }
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
