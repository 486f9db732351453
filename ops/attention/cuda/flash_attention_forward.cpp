// cuDNN's fused scaled-dot-product attention, forward: the graph for O and the logsumexp
// statistics, whether cuDNN supports a call, and the call itself.
#include "ops/attention/cuda/flash_attention_graph.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {
namespace flash {
namespace {

std::shared_ptr<const Built> forward_graph(const TensorMeta& q, const TensorMeta& k, const TensorMeta& v,
                                           const TensorMeta* bias, const FlashAttentionParams& p) {
  return cached(cache_key("fwd", q, k, v, bias, p), q.device.index, [&](fe::graph::Graph& g) {
    set_common(g, q.dtype);
    auto Q = tensor(g, "Q", kQ, q), K = tensor(g, "K", kK, k), V = tensor(g, "V", kV, v);
    auto a = fe::graph::SDPA_attributes().set_name("flash_attention").set_generate_stats(true);
    set_mask(g, a, bias, p);
    auto [O, Stats] = g.sdpa(Q, K, V, a);
    const TensorMeta o = output_meta(q, v.sizes[3]), st = stats_meta(q);
    O->set_output(true).set_uid(kO).set_dim(std::vector<int64_t>(o.sizes.begin(), o.sizes.end()))
        .set_stride(strides_for(o.sizes, o.strides));
    Stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT)
        .set_dim(std::vector<int64_t>(st.sizes.begin(), st.sizes.end()))
        .set_stride(strides_for(st.sizes, st.strides));
  });
}

}  // namespace
}  // namespace flash

using namespace flash;

bool flash_attention_supported(const TensorMeta& q, const TensorMeta& k, const TensorMeta& v, const TensorMeta* bias,
                               const FlashAttentionParams& p, bool backward, std::string* why) {
  if (cudnnGetVersion() < 90000) {
    if (why) *why = "cuDNN " + std::to_string(cudnnGetVersion()) + " is older than 9.0";
    return false;
  }
  auto f = forward_graph(q, k, v, bias, p);
  if (f->graph && backward) f = backward_graph(q, k, v, bias, p);
  if (!f->graph && why) *why = f->error;
  return f->graph != nullptr;
}

void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                             const FlashAttentionParams& p, const Tensor& rng, const Tensor& o, const Tensor& stats) {
  DeviceGuard guard(q.device().index);
  TensorMeta bm;
  const auto b = forward_graph(meta_of(q), meta_of(k), meta_of(v), bias_meta(bias, bm), p);
  check_built(*b, "flash_attention");
  std::unordered_map<int64_t, void*> pack{{kQ, q.raw_data()}, {kK, k.raw_data()},   {kV, v.raw_data()},
                                         {kO, o.raw_data()}, {kStats, stats.raw_data()}};
  if (bias.defined()) pack.emplace(kBias, bias.raw_data());
  add_rng(pack, rng, p);
  execute(*b, pack, q.device(), "flash_attention");
}

}  // namespace tg::cuda
