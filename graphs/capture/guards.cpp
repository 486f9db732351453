// See Note [Guards and recompiles] in docs/guards.md.
#include "graphs/capture/guards.h"

#include <sstream>

#include "ops/core/autocast.h"
#include "tensor/grad_mode.h"

namespace tg::graphs {
namespace {

int32_t alias_index(const TensorList& args, size_t i) {
  for (size_t j = 0; j < i; ++j)
    if (args[j].impl()->storage() == args[i].impl()->storage()) return static_cast<int32_t>(j);
  return -1;
}

std::string bool_str(bool b) { return b ? "true" : "false"; }

// What differs between a guard and a tensor, as " size mismatch: expected ..., got ..."; the caller
// prefixes the tensor's name (built only when a guard fails).
std::optional<std::string> compare(const ArgumentGuard& g, const Tensor& t) {
  if (t.sizes() != g.meta.sizes)
    return " size mismatch: expected " + shape_str(g.meta.sizes) + ", got " + shape_str(t.sizes());
  if (t.strides() != g.meta.strides)
    return " stride mismatch: expected " + shape_str(g.meta.strides) + ", got " + shape_str(t.strides());
  if (t.dtype() != g.meta.dtype)
    return " dtype mismatch: expected " + std::string(dtype_name(g.meta.dtype)) + ", got " +
           std::string(dtype_name(t.dtype()));
  if (t.device() != g.meta.device)
    return " device mismatch: expected " + g.meta.device.str() + ", got " + t.device().str();
  if (t.requires_grad() != g.requires_grad)
    return " requires_grad mismatch: expected " + bool_str(g.requires_grad) + ", got " + bool_str(t.requires_grad());
  return std::nullopt;
}

std::string captured_name(size_t i) { return "captured tensor 'lifted" + std::to_string(i) + "'"; }

}  // namespace

std::string host_value_str(const HostValue& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const int64_t* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const double* d = std::get_if<double>(&v)) {
    std::ostringstream os;
    os.precision(17);
    os << *d;
    return os.str();
  }
  return "'" + std::get<std::string>(v) + "'";
}

std::vector<std::string> input_display_names(size_t n, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(i < names.size() ? "input '" + names[i] + "'" : "input " + std::to_string(i));
  return out;
}

Guards Guards::capture(const TensorList& args, std::vector<std::string> names, std::vector<HostArgument> host) {
  Guards g;
  g.names_ = std::move(names);
  g.host_args_ = std::move(host);
  g.grad_enabled_ = is_grad_enabled();
  g.autocast_ = autocast_dtypes();
  for (size_t i = 0; i < args.size(); ++i)
    g.args_.push_back(ArgumentGuard{meta_of(args[i]), args[i].requires_grad(), alias_index(args, i)});
  return g;
}

std::shared_ptr<TensorImpl> CapturedGuard::lock() const {
  if (std::shared_ptr<TensorImpl> impl = tensor.lock()) return impl;
  std::shared_ptr<StorageImpl> memory = storage.lock();
  if (!memory) return nullptr;
  return std::make_shared<TensorImpl>(std::move(memory), meta.meta.sizes, meta.meta.strides, meta.meta.offset,
                                      meta.meta.dtype);
}

void Guards::add_captured(const TensorList& captured) {
  for (const Tensor& t : captured) {
    CapturedGuard g{t.impl_ptr(), ArgumentGuard{meta_of(t), t.requires_grad(), -1}, {}};
    // `captured` holds the only handle: one made inside the function (a detached parameter) that
    // dies with the trace. Its memory stands for it (see CapturedGuard).
    if (t.impl_ptr().use_count() == 1 && !t.requires_grad()) {
      g.tensor.reset();
      g.storage = t.impl()->storage();
    }
    captured_.push_back(std::move(g));
  }
}

void Guards::add_host_guards(std::vector<HostGuard> guards) {
  for (HostGuard& g : guards) host_.push_back(std::move(g));
}

TensorList Guards::lock_captured() const {
  TensorList out;
  out.reserve(captured_.size());
  for (const CapturedGuard& c : captured_) {
    std::shared_ptr<TensorImpl> impl = c.lock();
    TG_CHECK(impl != nullptr, "[compile] internal error: a captured tensor expired after its guard passed");
    out.emplace_back(std::move(impl));
  }
  return out;
}

std::string Guards::name(size_t i) const {
  return i < names_.size() ? names_[i] : "input " + std::to_string(i);
}

bool Guards::captured_alive() const {
  for (const CapturedGuard& c : captured_) {
    if (!c.lock()) return false;
  }
  return true;
}

std::optional<std::string> Guards::check(const TensorList& args, const std::vector<HostArgument>& host) const {
  if (host.size() != host_args_.size())
    return "expected " + std::to_string(host_args_.size()) + " non-tensor inputs, got " + std::to_string(host.size());
  for (size_t i = 0; i < host.size(); ++i)
    if (host[i].value != host_args_[i].value)
      return host_args_[i].name + " changed: expected " + host_value_str(host_args_[i].value) + ", got " +
             host_value_str(host[i].value);
  if (args.size() != args_.size())
    return "expected " + std::to_string(args_.size()) + " inputs, got " + std::to_string(args.size());
  if (is_grad_enabled() != grad_enabled_)
    return "grad mode mismatch: expected " + bool_str(grad_enabled_) + ", got " + bool_str(is_grad_enabled());
  if (autocast_dtypes() != autocast_)  // compared as dtypes: no string on the hot path
    return "autocast mismatch: expected " + autocast_state(autocast_) + ", got " + autocast_state();
  for (size_t i = 0; i < args.size(); ++i) {
    if (auto r = compare(args_[i], args[i])) return name(i) + *r;
    const int32_t alias = alias_index(args, i);
    if (alias != args_[i].alias_of) {
      // Reported as the guard that failed, in the style of "L['y'] is L['x']".
      if (args_[i].alias_of >= 0) return name(i) + " is " + name(static_cast<size_t>(args_[i].alias_of));
      return name(i) + " is not " + name(static_cast<size_t>(alias));
    }
  }
  for (size_t i = 0; i < captured_.size(); ++i) {
    std::shared_ptr<TensorImpl> impl = captured_[i].lock();
    // Only compiled code still refers to it: the caller's variable now names another tensor. (A
    // storage swapped under the same tensor needs no retrace: each call reads the tensor as it is,
    // and a CUDA graph re-records for the new address.)
    if (!impl) return captured_name(i) + " was replaced";
    if (auto r = compare(captured_[i].meta, Tensor(std::move(impl)))) return captured_name(i) + *r;
  }
  for (const HostGuard& h : host_)
    if (auto r = h.check()) return r;
  return std::nullopt;
}

}  // namespace tg::graphs
