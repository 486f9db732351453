#include "graphs/guards.h"

#include "autograd/grad_mode.h"

namespace tg::graphs {
namespace {

int32_t alias_index(const TensorList& args, size_t i) {
  for (size_t j = 0; j < i; ++j)
    if (args[j].impl()->storage() == args[i].impl()->storage()) return static_cast<int32_t>(j);
  return -1;
}

std::string bool_str(bool b) { return b ? "true" : "false"; }

std::optional<std::string> compare(const std::string& who, const ArgumentGuard& g, const Tensor& t) {
  if (t.sizes() != g.meta.sizes)
    return who + " size mismatch: expected " + shape_str(g.meta.sizes) + ", got " + shape_str(t.sizes());
  if (t.strides() != g.meta.strides)
    return who + " stride mismatch: expected " + shape_str(g.meta.strides) + ", got " + shape_str(t.strides());
  if (t.dtype() != g.meta.dtype)
    return who + " dtype mismatch: expected " + std::string(dtype_name(g.meta.dtype)) + ", got " +
           std::string(dtype_name(t.dtype()));
  if (t.device() != g.meta.device)
    return who + " device mismatch: expected " + g.meta.device.str() + ", got " + t.device().str();
  if (t.requires_grad() != g.requires_grad)
    return who + " requires_grad mismatch: expected " + bool_str(g.requires_grad) + ", got " +
           bool_str(t.requires_grad());
  return std::nullopt;
}

}  // namespace

Guards Guards::capture(const TensorList& args, const std::vector<std::string>& names) {
  Guards g;
  g.names_ = names;
  g.grad_enabled_ = is_grad_enabled();
  for (size_t i = 0; i < args.size(); ++i)
    g.args_.push_back(ArgumentGuard{meta_of(args[i]), args[i].requires_grad(), alias_index(args, i)});
  return g;
}

void Guards::add_captured(const TensorList& captured) {
  for (const Tensor& t : captured)
    captured_.push_back(CapturedGuard{t.impl_ptr(), ArgumentGuard{meta_of(t), t.requires_grad(), -1}});
}

void Guards::add_host_guards(std::vector<HostGuard> guards) {
  for (HostGuard& g : guards) host_.push_back(std::move(g));
}

TensorList Guards::lock_captured() const {
  TensorList out;
  out.reserve(captured_.size());
  for (const CapturedGuard& c : captured_) {
    std::shared_ptr<TensorImpl> impl = c.tensor.lock();
    TG_CHECK(impl != nullptr, "[compile] internal error: a captured tensor expired after its guard passed");
    out.emplace_back(std::move(impl));
  }
  return out;
}

std::string Guards::name(size_t i) const {
  return i < names_.size() ? "input '" + names_[i] + "'" : "input " + std::to_string(i);
}

std::optional<std::string> Guards::check(const TensorList& args) const {
  if (args.size() != args_.size())
    return "expected " + std::to_string(args_.size()) + " inputs, got " + std::to_string(args.size());
  if (is_grad_enabled() != grad_enabled_)
    return "grad mode mismatch: expected " + bool_str(grad_enabled_) + ", got " + bool_str(is_grad_enabled());
  for (size_t i = 0; i < args.size(); ++i) {
    if (auto r = compare(name(i), args_[i], args[i])) return r;
    const int32_t alias = alias_index(args, i);
    if (alias != args_[i].alias_of) {
      // Reported as the guard that failed, in the style of "L['y'] is L['x']".
      if (args_[i].alias_of >= 0) return name(i) + " is " + name(static_cast<size_t>(args_[i].alias_of));
      return name(i) + " is not " + name(static_cast<size_t>(alias));
    }
  }
  for (size_t i = 0; i < captured_.size(); ++i) {
    const std::string who = "captured tensor 'lifted" + std::to_string(i) + "'";
    std::shared_ptr<TensorImpl> impl = captured_[i].tensor.lock();
    // Only compiled code still refers to it: the caller's variable now names another tensor. (A
    // storage swapped under the same tensor needs no retrace: each call reads the tensor as it is,
    // and a CUDA graph re-records for the new address.)
    if (!impl) return who + " was replaced";
    if (auto r = compare(who, captured_[i].meta, Tensor(std::move(impl)))) return r;
  }
  for (const HostGuard& h : host_)
    if (auto r = h.check()) return r;
  return std::nullopt;
}

}  // namespace tg::graphs
