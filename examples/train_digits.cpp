// Trains a 64-128-10 MLP (or, with --model cnn, a small CNN) on the UCI handwritten digits (8x8 images,
// 1797 samples) and reports the held-out accuracy and the mean time of one training step.
//
//   train_digits [--device cpu|cuda] [--epochs N] [--data PATH] [--batch-size B] [--lr LR] [--seed S]
//                [--model mlp|cnn]
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

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
  int epochs = 20;
  std::string data = "data/digits.csv.gz";
  int batch_size = 64;
  double lr = 3e-3;
  uint64_t seed = 0;
  std::string model = "mlp";
};

[[noreturn]] void usage(const char* argv0, int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: %s [--device cpu|cuda] [--epochs N] [--data PATH] [--batch-size B] [--lr LR] [--seed S]\n"
               "       [--model mlp|cnn]\n",
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
    else if (flag == "--epochs") o.epochs = number<int>(flag, value);
    else if (flag == "--data") o.data = value;
    else if (flag == "--batch-size") o.batch_size = number<int>(flag, value);
    else if (flag == "--lr") o.lr = number<double>(flag, value);
    else if (flag == "--seed") o.seed = number<uint64_t>(flag, value);
    else if (flag == "--model") o.model = value;
    else usage(argv[0], 2);
  }
  if (o.epochs < 1 || o.batch_size < 1) usage(argv[0], 2);
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
                 "from Debian's python3-sklearn package into data/), or pass --data PATH.\n",
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

// A reproducible Fisher-Yates shuffle (std::shuffle's result differs between standard libraries).
void shuffle(std::vector<int64_t>& v, uint64_t& state) {
  for (size_t i = v.size(); i > 1; --i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(v[i - 1], v[(state >> 33) % i]);
  }
}

// Rows `idx` of the data set as device tensors.
std::pair<tg::Tensor, tg::Tensor> gather(const Digits& d, const std::vector<int64_t>& idx, tg::Device device) {
  std::vector<float> x;
  std::vector<int64_t> y;
  x.reserve(idx.size() * kFeatures);
  for (int64_t i : idx) {
    x.insert(x.end(), d.pixels.begin() + i * kFeatures, d.pixels.begin() + (i + 1) * kFeatures);
    y.push_back(d.labels[static_cast<size_t>(i)]);
  }
  const auto n = static_cast<int64_t>(idx.size());
  return {tg::from_vector(x, {n, kFeatures}).to(device), tg::from_vector(y, {n}).to(device)};
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
  const int64_t n = data.size();
  const int64_t n_train = n * 4 / 5;

  // Fixed-seed shuffle, then an 80/20 split.
  uint64_t rng = opt.seed * 2654435761ull + 12345;
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  shuffle(order, rng);
  const std::vector<int64_t> train_idx(order.begin(), order.begin() + n_train);
  const std::vector<int64_t> test_idx(order.begin() + n_train, order.end());
  auto [x_train, y_train] = gather(data, train_idx, opt.device);
  auto [x_test, y_test] = gather(data, test_idx, opt.device);

  tg::manual_seed(opt.seed);
  const auto model_ptr = digits::make_model(opt.model, kFeatures, kClasses);
  tg::nn::Sequential& model = *model_ptr;
  model.to(opt.device);
  tg::optim::Adam optimizer(model.parameters(), {.lr = opt.lr});

  std::printf("digits: %lld train / %lld held-out samples, device %s\n%s\n", static_cast<long long>(n_train),
              static_cast<long long>(n - n_train), opt.device.str().c_str(), model.to_string().c_str());
  const bool live = isatty(fileno(stdout)) != 0;
  const int64_t batches = (n_train + opt.batch_size - 1) / opt.batch_size;
  double step_us_total = 0;
  int64_t steps = 0;
  double acc = 0;

  for (int epoch = 1; epoch <= opt.epochs; ++epoch) {
    // One gather per epoch puts the shuffled rows in order; batches are then row slices (views).
    std::vector<int64_t> perm(static_cast<size_t>(n_train));
    for (int64_t i = 0; i < n_train; ++i) perm[static_cast<size_t>(i)] = i;
    shuffle(perm, rng);
    const tg::Tensor perm_t = tg::from_vector(perm, {n_train}).to(opt.device);
    const tg::Tensor xs = x_train.index_select(0, perm_t);
    const tg::Tensor ys = y_train.index_select(0, perm_t);
    double loss_sum = 0;
    for (int64_t b = 0; b < batches; ++b) {
      const int64_t start = b * opt.batch_size;
      const int64_t len = std::min<int64_t>(opt.batch_size, n_train - start);
      const tg::Tensor xb = xs.narrow(0, start, len);
      const tg::Tensor yb = ys.narrow(0, start, len);

      const auto t0 = std::chrono::steady_clock::now();
      tg::Tensor loss = tg::cross_entropy(model(xb), yb);
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      if (opt.device.is_cuda()) tg::cuda::synchronize(opt.device.index);
      step_us_total += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      ++steps;

      loss_sum += loss.item<float>();
      if (live) draw_bar(live, epoch, opt.epochs, b + 1, batches, loss_sum / static_cast<double>(b + 1), "");
    }
    acc = accuracy(model, x_test, y_test);
    char tail[64];
    std::snprintf(tail, sizeof tail, "  held-out acc %.2f%%\n", 100.0 * acc);
    draw_bar(live, epoch, opt.epochs, batches, batches, loss_sum / static_cast<double>(batches), tail);
  }

  const auto correct = static_cast<int64_t>(acc * static_cast<double>(y_test.numel()) + 0.5);
  std::printf("held-out accuracy: %.2f%% (%lld/%lld)\n", 100.0 * acc, static_cast<long long>(correct),
              static_cast<long long>(y_test.numel()));
  std::printf("mean step time: %.1f us over %lld steps (forward, loss, zero_grad, backward, Adam step; %s)\n",
              step_us_total / static_cast<double>(steps), static_cast<long long>(steps), opt.device.str().c_str());
  const double target = opt.model == "cnn" ? kCnnTargetAccuracy : kTargetAccuracy;
  if (acc < target) {
    std::fprintf(stderr, "held-out accuracy %.2f%% is below the %.0f%% target\n", 100.0 * acc, 100.0 * target);
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
