// cuDNN's fused scaled-dot-product attention, backward: the graph for dQ, dK and dV, and the call.
#include "ops/attention/cuda/flash_attention_graph.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {
namespace flash {

// The backward graph for gradients (and dO) laid out as the forward's output (bshd_strides).
std::shared_ptr<const Built> backward_graph(const TensorMeta& q, const TensorMeta& k, const TensorMeta& v,
                                            const TensorMeta* bias, const FlashAttentionParams& p) {
  return cached(cache_key("bwd", q, k, v, bias, p), q.device.index, [&](fe::graph::Graph& g) {
    set_common(g, q.dtype);
    const TensorMeta o = output_meta(q, v.sizes[3]), st = stats_meta(q);
    auto Q = tensor(g, "Q", kQ, q), K = tensor(g, "K", kK, k), V = tensor(g, "V", kV, v);
    auto O = tensor(g, "O", kO, o), dO = tensor(g, "dO", kDO, o);
    auto Stats = tensor(g, "Stats", kStats, st);
    Stats->set_data_type(fe::DataType_t::FLOAT);
    auto a = fe::graph::SDPA_backward_attributes().set_name("flash_attention_backward");
    set_mask(g, a, bias, p);
    auto [dQ, dK, dV] = g.sdpa_backward(Q, K, V, O, dO, Stats, a);
    const std::pair<std::shared_ptr<fe::graph::Tensor_attributes>, std::pair<Uid, const TensorMeta*>> grads[] = {
        {dQ, {kDQ, &q}}, {dK, {kDK, &k}}, {dV, {kDV, &v}}};
    for (const auto& [t, what] : grads) {
      const TensorMeta m = output_meta(*what.second, what.second->sizes[3]);
      t->set_output(true).set_uid(what.first).set_dim(std::vector<int64_t>(m.sizes.begin(), m.sizes.end()))
          .set_stride(strides_for(m.sizes, m.strides));
    }
  });
}

}  // namespace flash

using namespace flash;

void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& do_,
                              const Tensor& stats, const Tensor& bias, const Tensor& rng,
                              const FlashAttentionParams& p, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  DeviceGuard guard(q.device().index);
  TensorMeta bm;
  const auto b = backward_graph(meta_of(q), meta_of(k), meta_of(v), bias_meta(bias, bm), p);
  check_built(*b, "flash_attention_backward");
  std::unordered_map<int64_t, void*> pack{{kQ, q.raw_data()},   {kK, k.raw_data()},       {kV, v.raw_data()},
                                         {kO, o.raw_data()},   {kDO, do_.raw_data()},    {kStats, stats.raw_data()},
                                         {kDQ, dq.raw_data()}, {kDK, dk.raw_data()},     {kDV, dv.raw_data()}};
  if (bias.defined()) pack.emplace(kBias, bias.raw_data());
  add_rng(pack, rng, p);
  execute(*b, pack, q.device(), "flash_attention_backward");
}

}  // namespace tg::cuda
