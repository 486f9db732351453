// The cache of built attention graphs and the steps every graph shares (flash_attention_graph.h).
#include "ops/attention/cuda/flash_attention_graph.h"

#include <cstring>
#include <mutex>
#include <sstream>

#include "ops/core/cuda/cudnn_context.h"
#include "ops/factory/factory.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"
#include "tensor/shape.h"

namespace tg::cuda {
namespace flash {
namespace {

std::mutex g_mutex;
std::unordered_map<std::string, std::shared_ptr<const Built>> g_cache;

fe::DataType_t fe_type(DType dtype) {
  TG_CHECK(dtype == kBFloat16 || dtype == kFloat16, "[flash_attention] cuDNN's fused attention takes float16 or ",
           "bfloat16, got ", dtype_name(dtype));
  return dtype == kBFloat16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
}

void key_part(std::ostringstream& k, const TensorMeta& m) { k << shape_str(m.sizes) << shape_str(m.strides) << '|'; }

}  // namespace

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

std::shared_ptr<const Built> cached(const std::string& shape_key, int device,
                                    const std::function<void(fe::graph::Graph&)>& make) {
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

}  // namespace flash

void clear_flash_attention_plans() {
  std::lock_guard<std::mutex> lock(flash::g_mutex);
  flash::g_cache.clear();
}

}  // namespace tg::cuda
