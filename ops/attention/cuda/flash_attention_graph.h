// The cudnn-frontend graphs behind the fused attention ops (flash attention: no score matrix in
// memory), shared by flash_attention_forward.cpp and flash_attention_backward.cpp. A graph is built
// once per (shapes, strides, dtype, mask kind, scale, device) and cached with its workspace size, so
// repeated calls, and calls under CUDA graph capture, only execute: the workspace is a tensor from
// the caching allocator (so a capture sees no hidden allocation) and nothing waits on the host. Plans
// are not kept on disk: a plan that cudnn-frontend deserialized ran without writing its outputs
// (Note [Warm start]). Only these three files include cudnn-frontend, whose headers alone take
// about 20 s to compile: CMake gives them one precompiled header.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <cudnn_frontend.h>

#include "ops/attention/flash_attention_kernels.h"
#include "tensor/tensor_meta.h"

namespace tg::cuda::flash {

namespace fe = cudnn_frontend;

// Tensor ids of the variant packs.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kBias, kDO, kDQ, kDK, kDV, kSeed, kOffset };

// A built graph and its workspace, or why cuDNN would not build it.
struct Built {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
  std::string error;
};

// A graph tensor for operand `m`, named and numbered for the variant pack.
std::shared_ptr<fe::graph::Tensor_attributes> tensor(fe::graph::Graph& g, const char* name, Uid uid,
                                                     const TensorMeta& m);
// The cache key of one direction's graph ("fwd" or "bwd") for these operands and parameters.
std::string cache_key(const char* direction, const TensorMeta& q, const TensorMeta& k, const TensorMeta& v,
                      const TensorMeta* bias, const FlashAttentionParams& p);
// The cached graph under `shape_key` on `device`, built by `make` on first use.
std::shared_ptr<const Built> cached(const std::string& shape_key, int device,
                                    const std::function<void(fe::graph::Graph&)>& make);
// The io, intermediate and compute dtypes of an attention graph over `dtype` operands.
void set_common(fe::graph::Graph& g, DType dtype);
// Layout and dtype of the logsumexp statistics of q's rows: float32 [B, H, L, 1].
TensorMeta stats_meta(const TensorMeta& q);
// `like` with last dim `last`, laid out as the fused ops write their outputs (bshd_strides).
TensorMeta output_meta(const TensorMeta& like, int64_t last);
// Strides as cuDNN wants them (dims of size 1 get the stride a packed layout would give them).
std::vector<int64_t> strides_for(const Shape& sizes, const Shape& strides);
// Errors naming `op` when cuDNN would not build the graph.
void check_built(const Built& b, const char* op);
// Runs a built graph on the pointers of `pack`, with a workspace from the caching allocator.
void execute(const Built& b, std::unordered_map<int64_t, void*>& pack, Device device, const char* op);
// The bias's metadata (kept in `storage`), or null without a bias.
const TensorMeta* bias_meta(const Tensor& bias, TensorMeta& storage);
// Adds the dropout's Philox seed and offset (rng, int64 [2] on the device) to the pack.
void add_rng(std::unordered_map<int64_t, void*>& pack, const Tensor& rng, const FlashAttentionParams& p);
// The backward graph for gradients (and dO) laid out as the forward's output (bshd_strides).
std::shared_ptr<const Built> backward_graph(const TensorMeta& q, const TensorMeta& k, const TensorMeta& v,
                                            const TensorMeta* bias, const FlashAttentionParams& p);

// The scale, causal mask, additive bias and dropout of SDPA_attributes or SDPA_backward_attributes.
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

}  // namespace tg::cuda::flash
