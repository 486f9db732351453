#include "ops/optim_step.h"

#include <cmath>
#include <initializer_list>

#include "ops/dispatch.h"
#include "ops/widen.h"

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

// Validates `lists` lists of n tensors laid end to end in `in` (names[k] names list k; list 0 holds
// the parameters): lists below `shaped` match their parameter's shape and have its floating dtype,
// and every tensor is on the parameters' device and contiguous.
void check_lists(const char* op, const TensorList& in, size_t lists, const std::vector<const char*>& names,
                 size_t shaped) {
  TG_CHECK(!in.empty() && in.size() % lists == 0, "[", op, "] expected ", lists, " lists of equal length, got ",
           in.size(), " tensors");
  const size_t n = in.size() / lists;
  const Tensor& first = in[0];
  TG_CHECK(is_floating(first.dtype()), "[", op, "] expected floating parameters, got ", dtype_name(first.dtype()));
  for (size_t i = 0; i < n; ++i) {
    const Tensor& p = in[i];
    for (size_t k = 0; k < lists; ++k) {
      const Tensor& t = in[k * n + i];
      TG_CHECK(t.defined(), "[", op, "] ", names[k], " ", i, " is undefined");
      if (k < shaped) {
        TG_CHECK(t.sizes() == p.sizes(), "[", op, "] ", names[k], " ", i, " has shape ", shape_str(t.sizes()),
                 ", expected the shape of parameter ", i, " ", shape_str(p.sizes()));
      }
      TG_CHECK((k >= shaped || t.dtype() == first.dtype()) && t.device() == first.device(), "[", op,
               "] tensors of parameter ", i, " are ", dtype_name(t.dtype()), " on ", t.device().str(), ", expected ",
               dtype_name(k < shaped ? first.dtype() : t.dtype()), " on ", first.device().str(), " like parameter 0");
      TG_CHECK(t.is_contiguous(), "[", op, "] tensors of parameter ", i, " must be contiguous, got strides ",
               shape_str(t.strides()));
    }
  }
}

// The schema of a fused step over n parameters that writes lists `written` (list k: inputs k*n..k*n+n-1).
OpSchema fused_step_schema(std::string_view name, size_t n, std::initializer_list<size_t> written) {
  OpSchema s{.name = name, .flags = kInPlace | kNonDifferentiable, .mutates = 0};
  for (size_t list : written)
    for (size_t i = list * n; i < (list + 1) * n; ++i)
      if (i != 0) s.also_mutates.push_back(static_cast<int>(i));
  return s;
}

// The metadata of every input `schema` writes, in order.
std::vector<TensorMeta> written_metas(const OpSchema& schema, const TensorList& in) {
  std::vector<TensorMeta> out;
  for (int k : mutated_inputs(schema)) out.push_back(meta_of(in[static_cast<size_t>(k)]));
  return out;
}

TensorList slice(const TensorList& in, size_t first, size_t n) {
  return TensorList(in.begin() + static_cast<std::ptrdiff_t>(first),
                    in.begin() + static_cast<std::ptrdiff_t>(first + n));
}

// A fused step's inputs: its lists, then its skip flag and its learning rate when it has them.
struct StepInputs {
  TensorList lists;
  Tensor skip_if;
  Tensor lr;
};

StepInputs split_inputs(const TensorList& in, bool skip_flag, bool lr_tensor) {
  const size_t extras = (skip_flag ? 1 : 0) + (lr_tensor ? 1 : 0);
  StepInputs s{slice(in, 0, in.size() - extras), Tensor(), Tensor()};
  size_t k = in.size() - extras;
  if (skip_flag) s.skip_if = in[k++];
  if (lr_tensor) s.lr = in[k++];
  return s;
}

std::string scalar_str(const Tensor& t) {
  return t.defined() ? std::string(dtype_name(t.dtype())) + " of shape " + shape_str(t.sizes()) + " on " +
                           t.device().str()
                     : std::string("an undefined tensor");
}

// split_inputs, after checking the trailing scalars: the skip flag is one float32 value and the
// learning rate one float32 or float64 value, both on the parameters' device.
StepInputs checked_inputs(const char* op, const TensorList& in, bool skip_flag, bool lr_tensor) {
  const size_t extras = (skip_flag ? 1 : 0) + (lr_tensor ? 1 : 0);
  TG_CHECK(in.size() > extras, "[", op, "] expected parameter lists before the skip flag and the learning rate");
  StepInputs s = split_inputs(in, skip_flag, lr_tensor);
  const Device device = in[0].device();
  if (skip_flag) {
    const Tensor& flag = s.skip_if;
    TG_CHECK(flag.defined() && flag.numel() == 1 && flag.dtype() == kFloat32 && flag.device() == device, "[", op,
             "] skip_if must be one float32 value on ", device.str(), ", got ", scalar_str(flag));
  }
  if (lr_tensor) {
    const Tensor& lr = s.lr;
    TG_CHECK(lr.defined() && lr.numel() == 1 && (lr.dtype() == kFloat32 || lr.dtype() == kFloat64) &&
                 lr.device() == device,
             "[", op, "] lr must be one float32 or float64 value on ", device.str(), ", got ", scalar_str(lr));
  }
  return s;
}

// The learning rate a CPU kernel uses: the tensor's value when there is one, else the option's.
double lr_value(const Tensor& lr, double option) {
  if (!lr.defined()) return option;
  return lr.dtype() == kFloat64 ? *lr.data_ptr<double>() : static_cast<double>(*lr.data_ptr<float>());
}

// The attrs of the learning rate: the option's value, or where the kernels read it from.
std::string lr_attr(double lr, bool lr_tensor) { return lr_tensor ? "lr=<tensor>" : "lr=" + std::to_string(lr); }

// adam_step_: writes params, exp_avgs, exp_avg_sqs and steps (inputs 0..n-1, 2n..5n-1).
class AdamStepOp final : public Op {
 public:
  AdamStepOp(size_t n, AdamStepOptions options, bool skip_flag, bool lr_tensor)
      : schema_(fused_step_schema("adam_step_", n, {0, 2, 3, 4})),
        options_(options),
        skip_flag_(skip_flag),
        lr_tensor_(lr_tensor) {}
  const OpSchema& schema() const override { return schema_; }

  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const TensorList lists = checked_inputs("adam_step_", in, skip_flag_, lr_tensor_).lists;
    check_lists("adam_step_", lists, 5, {"param", "grad", "exp_avg", "exp_avg_sq", "step"}, 4);
    const AdamLists l = split_lists(lists);
    for (size_t i = 0; i < l.n; ++i)
      TG_CHECK(l.steps[i].numel() == 1 && l.steps[i].dtype() == kFloat32, "[adam_step_] step ", i,
               " must be one float32 count, got ", dtype_name(l.steps[i].dtype()), " of shape ",
               shape_str(l.steps[i].sizes()));
    return written_metas(schema_, in);
  }

  void eval(const TensorList& in, TensorList& out) const override {
    const StepInputs s = split_inputs(in, skip_flag_, lr_tensor_);
    const AdamLists l = split_lists(s.lists);
#ifdef TG_WITH_CUDA
    if (l.params[0].is_cuda()) {  // the kernels compute 16-bit floats in float32 themselves
      cuda::adam_step(slice(in, 0, l.n), slice(in, l.n, l.n), slice(in, 2 * l.n, l.n), slice(in, 3 * l.n, l.n),
                      slice(in, 4 * l.n, l.n), options_, s.skip_if, s.lr);
      return;
    }
#endif
    if (eval_widened(*this, in, out)) return;  // 16-bit floats compute in float32
    if (s.skip_if.defined() && s.skip_if.item<float>() != 0.f) return;
    AdamStepOptions o = options_;
    o.lr = lr_value(s.lr, o.lr);
    TG_DISPATCH_FLOATING(l.params[0].dtype(), "adam_step_", [&] {
      for (size_t i = 0; i < l.n; ++i) {
        scalar_t* p = l.params[i].data_ptr<scalar_t>();
        const scalar_t* g = l.grads[i].data_ptr<scalar_t>();
        scalar_t* m = l.exp_avgs[i].data_ptr<scalar_t>();
        scalar_t* v = l.exp_avg_sqs[i].data_ptr<scalar_t>();
        float* step = l.steps[i].data_ptr<float>();
        const double t = static_cast<double>(*step) + 1.0;
        *step = static_cast<float>(t);
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
    return lr_attr(options_.lr, lr_tensor_) + ", betas=(" + std::to_string(options_.beta1) + ", " +
           std::to_string(options_.beta2) + "), eps=" + std::to_string(options_.eps) +
           ", weight_decay=" + std::to_string(options_.weight_decay) + (options_.decoupled ? ", decoupled" : "") +
           (skip_flag_ ? ", skip_if" : "");
  }

 private:
  OpSchema schema_;
  AdamStepOptions options_;
  bool skip_flag_;
  bool lr_tensor_;
};


// sgd_step_: writes params (inputs 0..n-1) and, with momentum, the buffers (inputs 2n..3n-1).
class SgdStepOp final : public Op {
 public:
  SgdStepOp(size_t n, SgdStepOptions options, bool skip_flag, bool lr_tensor)
      : schema_(options.momentum != 0.0 ? fused_step_schema("sgd_step_", n, {0, 2})
                                        : fused_step_schema("sgd_step_", n, {0})),
        options_(options),
        skip_flag_(skip_flag),
        lr_tensor_(lr_tensor) {}
  const OpSchema& schema() const override { return schema_; }

  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const size_t lists = options_.momentum != 0.0 ? 3 : 2;
    check_lists("sgd_step_", checked_inputs("sgd_step_", in, skip_flag_, lr_tensor_).lists, lists,
                {"param", "grad", "momentum_buffer"}, lists);
    return written_metas(schema_, in);
  }

  void eval(const TensorList& in, TensorList& out) const override {
    const bool momentum = options_.momentum != 0.0;
    const StepInputs s = split_inputs(in, skip_flag_, lr_tensor_);
    const size_t n = s.lists.size() / (momentum ? 3 : 2);
#ifdef TG_WITH_CUDA
    if (in[0].is_cuda()) {  // the kernels compute 16-bit floats in float32 themselves
      cuda::sgd_step(slice(in, 0, n), slice(in, n, n), momentum ? slice(in, 2 * n, n) : TensorList{}, options_,
                     s.skip_if, s.lr);
      return;
    }
#endif
    if (eval_widened(*this, in, out)) return;  // 16-bit floats compute in float32
    if (s.skip_if.defined() && s.skip_if.item<float>() != 0.f) return;
    SgdStepOptions o = options_;
    o.lr = lr_value(s.lr, o.lr);
    TG_DISPATCH_FLOATING(in[0].dtype(), "sgd_step_", [&] {
      for (size_t i = 0; i < n; ++i) {
        scalar_t* p = in[i].data_ptr<scalar_t>();
        const scalar_t* g = in[n + i].data_ptr<scalar_t>();
        scalar_t* buf = momentum ? in[2 * n + i].data_ptr<scalar_t>() : nullptr;
        const int64_t numel = in[i].numel();
        for (int64_t j = 0; j < numel; ++j) {
          double d = static_cast<double>(g[j]) + o.weight_decay * static_cast<double>(p[j]);
          if (momentum) {
            const double b = o.momentum * static_cast<double>(buf[j]) + (1.0 - o.dampening) * d;
            buf[j] = static_cast<scalar_t>(b);
            d = o.nesterov ? d + o.momentum * b : b;
          }
          p[j] = static_cast<scalar_t>(static_cast<double>(p[j]) - o.lr * d);
        }
      }
    });
  }

  std::string attrs() const override {
    return lr_attr(options_.lr, lr_tensor_) + ", momentum=" + std::to_string(options_.momentum) +
           ", dampening=" + std::to_string(options_.dampening) + ", weight_decay=" +
           std::to_string(options_.weight_decay) + (options_.nesterov ? ", nesterov" : "") +
           (skip_flag_ ? ", skip_if" : "");
  }

 private:
  OpSchema schema_;
  SgdStepOptions options_;
  bool skip_flag_;
  bool lr_tensor_;
};

}  // namespace

void sgd_step_(const TensorList& params, const TensorList& grads, const TensorList& momentum_buffers,
               const SgdStepOptions& options, const Tensor& skip_if, const Tensor& lr) {
  const size_t n = params.size();
  const bool momentum = options.momentum != 0.0;
  TG_CHECK(n > 0, "[sgd_step_] expected at least one parameter");
  TG_CHECK(grads.size() == n && momentum_buffers.size() == (momentum ? n : 0), "[sgd_step_] expected ", n,
           " grads and ", momentum ? n : 0, " momentum buffers, got ", grads.size(), " and ",
           momentum_buffers.size());
  TensorList in;
  in.reserve(3 * n);
  for (const TensorList* list : {&params, &grads, &momentum_buffers}) in.insert(in.end(), list->begin(), list->end());
  if (skip_if.defined()) in.push_back(skip_if);
  if (lr.defined()) in.push_back(lr);
  dispatch(std::make_shared<const SgdStepOp>(n, options, skip_if.defined(), lr.defined()), std::move(in));
}

void adam_step_(const TensorList& params, const TensorList& grads, const TensorList& exp_avgs,
                const TensorList& exp_avg_sqs, const TensorList& steps, const AdamStepOptions& options,
                const Tensor& skip_if, const Tensor& lr) {
  const size_t n = params.size();
  TG_CHECK(n > 0, "[adam_step_] expected at least one parameter");
  TG_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && steps.size() == n,
           "[adam_step_] expected ", n, " grads, exp_avgs, exp_avg_sqs and steps (one per parameter), got ",
           grads.size(), ", ", exp_avgs.size(), ", ", exp_avg_sqs.size(), " and ", steps.size());
  TensorList in;
  in.reserve(5 * n);
  for (const TensorList* list : {&params, &grads, &exp_avgs, &exp_avg_sqs, &steps})
    in.insert(in.end(), list->begin(), list->end());
  if (skip_if.defined()) in.push_back(skip_if);
  if (lr.defined()) in.push_back(lr);
  dispatch(std::make_shared<const AdamStepOp>(n, options, skip_if.defined(), lr.defined()), std::move(in));
}

}  // namespace tg
