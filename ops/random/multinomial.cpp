// multinomial: with replacement, inverse-CDF sampling over each row's running sums (in double);
// without, the exponential race of ops/random/multinomial_draw.h ranked by topk's order (ties: lower index
// first). A random op: it reserves its Philox blocks when made, so running the same op object again
// repeats its draws and graphs redraw (Op::redraw) on every run.
#include "ops/random/multinomial.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "ops/core/dispatch.h"
#include "ops/index/row_layout.h"
#include "ops/index/topk_key.h"
#include "ops/random/multinomial_draw.h"
#include "ops/random/philox.h"
#include "ops/random/random.h"

#ifdef TG_WITH_CUDA
#include "ops/random/cuda/multinomial.h"
#endif

namespace tg {
namespace {

constexpr int64_t kMaxCategories = int64_t{1} << 24;  // PyTorch's bound (float32's consecutive integers)

// The two words element e of a draw uses (see ops/random/multinomial_draw.h); consecutive elements share
// a block, which is computed once for both.
class DrawWords {
 public:
  explicit DrawWords(PhiloxState state) : state_(state) {}
  std::pair<uint32_t, uint32_t> operator()(int64_t e) {
    if (e / 2 != block_) {
      block_ = e / 2;
      words_ = philox_block(state_.seed, state_.offset + static_cast<uint64_t>(block_));
    }
    const size_t first = static_cast<size_t>(2 * (e % 2));
    return {words_[first], words_[first + 1]};
  }

 private:
  PhiloxState state_;
  int64_t block_ = -1;
  PhiloxCounter words_{};
};

template <typename T>
void multinomial_cpu(const Tensor& x, int64_t m, bool replacement, PhiloxState state, const Tensor& out) {
  const int64_t d = x.dim() - 1;
  const int64_t n = x.size(d);
  const int64_t rows = x.numel() / n;
  const RowLayout in = row_layout(x, d, "multinomial");
  const T* src = x.data_ptr<T>();
  int64_t* dst = out.data_ptr<int64_t>();
  std::vector<double> w(static_cast<size_t>(n));
  DrawWords draw_words(state);
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = src + in.row_offset(r);
    bool any_positive = false;
    for (int64_t j = 0; j < n; ++j) {
      const double v = static_cast<double>(static_cast<acc_type<T>>(row[j * in.dim_stride]));
      TG_CHECK(v >= 0 && !std::isinf(v),
               "[multinomial] probability tensor contains either inf, nan or element < 0 (row ", r, ", category ", j,
               ")");
      any_positive = any_positive || v > 0;
      w[static_cast<size_t>(j)] = v;
    }
    TG_CHECK(any_positive, "[multinomial] invalid multinomial distribution (sum of probabilities <= 0) in row ", r);
    int64_t* out_row = dst + r * m;
    if (replacement) {
      for (int64_t j = 1; j < n; ++j) w[static_cast<size_t>(j)] += w[static_cast<size_t>(j - 1)];
      for (int64_t s = 0; s < m; ++s) {
        const auto [hi, lo] = draw_words(r * m + s);
        out_row[s] = sample_from_cdf(w.data(), n, uniform_double(hi, lo));
      }
      continue;
    }
    // Keys in float for every dtype but double, as the CUDA kernels rank them.
    using KeyT = std::conditional_t<std::is_same_v<T, double>, double, float>;
    std::vector<std::pair<topk_key_t<KeyT>, int64_t>> keys(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      const auto [hi, lo] = draw_words(r * n + j);
      const KeyT key = static_cast<KeyT>(race_key(w[static_cast<size_t>(j)], hi, lo));
      keys[static_cast<size_t>(j)] = {topk_rank_key(key, /*largest=*/true), j};
    }
    std::partial_sort(keys.begin(), keys.begin() + m, keys.end());
    for (int64_t s = 0; s < m; ++s) out_row[s] = keys[static_cast<size_t>(s)].second;
  }
}

class MultinomialOp final : public Op {
 public:
  // Reserves `blocks` Philox blocks of the global generator (what the input's shape needs).
  MultinomialOp(int64_t num_samples, bool replacement, uint64_t blocks)
      : num_samples_(num_samples), replacement_(replacement), blocks_(blocks),
        state_(Generator::global().reserve(blocks)) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "multinomial", .flags = kRandom | kNonDifferentiable};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    TG_CHECK(x.dim() == 1 || x.dim() == 2, "[multinomial] prob_dist must be 1 or 2 dim, got shape ",
             shape_str(x.sizes()));
    TG_CHECK(is_floating(x.dtype()), "[multinomial] only supports floating-point dtypes for input, got ",
             dtype_name(x.dtype()));
    TG_CHECK(num_samples_ > 0, "[multinomial] cannot sample n_sample <= 0 samples, got num_samples = ", num_samples_);
    const int64_t n = x.size(-1);
    TG_CHECK(replacement_ || num_samples_ <= n, "[multinomial] cannot sample n_sample > prob_dist.size(-1) samples ",
             "without replacement: num_samples = ", num_samples_, ", but there are ", n, " categories");
    TG_CHECK(n <= kMaxCategories, "[multinomial] number of categories cannot exceed 2^24, got ", n);
    const int64_t rows = x.dim() == 2 ? x.size(0) : 1;
    TG_CHECK(n > 0 || rows == 0, "[multinomial] invalid multinomial distribution (sum of probabilities <= 0): ",
             "the input of shape ", shape_str(x.sizes()), " has no categories");
    TG_CHECK(needed_blocks(x.sizes(), num_samples_, replacement_) <= blocks_,
             "[multinomial] internal error: the op reserved ", blocks_, " Philox blocks for another input shape");
    const Shape sizes = x.dim() == 2 ? Shape{rows, num_samples_} : Shape{num_samples_};
    return single_output(contiguous_meta(sizes, kInt64, x.device()));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const Tensor& x = in[0];
    if (out[0].numel() == 0) return;
#ifdef TG_WITH_CUDA
    if (x.is_cuda()) {
      cuda::multinomial(x, num_samples_, replacement_, state_, out[0]);
      return;
    }
#endif
    TG_CHECK(x.is_cpu(), "[multinomial] unsupported device ", x.device().str());
    TG_DISPATCH_FLOATING(x.dtype(), "multinomial",
                         [&] { multinomial_cpu<scalar_t>(x, num_samples_, replacement_, state_, out[0]); });
  }
  SaveSpec saves() const override { return {.inputs = false}; }
  std::shared_ptr<const Op> redraw() const override {
    return std::make_shared<const MultinomialOp>(num_samples_, replacement_, blocks_);
  }
  std::string attrs() const override {
    return detail::concat("num_samples=", num_samples_, ", replacement=", replacement_ ? "true" : "false",
                          ", seed=", state_.seed, ", offset=", state_.offset);
  }

  // Philox blocks a draw from weights of shape `sizes` uses (0 for shapes infer() rejects).
  static uint64_t needed_blocks(const Shape& sizes, int64_t num_samples, bool replacement) {
    if (sizes.empty() || sizes.size() > 2 || num_samples <= 0) return 0;
    const int64_t rows = sizes.size() == 2 ? sizes[0] : 1;
    const int64_t per_row = replacement ? num_samples : sizes.back();
    return (static_cast<uint64_t>(rows) * static_cast<uint64_t>(per_row) + 1) / 2;
  }

 private:
  int64_t num_samples_;
  bool replacement_;
  uint64_t blocks_;
  PhiloxState state_;
};

}  // namespace

Tensor multinomial(const Tensor& input, int64_t num_samples, bool replacement) {
  const uint64_t blocks = MultinomialOp::needed_blocks(input.sizes(), num_samples, replacement);
  return call_op<MultinomialOp>({input}, num_samples, replacement, blocks);
}

}  // namespace tg
