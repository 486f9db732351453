// Trains a 64-128-10 MLP (or, with --model cnn, a small CNN) on the UCI handwritten digits (8x8
// images, 1797 samples) with the forward, backward and optimizer step compiled, and reports the
// held-out accuracy, the compile time, the mean time of one training step and the compiler's counters.
//
//   train_digits [--device cpu|cuda] [--compile none|aot_eager|cudagraphs] [--model mlp|cnn] [--epochs N]
//                [--data PATH] [--batch-size B] [--lr LR] [--seed S] [--save PATH] [--resume PATH] [--target ACC]
//                [--logdir DIR]
// It logs the loss and held-out accuracy per epoch as TensorBoard scalars in DIR (default
// runs/digits) and draws the loss curve there as loss.svg.
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "data/dataloader.h"
#include "graphs/counters.h"
#include "io/safetensors.h"
#include "io/summary_writer.h"
#include "io/svg_plot.h"
#include "examples/digits_models.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tapegraph.h"
#include "tensor/cuda_runtime.h"

namespace {

constexpr int kFeatures = 64;
constexpr int kClasses = 10;
constexpr double kTargetAccuracy = 0.95;
constexpr double kCnnTargetAccuracy = 0.97;

struct Options {
  tg::Device device = tg::cuda_is_available() ? tg::cuda_device(0) : tg::kCPU;
  std::string compile;  // "none", "aot_eager" or "cudagraphs"; empty: the device's default
  int epochs = 20;
  std::string data = ".data/digits.csv.gz";
  std::string save;     // checkpoint written after every epoch
  std::string resume;   // checkpoint to continue from
  std::string logdir = "runs/digits";  // TensorBoard event files and the loss curve
  double target = -1;  // below 0: the model's default target
  int batch_size = 64;
  double lr = 3e-3;
  uint64_t seed = 0;
  std::string model = "mlp";
};

[[noreturn]] void usage(const char* argv0, int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: %s [--device cpu|cuda] [--compile none|aot_eager|cudagraphs] [--model mlp|cnn] [--epochs N]\n"
               "          [--data PATH] [--batch-size B] [--lr LR] [--seed S] [--save PATH] [--resume PATH]\n"
               "          [--target ACC] [--logdir DIR]\n",
               argv0);
  std::exit(code);
}

// The number in `value`, or exit with a message naming `flag`.
template <typename T>
T number(const std::string& flag, const std::string& value) {
  std::istringstream in(value);
  T out{};
  if (!(in >> out) || !in.eof()) {
    std::fprintf(stderr, "error: %s expects a number, got \"%s\"\n", flag.c_str(), value.c_str());
    std::exit(2);
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") usage(argv[0], 0);
    if (i + 1 >= argc) usage(argv[0], 2);
    const std::string value = argv[++i];
    if (flag == "--device") o.device = tg::Device(value);
    else if (flag == "--compile") o.compile = value;
    else if (flag == "--save") o.save = value;
    else if (flag == "--resume") o.resume = value;
    else if (flag == "--logdir") o.logdir = value;
    else if (flag == "--target") o.target = number<double>(flag, value);
    else if (flag == "--epochs") o.epochs = number<int>(flag, value);
    else if (flag == "--data") o.data = value;
    else if (flag == "--batch-size") o.batch_size = number<int>(flag, value);
    else if (flag == "--lr") o.lr = number<double>(flag, value);
    else if (flag == "--seed") o.seed = number<uint64_t>(flag, value);
    else if (flag == "--model") o.model = value;
    else usage(argv[0], 2);
  }
  if (o.epochs < 1 || o.batch_size < 1) usage(argv[0], 2);
  if (o.target < 0) o.target = o.model == "cnn" ? kCnnTargetAccuracy : kTargetAccuracy;
  if (o.compile.empty()) o.compile = o.device.is_cuda() ? "cudagraphs" : "aot_eager";
  if (o.compile != "none" && o.compile != "aot_eager" && o.compile != "cudagraphs") {
    std::fprintf(stderr, "error: --compile expects none, aot_eager or cudagraphs, got \"%s\"\n", o.compile.c_str());
    std::exit(2);
  }
  if (o.compile == "cudagraphs" && !o.device.is_cuda()) {
    std::fprintf(stderr, "error: --compile cudagraphs needs --device cuda\n");
    std::exit(2);
  }
  if (o.device.is_cuda() && !tg::cuda_is_available()) {
    std::fprintf(stderr, "error: --device %s asked for, but no CUDA device is available in this build\n",
                 o.device.str().c_str());
    std::exit(2);
  }
  return o;
}

// The digits as read from the CSV: 64 pixel values in 0..16 then the label, one sample per line.
struct Digits {
  std::vector<float> pixels;  // samples x 64, scaled to [0, 1]
  std::vector<int64_t> labels;
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

Digits load_digits(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr,
                 "error: %s not found.\n"
                 "Get it with `bash examples/fetch_digits.sh` (extracts scikit-learn's copy of the UCI digits\n"
                 "from Debian's python3-sklearn package into .data/), or pass --data PATH.\n",
                 path.c_str());
    std::exit(1);
  }
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    std::fprintf(stderr, "error: cannot open %s\n", path.c_str());
    std::exit(1);
  }
  Digits d;
  char buf[1024];
  int line = 0;
  while (gzgets(f, buf, sizeof buf) != nullptr) {
    ++line;
    std::stringstream row(buf);
    std::string cell;
    std::vector<int> values;
    while (std::getline(row, cell, ',')) values.push_back(std::stoi(cell));
    if (values.empty()) continue;
    bool ok = values.size() == kFeatures + 1 && values.back() >= 0 && values.back() < kClasses;
    for (int j = 0; ok && j < kFeatures; ++j) ok = values[j] >= 0 && values[j] <= 16;
    if (!ok) {
      std::fprintf(stderr, "error: %s line %d: expected 64 values in 0..16 and a label in 0..9\n", path.c_str(), line);
      std::exit(1);
    }
    for (int j = 0; j < kFeatures; ++j) d.pixels.push_back(static_cast<float>(values[j]) / 16.0f);
    d.labels.push_back(values.back());
  }
  gzclose(f);
  return d;
}

// Rows `idx` of the data set as CPU tensors (pixels [n, 64] float32, labels [n] int64).
std::pair<tg::Tensor, tg::Tensor> gather(const Digits& d, const std::vector<int64_t>& idx) {
  std::vector<float> x;
  std::vector<int64_t> y;
  x.reserve(idx.size() * kFeatures);
  for (int64_t i : idx) {
    x.insert(x.end(), d.pixels.begin() + i * kFeatures, d.pixels.begin() + (i + 1) * kFeatures);
    y.push_back(d.labels[static_cast<size_t>(i)]);
  }
  const auto n = static_cast<int64_t>(idx.size());
  return {tg::from_vector(x, {n, kFeatures}), tg::from_vector(y, {n})};
}

// Model and optimizer state under "model." and "optimizer." keys, with the finished epoch in the metadata.
void save_checkpoint(const std::string& path, const tg::nn::Module& model, const tg::optim::Optimizer& optimizer,
                     int epoch) {
  tg::TensorDict all;
  for (auto& [k, t] : model.state_dict()) all["model." + k] = t;
  for (auto& [k, t] : optimizer.state_dict()) all["optimizer." + k] = t;
  tg::save_safetensors(path, all, {{"epoch", std::to_string(epoch)}, {"format", "tapegraph-checkpoint"}});
}

// Restores save_checkpoint()'s file; returns the epoch it was saved after.
int load_checkpoint(const std::string& path, tg::nn::Module& model, tg::optim::Optimizer& optimizer) {
  tg::SafetensorsFile f = tg::load_safetensors(path);
  std::map<std::string, tg::Tensor> m, o;
  for (auto& [k, t] : f.tensors) {
    if (k.rfind("model.", 0) == 0) m[k.substr(6)] = t;
    else if (k.rfind("optimizer.", 0) == 0) o[k.substr(10)] = t;
    else throw std::runtime_error(path + ": unexpected key \"" + k + "\" in a checkpoint");
  }
  auto it = f.metadata.find("epoch");
  if (it == f.metadata.end()) throw std::runtime_error(path + ": no \"epoch\" in the checkpoint's metadata");
  model.load_state_dict(m);
  optimizer.load_state_dict(o);
  return std::stoi(it->second);
}

double accuracy(tg::nn::Module& model, const tg::Tensor& x, const tg::Tensor& y) {
  tg::NoGradGuard no_grad;
  model.eval();
  const int64_t correct = model(x).argmax(1).eq(y).sum().item<int64_t>();
  model.train();
  return static_cast<double>(correct) / static_cast<double>(y.numel());
}

// Redraws the bar in place on a terminal (live); elsewhere only whole lines are printed.
void draw_bar(bool live, int epoch, int epochs, int64_t done, int64_t total, double loss, const char* tail) {
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / total);
  std::string bar(kWidth, ' ');
  for (int i = 0; i < filled; ++i) bar[static_cast<size_t>(i)] = '=';
  if (filled < kWidth) bar[static_cast<size_t>(filled)] = '>';
  const int digits = static_cast<int>(std::to_string(epochs).size());
  std::printf("%sepoch %*d/%d [%s] loss %.4f%s", live ? "\r" : "", digits, epoch, epochs, bar.c_str(), loss, tail);
  std::fflush(stdout);
}

}  // namespace

static int run(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  const Digits data = load_digits(opt.data);
  tg::SummaryWriter writer(opt.logdir);  // before training: an unwritable directory costs nothing
  tg::PlotSeries loss_curve{.name = "train loss"};
  const int64_t n = data.size();
  const int64_t n_train = n * 4 / 5;

  // Fixed-seed shuffle, then an 80/20 split.
  std::vector<int64_t> order = tg::data::permutation(n, opt.seed, -1);
  auto [x_train, y_train] = gather(data, std::vector<int64_t>(order.begin(), order.begin() + n_train));
  auto [x_test, y_test] = gather(data, std::vector<int64_t>(order.begin() + n_train, order.end()));
  x_test = x_test.to(opt.device);
  y_test = y_test.to(opt.device);
  // Full batches only (drop_last), so every step has the same shapes and replays the same graphs.
  tg::data::DataLoader loader(tg::data::TensorDataset({x_train, y_train}),
                              {.batch_size = opt.batch_size, .shuffle = true, .seed = opt.seed, .drop_last = true,
                               .device = opt.device, .prefetch = 4, .static_buffers = opt.compile == "cudagraphs"});

  tg::manual_seed(opt.seed);
  std::shared_ptr<tg::nn::Module> model = digits::make_model(opt.model, kFeatures, kClasses);
  model->to(opt.device);
  tg::optim::Adam optimizer(model->parameters(), {.lr = opt.lr});

  // The loss (forward; its backward is compiled with it) and the optimizer step, compiled or eager.
  std::function<tg::Tensor(const tg::Tensor&, const tg::Tensor&)> loss_fn;
  // The epoch's running loss is summed on the device by the loss function itself (one tensor for the
  // whole run, zeroed per epoch), so compiled runs add it inside their graph.
  tg::Tensor loss_sum = tg::zeros({}, {.device = opt.device});
  auto eager_loss = [m = model.get(), &loss_sum](const tg::Tensor& x, const tg::Tensor& y) {
    tg::Tensor loss = tg::cross_entropy((*m)(x), y);
    loss_sum.add_(loss.detach());
    return loss;
  };
  std::shared_ptr<tg::Compiled<decltype(eager_loss)>> compiled_loss;
  std::unique_ptr<tg::optim::CompiledStep> compiled_step;
  if (opt.compile == "none") {
    loss_fn = eager_loss;
  } else {
    const tg::CompileOptions co{.backend = opt.compile};
    compiled_loss = std::make_shared<tg::Compiled<decltype(eager_loss)>>(eager_loss, co);
    loss_fn = [f = compiled_loss](const tg::Tensor& x, const tg::Tensor& y) { return (*f)(x, y); };
    compiled_step = std::make_unique<tg::optim::CompiledStep>(optimizer, co);
  }

  int first_epoch = 1;
  if (!opt.resume.empty()) {
    first_epoch = load_checkpoint(opt.resume, *model, optimizer) + 1;
    std::printf("resumed from %s after epoch %d\n", opt.resume.c_str(), first_epoch - 1);
  }

  std::printf("digits: %lld train / %lld held-out samples, device %s, compile %s\n%s\n",
              static_cast<long long>(n_train), static_cast<long long>(n - n_train), opt.device.str().c_str(),
              opt.compile.c_str(), model->to_string().c_str());
  const bool live = isatty(fileno(stdout)) != 0;
  const int64_t batches = loader.num_batches();
  constexpr int kWarmupSteps = 3;  // tracing, warm-up and recording happen in the first steps
  // Steps are timed as a training loop runs them: nothing waits for the device between steps (the
  // loss is summed on the device and read once per epoch), so host work and device work overlap.
  // The clock runs from the end of the warm-up steps to the end of each epoch, the device
  // synchronized at both ends; evaluation and checkpoints between epochs are not timed (in a
  // terminal, the progress bar reads the loss every 8 steps).
  auto sync = [&] {
    if (opt.device.is_cuda()) tg::cuda::synchronize(opt.device.index);
  };
  using Clock = std::chrono::steady_clock;
  const auto run_start = Clock::now();
  Clock::time_point timed_from;
  double warmup_ms = 0;
  double step_us_total = 0;
  int64_t steps = 0, timed_steps = 0;
  double acc = 0;

  for (int epoch = first_epoch; epoch <= opt.epochs; ++epoch) {
    loader.start_epoch(epoch);
    loss_sum.zero_();
    int64_t b = 0;
    if (steps >= kWarmupSteps) timed_from = Clock::now();
    while (auto batch = loader.next()) {
      tg::Tensor loss = loss_fn((*batch)[0], (*batch)[1]);
      optimizer.zero_grad();
      loss.backward();
      if (compiled_step) {
        compiled_step->step();
      } else {
        optimizer.step();
      }
      ++b;
      if (++steps == kWarmupSteps) {
        sync();
        timed_from = Clock::now();
        warmup_ms = std::chrono::duration<double, std::milli>(timed_from - run_start).count();
      } else if (steps > kWarmupSteps) {
        ++timed_steps;
      }
      if (live && b % 8 == 0) draw_bar(live, epoch, opt.epochs, b, batches, loss_sum.item<float>() / static_cast<double>(b), "");
    }
    sync();
    if (steps > kWarmupSteps) step_us_total += std::chrono::duration<double, std::micro>(Clock::now() - timed_from).count();
    acc = accuracy(*model, x_test, y_test);
    char tail[64];
    std::snprintf(tail, sizeof tail, "  held-out acc %.2f%%\n", 100.0 * acc);
    const double epoch_loss = loss_sum.item<float>() / static_cast<double>(batches);
    draw_bar(live, epoch, opt.epochs, batches, batches, epoch_loss, tail);
    writer.add_scalar("train/loss", static_cast<float>(epoch_loss), epoch);
    writer.add_scalar("test/accuracy", static_cast<float>(acc), epoch);
    loss_curve.x.push_back(epoch);
    loss_curve.y.push_back(epoch_loss);
    if (!opt.save.empty()) save_checkpoint(opt.save, *model, optimizer, epoch);
  }
  if (first_epoch > opt.epochs) acc = accuracy(*model, x_test, y_test);

  const auto correct = static_cast<int64_t>(acc * static_cast<double>(y_test.numel()) + 0.5);
  std::printf("held-out accuracy: %.2f%% (%lld/%lld)\n", 100.0 * acc, static_cast<long long>(correct),
              static_cast<long long>(y_test.numel()));
  std::printf("first %d steps (%s): %.1f ms\n", kWarmupSteps,
              compiled_loss ? "compile: trace, warm-up, record" : "warm-up", warmup_ms);
  if (timed_steps > 0) {
    std::printf("mean step time: %.1f us over %lld steps (batch, forward, loss, backward, Adam step; %s, compile %s)\n",
                step_us_total / static_cast<double>(timed_steps), static_cast<long long>(timed_steps),
                opt.device.str().c_str(), opt.compile.c_str());
  }
  if (compiled_loss && steps > 0) {
    for (const auto& [name, c] : {std::pair<const char*, const tg::graphs::CompileCounters*>{"forward+backward",
                                                                                              &compiled_loss->counters()},
                                  {"optimizer", &compiled_step->counters()}}) {
      std::printf("%s: compilations %d, recompiles %d, compiled calls %d, graphs captured %d, replays %d, "
                  "eager fallbacks %d\n",
                  name, c->compilations, c->recompiles, c->compiled_calls, c->graphs_captured, c->replays,
                  c->eager_fallbacks);
      for (const auto& r : c->fallback_reasons) std::printf("  fallback: %s\n", r.c_str());
      for (const auto& r : c->recompile_reasons) std::printf("  recompile: %s\n", r.c_str());
      for (const auto& [r, k] : c->cudagraph_skips) std::printf("  not captured (%d): %s\n", k, r.c_str());
    }
  }
  writer.flush();
  const std::string svg = opt.logdir + "/loss.svg";
  tg::write_svg_plot(svg, {loss_curve}, {.title = "train_digits", .x_label = "epoch", .y_label = "cross-entropy"});
  std::printf("event files: %s; loss curve: %s\n", opt.logdir.c_str(), svg.c_str());
  if (acc < opt.target) {
    std::fprintf(stderr, "held-out accuracy %.2f%% is below the %.0f%% target\n", 100.0 * acc, 100.0 * opt.target);
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
