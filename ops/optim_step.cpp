#include "ops/optim_step.h"

#include <cmath>

#include "ops/dispatch.h"

#ifdef TG_WITH_CUDA
#include "ops/cuda/optim_step.h"
#endif

namespace tg {
namespace {

// The inputs of a fused Adam step, as five lists of n tensors laid end to end.
struct AdamLists {
  size_t n;
  const Tensor* params;
  const Tensor* grads;
  const Tensor* exp_avgs;
  const Tensor* exp_avg_sqs;
  const Tensor* steps;
};

AdamLists split_lists(const TensorList& in) {
  const size_t n = in.size() / 5;
  return {n, in.data(), in.data() + n, in.data() + 2 * n, in.data() + 3 * n, in.data() + 4 * n};
}

#ifdef TG_WITH_CUDA
TensorList slice(const TensorList& in, size_t first, size_t n) {
  return TensorList(in.begin() + static_cast<std::ptrdiff_t>(first),
                    in.begin() + static_cast<std::ptrdiff_t>(first + n));
}
#endif

// adam_step_: writes params, exp_avgs, exp_avg_sqs and steps (inputs 0..n-1, 2n..5n-1).
class AdamStepOp final : public Op {
 public:
  AdamStepOp(size_t n, AdamStepOptions options) : options_(options) {
    schema_.name = "adam_step_";
    schema_.flags = kInPlace | kNonDifferentiable;
    schema_.mutates = 0;
    for (size_t i = 1; i < n; ++i) schema_.also_mutates.push_back(static_cast<int>(i));
    for (size_t i = 2 * n; i < 5 * n; ++i) schema_.also_mutates.push_back(static_cast<int>(i));
  }
  const OpSchema& schema() const override { return schema_; }

  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(!in.empty() && in.size() % 5 == 0, "[adam_step_] expected five lists of equal length, got ",
             in.size(), " tensors");
    const AdamLists l = split_lists(in);
    const Tensor& first = l.params[0];
    TG_CHECK(is_floating(first.dtype()), "[adam_step_] expected floating parameters, got ",
             dtype_name(first.dtype()));
    for (size_t i = 0; i < l.n; ++i) {
      const Tensor& p = l.params[i];
      const Tensor* same_shape[] = {&l.grads[i], &l.exp_avgs[i], &l.exp_avg_sqs[i]};
      const char* names[] = {"grad", "exp_avg", "exp_avg_sq"};
      for (size_t k = 0; k < 3; ++k) {
        TG_CHECK(same_shape[k]->defined() && same_shape[k]->sizes() == p.sizes(), "[adam_step_] ", names[k], " ",
                 i, " has shape ", same_shape[k]->defined() ? shape_str(same_shape[k]->sizes()) : "undefined",
                 ", expected the shape of parameter ", i, " ", shape_str(p.sizes()));
      }
      const Tensor* all[] = {&p, &l.grads[i], &l.exp_avgs[i], &l.exp_avg_sqs[i], &l.steps[i]};
      for (const Tensor* t : all) {
        TG_CHECK(t->dtype() == first.dtype() && t->device() == first.device(), "[adam_step_] tensors of parameter ", i,
                 " are ", dtype_name(t->dtype()), " on ", t->device().str(), ", expected ", dtype_name(first.dtype()),
                 " on ", first.device().str(), " like parameter 0");
        TG_CHECK(t->is_contiguous(), "[adam_step_] tensors of parameter ", i, " must be contiguous, got strides ",
                 shape_str(t->strides()));
      }
      TG_CHECK(l.steps[i].numel() == 1, "[adam_step_] step ", i, " must hold one count, got shape ",
               shape_str(l.steps[i].sizes()));
    }
    std::vector<TensorMeta> out;
    for (int k : mutated_inputs(schema_)) out.push_back(meta_of(in[static_cast<size_t>(k)]));
    return out;
  }

  void eval(const TensorList& in, TensorList& /*out*/) const override {
    const AdamLists l = split_lists(in);
#ifdef TG_WITH_CUDA
    if (l.params[0].is_cuda()) {
      cuda::adam_step(slice(in, 0, l.n), slice(in, l.n, l.n), slice(in, 2 * l.n, l.n), slice(in, 3 * l.n, l.n),
                      slice(in, 4 * l.n, l.n), options_);
      return;
    }
#endif
    const AdamStepOptions& o = options_;
    TG_DISPATCH_FLOATING(l.params[0].dtype(), "adam_step_", [&] {
      for (size_t i = 0; i < l.n; ++i) {
        scalar_t* p = l.params[i].data_ptr<scalar_t>();
        const scalar_t* g = l.grads[i].data_ptr<scalar_t>();
        scalar_t* m = l.exp_avgs[i].data_ptr<scalar_t>();
        scalar_t* v = l.exp_avg_sqs[i].data_ptr<scalar_t>();
        scalar_t* step = l.steps[i].data_ptr<scalar_t>();
        const double t = static_cast<double>(*step) + 1.0;
        *step = static_cast<scalar_t>(t);
        const double bias1 = 1.0 - std::pow(o.beta1, t);
        const double bias2_sqrt = std::sqrt(1.0 - std::pow(o.beta2, t));
        const int64_t numel = l.params[i].numel();
        for (int64_t j = 0; j < numel; ++j) {
          double grad = g[j];
          double param = p[j];
          if (o.decoupled) param *= 1.0 - o.lr * o.weight_decay;
          else grad += o.weight_decay * param;
          const double mj = o.beta1 * m[j] + (1.0 - o.beta1) * grad;
          const double vj = o.beta2 * v[j] + (1.0 - o.beta2) * grad * grad;
          m[j] = static_cast<scalar_t>(mj);
          v[j] = static_cast<scalar_t>(vj);
          p[j] = static_cast<scalar_t>(param - o.lr / bias1 * mj / (std::sqrt(vj) / bias2_sqrt + o.eps));
        }
      }
    });
  }

  std::string attrs() const override {
    return "lr=" + std::to_string(options_.lr) + ", betas=(" + std::to_string(options_.beta1) + ", " +
           std::to_string(options_.beta2) + "), eps=" + std::to_string(options_.eps) +
           ", weight_decay=" + std::to_string(options_.weight_decay) + (options_.decoupled ? ", decoupled" : "");
  }

 private:
  OpSchema schema_;
  AdamStepOptions options_;
};

}  // namespace

void adam_step_(const TensorList& params, const TensorList& grads, const TensorList& exp_avgs,
                const TensorList& exp_avg_sqs, const TensorList& steps, const AdamStepOptions& options) {
  const size_t n = params.size();
  TG_CHECK(n > 0, "[adam_step_] expected at least one parameter");
  TG_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && steps.size() == n,
           "[adam_step_] expected ", n, " grads, exp_avgs, exp_avg_sqs and steps (one per parameter), got ",
           grads.size(), ", ", exp_avgs.size(), ", ", exp_avg_sqs.size(), " and ", steps.size());
  TensorList in;
  in.reserve(5 * n);
  for (const TensorList* list : {&params, &grads, &exp_avgs, &exp_avg_sqs, &steps})
    in.insert(in.end(), list->begin(), list->end());
  dispatch(std::make_shared<const AdamStepOp>(n, options), std::move(in));
}

}  // namespace tg
