#include "ops/rnn/rnn_autocast.h"

#include "ops/core/autocast.h"
#include "ops/elementwise/copy.h"

namespace tg {

TensorList rnn_autocast_weights(const TensorList& weights) {
  TensorList cast;
  cast.reserve(weights.size());
  for (const Tensor& w : weights) cast.push_back(autocast::to_low(w, autocast::kCudaList));
  return cast;
}

Tensor rnn_autocast_state(const Tensor& t, const TensorList& weights) {
  if (!t.defined()) return t;
  if (autocast::active_for(t, autocast::kCudaList)) return autocast::to_low(t, autocast::kCudaList);
  if (!autocast::active_for(t, autocast::kCpuList) || !is_floating(t.dtype())) return t;
  for (const Tensor& w : weights)
    if (w.defined()) return w.dtype() == t.dtype() ? t : to(t, t.device(), w.dtype());
  return t;
}

}  // namespace tg
