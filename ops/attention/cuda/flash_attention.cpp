// cuDNN 9's fused scaled-dot-product attention (flash attention: no score matrix in memory) through
// cudnn-frontend's graph API. A graph is built once per (shapes, strides, dtype, mask kind, scale,
// device) and cached with its workspace size, so repeated calls, and calls under CUDA graph
// capture, only execute: the workspace is a tensor from the caching allocator (so a capture sees
// no hidden allocation) and nothing waits on the host. Plans are not kept on disk: a plan that
// cudnn-frontend deserialized ran without writing its outputs (Note [Warm start]).
#include <cudnn.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <cudnn_frontend.h>

#include "ops/attention/flash_attention_kernels.h"
#include "ops/core/cuda/cudnn_context.h"
#include "ops/factory/factory.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"
#include "tensor/grad_mode.h"
#include "tensor/shape.h"

namespace tg::cuda {
namespace {

namespace fe = cudnn_frontend;

// Tensor ids of the variant packs.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kBias, kDO, kDQ, kDK, kDV, kSeed, kOffset };

// A built graph and its workspace, or why cuDNN would not build it.
struct Built {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
  std::string error;
};

std::mutex g_mutex;
std::unordered_map<std::string, std::shared_ptr<const Built>> g_cache;

fe::DataType_t fe_type(DType dtype) {
  TG_CHECK(dtype == kBFloat16 || dtype == kFloat16, "[flash_attention] cuDNN's fused attention takes float16 or ",
           "bfloat16, got ", dtype_name(dtype));
  return dtype == kBFloat16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
}

// cuDNN checks every stride, even of a dim of size 1, whose stride says nothing: such a dim gets
// the stride a packed layout would give it.
std::vector<int64_t> strides_for(const Shape& sizes, const Shape& strides) {
  std::vector<int64_t> s(strides.begin(), strides.end());
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i)
    if (sizes[static_cast<size_t>(i)] == 1) s[static_cast<size_t>(i)] = s[static_cast<size_t>(i) + 1] * sizes[static_cast<size_t>(i) + 1];
  return s;
}

std::shared_ptr<fe::graph::Tensor_attributes> tensor(fe::graph::Graph& g, const char* name, Uid uid,
                                                     const TensorMeta& m) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(std::vector<int64_t>(m.sizes.begin(), m.sizes.end()))
                      .set_stride(strides_for(m.sizes, m.strides)));
}

void key_part(std::ostringstream& k, const TensorMeta& m) { k << shape_str(m.sizes) << shape_str(m.strides) << '|'; }

std::string cache_key(const char* direction, const TensorMeta& q, const TensorMeta& k, const TensorMeta& v,
                      const TensorMeta* bias, const FlashAttentionParams& p) {
  std::ostringstream s;
  float scale = static_cast<float>(p.scale);
  uint32_t bits = 0;
  std::memcpy(&bits, &scale, sizeof bits);
  s << direction << '|' << dtype_name(q.dtype) << '|' << (p.causal ? "causal" : "full")
    << '|' << bits << '|' << p.dropout_p << '|';
  key_part(s, q);
  key_part(s, k);
  key_part(s, v);
  if (bias != nullptr) key_part(s, *bias);
  return s.str();
}

// The cached graph under `key` on `device`, built by `make` on first use.
template <typename Make>
std::shared_ptr<const Built> cached(const std::string& shape_key, int device, Make make) {
  const std::string key = std::to_string(device) + "|" + shape_key;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_cache.find(key);
    if (it != g_cache.end()) return it->second;
  }
  TG_CHECK(!current_stream_capturing(), "[flash_attention] a new attention shape was met during CUDA graph ",
           "capture; cuDNN builds its graph outside a capture (run the call once before capturing)");
  DeviceGuard guard(device);
  cudnnHandle_t handle = cudnn_handle(device);
  auto b = std::make_shared<Built>();
  b->graph = std::make_shared<fe::graph::Graph>();
  make(*b->graph);
  auto step = [&](fe::error_t e, const char* what) {
    if (!e.is_good() && b->error.empty()) b->error = std::string(what) + ": " + e.get_message();
    return b->error.empty();
  };
  (void)(step(b->graph->validate(), "validate") && step(b->graph->build_operation_graph(handle), "operation graph") &&
         step(b->graph->create_execution_plans({fe::HeurMode_t::A}), "execution plans") &&
         step(b->graph->check_support(handle), "support") && step(b->graph->build_plans(handle), "build plans") &&
         step(b->graph->get_workspace_size(b->workspace), "workspace size"));
  if (!b->error.empty()) b->graph.reset();
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_cache.emplace(key, std::move(b)).first->second;
}

void set_common(fe::graph::Graph& g, DType dtype) {
  g.set_io_data_type(fe_type(dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
}

template <typename Attrs>
void set_mask(fe::graph::Graph& g, Attrs& a, const TensorMeta* bias, const FlashAttentionParams& p) {
  a.set_attn_scale(static_cast<float>(p.scale));
  if (p.causal) a.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
  if (bias != nullptr) a.set_bias(tensor(g, "bias", kBias, *bias));
  if (p.dropout_p > 0.0) {
    auto scalar = [&](const char* name, Uid uid) {
      return g.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim({1, 1, 1, 1})
                          .set_stride({1, 1, 1, 1})
                          .set_data_type(fe::DataType_t::INT64));
    };
    a.set_dropout(static_cast<float>(p.dropout_p), scalar("seed", kSeed), scalar("offset", kOffset));
  }
}

TensorMeta stats_meta(const TensorMeta& q) {
  return contiguous_meta({q.sizes[0], q.sizes[1], q.sizes[2], 1}, kFloat32, q.device);
}

TensorMeta output_meta(const TensorMeta& like, int64_t last) {
  TensorMeta m = like;
  m.sizes[3] = last;
  m.strides = bshd_strides(m.sizes);
  m.offset = 0;
  return m;
}

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

// The gradients' layouts when nothing else is asked for: each laid out as the forward's output
// (bshd_strides of its own operand).
struct GradLayouts {
  TensorMeta dq, dk, dv;
};
GradLayouts own_layouts(const TensorMeta& q, const TensorMeta& k, const TensorMeta& v) {
  return {output_meta(q, q.sizes[3]), output_meta(k, k.sizes[3]), output_meta(v, v.sizes[3])};
}

// The backward graph for dO laid out as the forward's output (bshd_strides) and the gradients in
// the given layouts (own_layouts, or views of one packed buffer).
std::shared_ptr<const Built> backward_graph(const TensorMeta& q, const TensorMeta& k, const TensorMeta& v,
                                            const TensorMeta* bias, const FlashAttentionParams& p,
                                            const GradLayouts& grads) {
  std::string key = cache_key("bwd", q, k, v, bias, p);
  for (const TensorMeta* m : {&grads.dq, &grads.dk, &grads.dv}) key += shape_str(m->strides) + '|';
  return cached(key, q.device.index, [&](fe::graph::Graph& g) {
    set_common(g, q.dtype);
    const TensorMeta o = output_meta(q, v.sizes[3]), st = stats_meta(q);
    auto Q = tensor(g, "Q", kQ, q), K = tensor(g, "K", kK, k), V = tensor(g, "V", kV, v);
    auto O = tensor(g, "O", kO, o), dO = tensor(g, "dO", kDO, o);
    auto Stats = tensor(g, "Stats", kStats, st);
    Stats->set_data_type(fe::DataType_t::FLOAT);
    auto a = fe::graph::SDPA_backward_attributes().set_name("flash_attention_backward");
    set_mask(g, a, bias, p);
    auto [dQ, dK, dV] = g.sdpa_backward(Q, K, V, O, dO, Stats, a);
    const std::pair<std::shared_ptr<fe::graph::Tensor_attributes>, std::pair<Uid, const TensorMeta*>> outputs[] = {
        {dQ, {kDQ, &grads.dq}}, {dK, {kDK, &grads.dk}}, {dV, {kDV, &grads.dv}}};
    for (const auto& [t, what] : outputs) {
      const TensorMeta& m = *what.second;
      t->set_output(true).set_uid(what.first).set_dim(std::vector<int64_t>(m.sizes.begin(), m.sizes.end()))
          .set_stride(strides_for(m.sizes, m.strides));
    }
  });
}

void check_built(const Built& b, const char* op) {
  TG_CHECK(b.graph != nullptr, "[", op, "] cuDNN cannot run this attention: ", b.error);
}

void execute(const Built& b, std::unordered_map<int64_t, void*>& pack, Device device, const char* op) {
  // The workspace comes from the caching allocator: inside a capture, from the graph's private pool.
  Tensor ws;
  if (b.workspace > 0) ws = empty({(b.workspace + 7) / 8}, {.dtype = kFloat64, .device = device});
  cudnnHandle_t handle = cudnn_handle(device.index);
  fe::error_t e = b.graph->execute(handle, pack, ws.defined() ? ws.raw_data() : nullptr);
  TG_CHECK(e.is_good(), "[", op, "] cuDNN failed to run the fused attention: ", e.get_message());
}

const TensorMeta* bias_meta(const Tensor& bias, TensorMeta& storage) {
  if (!bias.defined()) return nullptr;
  storage = meta_of(bias);
  return &storage;
}

void add_rng(std::unordered_map<int64_t, void*>& pack, const Tensor& rng, const FlashAttentionParams& p) {
  if (p.dropout_p <= 0.0) return;
  TG_CHECK(rng.defined() && rng.dtype() == kInt64 && rng.numel() == 2, "[flash_attention] internal error: dropout ",
           "without its Philox state");
  pack.emplace(kSeed, rng.raw_data());
  pack.emplace(kOffset, static_cast<int64_t*>(rng.raw_data()) + 1);
}

}  // namespace

void clear_flash_attention_plans() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_cache.clear();
}

bool flash_attention_supported(const TensorMeta& q, const TensorMeta& k, const TensorMeta& v, const TensorMeta* bias,
                               const FlashAttentionParams& p, bool backward, std::string* why) {
  if (cudnnGetVersion() < 90000) {
    if (why) *why = "cuDNN " + std::to_string(cudnnGetVersion()) + " is older than 9.0";
    return false;
  }
  auto f = forward_graph(q, k, v, bias, p);
  if (f->graph && backward) f = backward_graph(q, k, v, bias, p, own_layouts(q, k, v));
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

void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& do_,
                              const Tensor& stats, const Tensor& bias, const Tensor& rng,
                              const FlashAttentionParams& p, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  DeviceGuard guard(q.device().index);
  TensorMeta bm;
  const TensorMeta qm = meta_of(q), km = meta_of(k), vm = meta_of(v);
  const GradLayouts own = own_layouts(qm, km, vm), given{meta_of(dq), meta_of(dk), meta_of(dv)};
  auto b = backward_graph(qm, km, vm, bias_meta(bias, bm), p, given);
  const bool own_strides = own.dq.strides == given.dq.strides && own.dk.strides == given.dk.strides &&
                           own.dv.strides == given.dv.strides;
  if (b->graph == nullptr && !own_strides) {
    // Gradients in a layout cuDNN does not write (views of a packed buffer): computed in their own
    // layouts ([B, L, H, D] in memory), then copied there.
    auto own_tensor = [&](const Tensor& like) {
      const Shape& s = like.sizes();
      return empty({s[0], s[2], s[1], s[3]}, {.dtype = like.dtype(), .device = like.device()}).transpose(1, 2);
    };
    const Tensor tq = own_tensor(dq), tk = own_tensor(dk), tv = own_tensor(dv);
    flash_attention_backward(q, k, v, o, do_, stats, bias, rng, p, tq, tk, tv);
    NoGradGuard no_grad;
    for (auto [target, source] : {std::pair{dq, tq}, std::pair{dk, tk}, std::pair{dv, tv}}) target.copy_(source);
    return;
  }
  check_built(*b, "flash_attention_backward");
  std::unordered_map<int64_t, void*> pack{{kQ, q.raw_data()},   {kK, k.raw_data()},       {kV, v.raw_data()},
                                         {kO, o.raw_data()},   {kDO, do_.raw_data()},    {kStats, stats.raw_data()},
                                         {kDQ, dq.raw_data()}, {kDK, dk.raw_data()},     {kDV, dv.raw_data()}};
  if (bias.defined()) pack.emplace(kBias, bias.raw_data());
  add_rng(pack, rng, p);
  execute(*b, pack, q.device(), "flash_attention_backward");
}

}  // namespace tg::cuda
