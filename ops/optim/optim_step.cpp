#include "ops/optim/optim_step.h"

#include <cmath>
#include <initializer_list>

#include "ops/core/dispatch.h"
#include "ops/core/widen.h"

#ifdef TG_WITH_CUDA
#include "ops/optim/cuda/optim_step.h"
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

// The device scalars each op can read in place of its options, in input order (bit k of an op's
// mask: slot k is an input).
const std::vector<const char*> kAdamScalars = {"lr", "beta1", "beta2", "eps", "weight_decay"};
const std::vector<const char*> kSgdScalars = {"lr", "momentum", "dampening", "weight_decay"};

size_t count_bits(unsigned mask) {
  size_t n = 0;
  for (; mask != 0; mask &= mask - 1) ++n;
  return n;
}

// The mask of the defined tensors among `scalars`.
unsigned scalar_mask(std::initializer_list<const Tensor*> scalars) {
  unsigned mask = 0, bit = 1;
  for (const Tensor* t : scalars) {
    if (t->defined()) mask |= bit;
    bit <<= 1;
  }
  return mask;
}

// A fused step's inputs: its lists, then its skip flag when it has one, then the device scalars of
// the slots in its mask.
struct StepInputs {
  TensorList lists;
  Tensor skip_if;
  std::vector<Tensor> scalars;  // one per slot; undefined where the option's value is used
};

StepInputs split_inputs(const TensorList& in, bool skip_flag, unsigned mask, size_t slots) {
  const size_t extras = (skip_flag ? 1 : 0) + count_bits(mask);
  StepInputs s{slice(in, 0, in.size() - extras), Tensor(), std::vector<Tensor>(slots)};
  size_t k = in.size() - extras;
  if (skip_flag) s.skip_if = in[k++];
  for (size_t j = 0; j < slots; ++j)
    if (mask & (1u << j)) s.scalars[j] = in[k++];
  return s;
}

std::string scalar_str(const Tensor& t) {
  return t.defined() ? std::string(dtype_name(t.dtype())) + " of shape " + shape_str(t.sizes()) + " on " +
                           t.device().str()
                     : std::string("an undefined tensor");
}

// split_inputs, after checking the trailing scalars: the skip flag is one float32 value and each
// device scalar (named by `names`) one float32 or float64 value, all on the parameters' device.
StepInputs checked_inputs(const char* op, const TensorList& in, bool skip_flag, unsigned mask,
                          const std::vector<const char*>& names) {
  const size_t extras = (skip_flag ? 1 : 0) + count_bits(mask);
  TG_CHECK(in.size() > extras, "[", op, "] expected parameter lists before the skip flag and the device scalars");
  StepInputs s = split_inputs(in, skip_flag, mask, names.size());
  const Device device = in[0].device();
  if (skip_flag) {
    const Tensor& flag = s.skip_if;
    TG_CHECK(flag.defined() && flag.numel() == 1 && flag.dtype() == kFloat32 && flag.device() == device, "[", op,
             "] skip_if must be one float32 value on ", device.str(), ", got ", scalar_str(flag));
  }
  for (size_t j = 0; j < names.size(); ++j) {
    if (!(mask & (1u << j))) continue;
    const Tensor& t = s.scalars[j];
    TG_CHECK(t.defined() && t.numel() == 1 && (t.dtype() == kFloat32 || t.dtype() == kFloat64) &&
                 t.device() == device,
             "[", op, "] ", names[j], " must be one float32 or float64 value on ", device.str(), ", got ",
             scalar_str(t));
  }
  return s;
}

// The value a CPU kernel uses: the tensor's when there is one, else the option's.
double scalar_value(const Tensor& t, double option) {
  if (!t.defined()) return option;
  return t.dtype() == kFloat64 ? *t.data_ptr<double>() : static_cast<double>(*t.data_ptr<float>());
}

// One attr: the option's value, or "<tensor>" where the kernels read it from a device scalar.
std::string scalar_attr(const char* name, double value, unsigned mask, unsigned slot) {
  return std::string(name) + "=" + ((mask & (1u << slot)) ? std::string("<tensor>") : std::to_string(value));
}

// adam_step_: writes params, exp_avgs, exp_avg_sqs and steps (inputs 0..n-1, 2n..5n-1).
class AdamStepOp final : public Op {
 public:
  AdamStepOp(size_t n, AdamStepOptions options, bool skip_flag, unsigned scalars)
      : schema_(fused_step_schema("adam_step_", n, {0, 2, 3, 4})),
        options_(options),
        skip_flag_(skip_flag),
        scalars_(scalars) {}
  const OpSchema& schema() const override { return schema_; }

  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const TensorList lists = checked_inputs("adam_step_", in, skip_flag_, scalars_, kAdamScalars).lists;
    check_lists("adam_step_", lists, 5, {"param", "grad", "exp_avg", "exp_avg_sq", "step"}, 4);
    const AdamLists l = split_lists(lists);
    for (size_t i = 0; i < l.n; ++i)
      TG_CHECK(l.steps[i].numel() == 1 && l.steps[i].dtype() == kFloat32, "[adam_step_] step ", i,
               " must be one float32 count, got ", dtype_name(l.steps[i].dtype()), " of shape ",
               shape_str(l.steps[i].sizes()));
    return written_metas(schema_, in);
  }

  void eval(const TensorList& in, TensorList& out) const override {
    const StepInputs s = split_inputs(in, skip_flag_, scalars_, kAdamScalars.size());
    const AdamLists l = split_lists(s.lists);
#ifdef TG_WITH_CUDA
    if (l.params[0].is_cuda()) {  // the kernels compute 16-bit floats in float32 themselves
      cuda::adam_step(slice(in, 0, l.n), slice(in, l.n, l.n), slice(in, 2 * l.n, l.n), slice(in, 3 * l.n, l.n),
                      slice(in, 4 * l.n, l.n), options_, s.skip_if,
                      AdamStepScalars{s.scalars[0], s.scalars[1], s.scalars[2], s.scalars[3], s.scalars[4]});
      return;
    }
#endif
    if (eval_widened(*this, in, out)) return;  // 16-bit floats compute in float32
    if (s.skip_if.defined() && s.skip_if.item<float>() != 0.f) return;
    AdamStepOptions o = options_;
    o.lr = scalar_value(s.scalars[0], o.lr);
    o.beta1 = scalar_value(s.scalars[1], o.beta1);
    o.beta2 = scalar_value(s.scalars[2], o.beta2);
    o.eps = scalar_value(s.scalars[3], o.eps);
    o.weight_decay = scalar_value(s.scalars[4], o.weight_decay);
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
    const AdamStepOptions& o = options_;
    return scalar_attr("lr", o.lr, scalars_, 0) + ", " + scalar_attr("beta1", o.beta1, scalars_, 1) + ", " +
           scalar_attr("beta2", o.beta2, scalars_, 2) + ", " + scalar_attr("eps", o.eps, scalars_, 3) + ", " +
           scalar_attr("weight_decay", o.weight_decay, scalars_, 4) + (o.decoupled ? ", decoupled" : "") +
           (skip_flag_ ? ", skip_if" : "");
  }

 private:
  OpSchema schema_;
  AdamStepOptions options_;
  bool skip_flag_;
  unsigned scalars_;  // bit k: kAdamScalars[k] is read from a device scalar
};


// sgd_step_: writes params (inputs 0..n-1) and, with momentum, the buffers (inputs 2n..3n-1).
class SgdStepOp final : public Op {
 public:
  SgdStepOp(size_t n, SgdStepOptions options, bool skip_flag, unsigned scalars)
      : schema_(options.momentum != 0.0 ? fused_step_schema("sgd_step_", n, {0, 2})
                                        : fused_step_schema("sgd_step_", n, {0})),
        options_(options),
        skip_flag_(skip_flag),
        scalars_(scalars) {}
  const OpSchema& schema() const override { return schema_; }

  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const size_t lists = options_.momentum != 0.0 ? 3 : 2;
    check_lists("sgd_step_", checked_inputs("sgd_step_", in, skip_flag_, scalars_, kSgdScalars).lists, lists,
                {"param", "grad", "momentum_buffer"}, lists);
    return written_metas(schema_, in);
  }

  void eval(const TensorList& in, TensorList& out) const override {
    const bool momentum = options_.momentum != 0.0;
    const StepInputs s = split_inputs(in, skip_flag_, scalars_, kSgdScalars.size());
    const size_t n = s.lists.size() / (momentum ? 3 : 2);
#ifdef TG_WITH_CUDA
    if (in[0].is_cuda()) {  // the kernels compute 16-bit floats in float32 themselves
      cuda::sgd_step(slice(in, 0, n), slice(in, n, n), momentum ? slice(in, 2 * n, n) : TensorList{}, options_,
                     s.skip_if, SgdStepScalars{s.scalars[0], s.scalars[1], s.scalars[2], s.scalars[3]});
      return;
    }
#endif
    if (eval_widened(*this, in, out)) return;  // 16-bit floats compute in float32
    if (s.skip_if.defined() && s.skip_if.item<float>() != 0.f) return;
    SgdStepOptions o = options_;
    o.lr = scalar_value(s.scalars[0], o.lr);
    o.momentum = scalar_value(s.scalars[1], o.momentum);
    o.dampening = scalar_value(s.scalars[2], o.dampening);
    o.weight_decay = scalar_value(s.scalars[3], o.weight_decay);
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
    const SgdStepOptions& o = options_;
    return scalar_attr("lr", o.lr, scalars_, 0) + ", " + scalar_attr("momentum", o.momentum, scalars_, 1) + ", " +
           scalar_attr("dampening", o.dampening, scalars_, 2) + ", " +
           scalar_attr("weight_decay", o.weight_decay, scalars_, 3) + (o.nesterov ? ", nesterov" : "") +
           (skip_flag_ ? ", skip_if" : "");
  }

 private:
  OpSchema schema_;
  SgdStepOptions options_;
  bool skip_flag_;
  unsigned scalars_;  // bit k: kSgdScalars[k] is read from a device scalar
};

}  // namespace

void sgd_step_(const TensorList& params, const TensorList& grads, const TensorList& momentum_buffers,
               const SgdStepOptions& options, const Tensor& skip_if, const SgdStepScalars& scalars) {
  const size_t n = params.size();
  const bool momentum = options.momentum != 0.0;
  TG_CHECK(n > 0, "[sgd_step_] expected at least one parameter");
  TG_CHECK(grads.size() == n && momentum_buffers.size() == (momentum ? n : 0), "[sgd_step_] expected ", n,
           " grads and ", momentum ? n : 0, " momentum buffers, got ", grads.size(), " and ",
           momentum_buffers.size());
  TensorList in;
  in.reserve(3 * n + 5);
  for (const TensorList* list : {&params, &grads, &momentum_buffers}) in.insert(in.end(), list->begin(), list->end());
  if (skip_if.defined()) in.push_back(skip_if);
  const unsigned mask = scalar_mask({&scalars.lr, &scalars.momentum, &scalars.dampening, &scalars.weight_decay});
  for (const Tensor* t : {&scalars.lr, &scalars.momentum, &scalars.dampening, &scalars.weight_decay})
    if (t->defined()) in.push_back(*t);
  dispatch(std::make_shared<const SgdStepOp>(n, options, skip_if.defined(), mask), std::move(in));
}

void sgd_step_(const TensorList& params, const TensorList& grads, const TensorList& momentum_buffers,
               const SgdStepOptions& options, const Tensor& skip_if, const Tensor& lr) {
  SgdStepScalars scalars;
  scalars.lr = lr;
  sgd_step_(params, grads, momentum_buffers, options, skip_if, scalars);
}

void adam_step_(const TensorList& params, const TensorList& grads, const TensorList& exp_avgs,
                const TensorList& exp_avg_sqs, const TensorList& steps, const AdamStepOptions& options,
                const Tensor& skip_if, const AdamStepScalars& scalars) {
  const size_t n = params.size();
  TG_CHECK(n > 0, "[adam_step_] expected at least one parameter");
  TG_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && steps.size() == n,
           "[adam_step_] expected ", n, " grads, exp_avgs, exp_avg_sqs and steps (one per parameter), got ",
           grads.size(), ", ", exp_avgs.size(), ", ", exp_avg_sqs.size(), " and ", steps.size());
  TensorList in;
  in.reserve(5 * n + 6);
  for (const TensorList* list : {&params, &grads, &exp_avgs, &exp_avg_sqs, &steps})
    in.insert(in.end(), list->begin(), list->end());
  if (skip_if.defined()) in.push_back(skip_if);
  const std::initializer_list<const Tensor*> slots = {&scalars.lr, &scalars.beta1, &scalars.beta2, &scalars.eps,
                                                      &scalars.weight_decay};
  const unsigned mask = scalar_mask(slots);
  for (const Tensor* t : slots)
    if (t->defined()) in.push_back(*t);
  dispatch(std::make_shared<const AdamStepOp>(n, options, skip_if.defined(), mask), std::move(in));
}

void adam_step_(const TensorList& params, const TensorList& grads, const TensorList& exp_avgs,
                const TensorList& exp_avg_sqs, const TensorList& steps, const AdamStepOptions& options,
                const Tensor& skip_if, const Tensor& lr) {
  AdamStepScalars scalars;
  scalars.lr = lr;
  adam_step_(params, grads, exp_avgs, exp_avg_sqs, steps, options, skip_if, scalars);
}

}  // namespace tg
