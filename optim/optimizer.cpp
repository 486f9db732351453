// See Note [Fused optimizer steps] in docs/fused_optimizers.md.
#include "optim/optimizer.h"

#include <algorithm>

#include "autograd/zero_grad.h"
#include "ops/factory/factory.h"
#include "tensor/grad_mode.h"

namespace tg::optim {

Optimizer::Optimizer(TensorList params, double lr) : params_(std::move(params)) {
  set_lr(lr);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    TG_CHECK(p.defined(), "[optim] parameter ", i, " is an undefined tensor");
    TG_CHECK(p.is_leaf(), "[optim] can't optimize a non-leaf Tensor (parameter ", i, ")");
    TG_CHECK(p.is_floating_point() && p.requires_grad(), "[optim] parameter ", i,
             " must be a floating point tensor that requires grad, got dtype ", dtype_name(p.dtype()),
             p.requires_grad() ? "" : " with requires_grad=false");
    for (size_t j = 0; j < i; ++j)
      TG_CHECK(!params_[j].is_same(p), "[optim] parameter ", i, " appears twice (also at ", j, ")");
  }
}

bool Optimizer::skipped_on_host() const { return skip_if_.defined() && skip_if_.item<float>() != 0.f; }

void Optimizer::step() {
  TensorList grads;
  grads.reserve(params_.size());
  for (const Tensor& p : params_) grads.push_back(p.grad());
  update(grads);
}

void Optimizer::set_lr(double lr) {
  TG_CHECK(lr >= 0.0, "[optim] invalid learning rate: ", lr);
  lr_.set(lr);
}

void Optimizer::zero_grad(bool set_to_none) { tg::zero_grad(params_, set_to_none); }

std::vector<std::vector<size_t>> Optimizer::fused_groups(const TensorList& grads) const {
  std::vector<std::vector<size_t>> groups;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!grads[i].defined()) continue;
    auto same_kind = [&](const std::vector<size_t>& g) {
      return params_[g[0]].device() == params_[i].device() && params_[g[0]].dtype() == params_[i].dtype();
    };
    auto it = std::find_if(groups.begin(), groups.end(), same_kind);
    if (it == groups.end()) it = groups.insert(groups.end(), std::vector<size_t>{});
    it->push_back(i);
  }
  return groups;
}

bool Optimizer::fused_eagerly(const TensorList& grads) const {
  bool any = false;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!grads[i].defined()) continue;
    if (!params_[i].is_cuda() || !params_[i].is_contiguous()) return false;
    any = true;
  }
  return any;
}

Tensor& Optimizer::state_like(Tensor& state, const Tensor& p) {
  if (!state.defined()) {
    state = zeros_like(p);
  } else if (state.device() != p.device()) {
    state = state.to(p.device());
  }
  return state;
}

}  // namespace tg::optim
