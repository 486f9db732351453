// Stacked LSTM/GRU layers on CUDA through cuDNN's RNN API (cudnnRNNForward, cudnnRNNBackwardData_v8,
// cudnnRNNBackwardWeights_v8). What cuDNN tells about a geometry (algorithm, weight-space layout,
// workspace and reserve sizes) is asked once and cached, so a call under graph capture only packs the
// weights and launches. float16 and bfloat16 layers run in their dtype with float32 math, as PyTorch's. Every buffer (packed weights, workspace, the reserve's scratch copy, the weight gradient)
// is a tensor from the caching allocator. Math is FMA-only for float32 (no TF32), as for convolutions.
#include <cudnn.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/core/cuda/cudnn_context.h"
#include "ops/core/dispatch.h"
#include "ops/factory/factory.h"
#include "ops/rnn/cuda/rnn_pack.h"
#include "ops/rnn/rnn_kernels.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"
#include "tensor/shape.h"

namespace tg::cuda {
namespace {

cudnnDataType_t data_type(DType dtype) {
  switch (dtype) {
    case kFloat32: return CUDNN_DATA_FLOAT;
    case kFloat64: return CUDNN_DATA_DOUBLE;
    case kFloat16: return CUDNN_DATA_HALF;
    case kBFloat16: return CUDNN_DATA_BFLOAT16;
    default: break;
  }
  TG_CHECK(false, "[rnn] cuDNN recurrent layers take float16, bfloat16, float32 or float64, got ", dtype_name(dtype));
  return CUDNN_DATA_FLOAT;
}

// The precision cuDNN computes in: float32 for 16-bit data (as PyTorch asks), the data's otherwise.
cudnnDataType_t math_precision(DType dtype) { return is_low_precision(dtype) ? CUDNN_DATA_FLOAT : data_type(dtype); }

// A dropout descriptor with p = 0 and no random states, per device (the RNN descriptor needs one;
// dropout between layers runs as tapegraph ops instead).
cudnnDropoutDescriptor_t no_dropout(int device, cudnnHandle_t handle) {
  static std::mutex mutex;
  static std::vector<cudnnDropoutDescriptor_t> descs;  // by device; live for the process
  std::lock_guard<std::mutex> lock(mutex);
  if (descs.size() <= static_cast<size_t>(device)) descs.resize(static_cast<size_t>(device) + 1, nullptr);
  cudnnDropoutDescriptor_t& d = descs[static_cast<size_t>(device)];
  if (d == nullptr) {
    TG_CUDNN_CHECK(cudnnCreateDropoutDescriptor(&d));
    TG_CUDNN_CHECK(cudnnSetDropoutDescriptor(d, handle, 0.0f, nullptr, 0, 0));
  }
  return d;
}

// The descriptors of one geometry (RNN, sequence-major x and y, states), released on scope exit.
struct RnnDescriptors {
  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnRNNDataDescriptor_t x = nullptr, y = nullptr;
  cudnnTensorDescriptor_t h = nullptr;

  RnnDescriptors(const RnnConfig& c, cudnnHandle_t handle, int device, cudnnRNNAlgo_t algo) {
    // A geometry cuDNN refuses (asked for 16-bit layers) throws from here: release what was made.
    try {
      create(c, handle, device, algo);
    } catch (...) {
      release();
      throw;
    }
  }
  ~RnnDescriptors() { release(); }
  RnnDescriptors(const RnnDescriptors&) = delete;
  RnnDescriptors& operator=(const RnnDescriptors&) = delete;

 private:
  void release() {
    if (rnn != nullptr) cudnnDestroyRNNDescriptor(rnn);
    if (x != nullptr) cudnnDestroyRNNDataDescriptor(x);
    if (y != nullptr) cudnnDestroyRNNDataDescriptor(y);
    if (h != nullptr) cudnnDestroyTensorDescriptor(h);
  }
  void create(const RnnConfig& c, cudnnHandle_t handle, int device, cudnnRNNAlgo_t algo) {
    auto i = [](int64_t v) { return static_cast<int>(v); };
    const cudnnDataType_t t = data_type(c.dtype), prec = math_precision(c.dtype);
    TG_CUDNN_CHECK(cudnnCreateRNNDescriptor(&rnn));
    TG_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&x));
    TG_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&y));
    TG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&h));
    auto set = [&](cudnnMathType_t math) {
      return cudnnSetRNNDescriptor_v8(rnn, algo, c.lstm() ? CUDNN_LSTM : CUDNN_GRU,
                                      c.bias ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_NO_BIAS,
                                      c.bidirectional ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, t,
                                      prec, math, i(c.input_size), i(c.hidden_size), i(c.hidden_size), i(c.num_layers),
                                      no_dropout(device, handle), CUDNN_RNN_PADDED_IO_ENABLED);
    };
    // float32 asks for FMA math (no TF32), 16-bit floats for tensor cores (as PyTorch); a cuDNN that
    // refuses either for RNNs gets its default.
    const cudnnMathType_t wanted = c.dtype == kFloat32 ? CUDNN_FMA_MATH
                                   : is_low_precision(c.dtype) ? CUDNN_TENSOR_OP_MATH
                                                               : CUDNN_DEFAULT_MATH;
    cudnnStatus_t st = set(wanted);
    if (st != CUDNN_STATUS_SUCCESS && wanted != CUDNN_DEFAULT_MATH) st = set(CUDNN_DEFAULT_MATH);
    TG_CUDNN_CHECK(st);
    // Every sequence is full length, so the unpacked sequence-major layout is plain [T, B, features]
    // (and, with padded IO enabled, cuDNN may run the whole recurrence without per-step launches).
    const std::vector<int> lengths(static_cast<size_t>(c.batch), i(c.seq_len));
    TG_CUDNN_CHECK(cudnnSetRNNDataDescriptor(x, t, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, i(c.seq_len), i(c.batch),
                                             i(c.input_size), lengths.data(), nullptr));
    TG_CUDNN_CHECK(cudnnSetRNNDataDescriptor(y, t, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, i(c.seq_len), i(c.batch),
                                             i(c.dirs() * c.hidden_size), lengths.data(), nullptr));
    const int dims[3] = {i(c.num_layers * c.dirs()), i(c.batch), i(c.hidden_size)};
    const int strides[3] = {i(c.batch * c.hidden_size), i(c.hidden_size), 1};
    TG_CUDNN_CHECK(cudnnSetTensorNdDescriptor(h, t, 3, dims, strides));
  }
};

// What cuDNN said about one geometry: buffer sizes, and where each gate's matrix and bias lives in
// the weight space (element offsets, by pseudo-layer * 2 * gates + cuDNN's linear-layer id).
struct RnnPlan {
  cudnnRNNAlgo_t algo = CUDNN_RNN_ALGO_STANDARD;
  size_t weight_bytes = 0;
  size_t train_work_bytes = 0;
  size_t infer_work_bytes = 0;
  size_t reserve_bytes = 0;
  std::vector<int64_t> matrix_offset;
  std::vector<int64_t> bias_offset;
  bool has_gaps = false;  // the matrices and biases do not fill the weight space
  // Per tensor of rnn()'s weight list, where it starts in the weight space when all its gates lie
  // there one after the other in its own order (else -1).
  std::vector<int64_t> tensor_offset;
  // Every tensor has an offset: weight gradients are views of the space cuDNN writes.
  bool grads_in_space = false;
};

// The element offset and length of gate block `g` of weight `k` of rnn()'s list in the weight space.
std::pair<int64_t, int64_t> gate_block(const RnnConfig& c, const RnnPlan& p, int64_t k, int64_t g) {
  const int64_t G = c.gates(), H = c.hidden_size, per = c.tensors_per_layer();
  const int64_t pl = k / per, pos = k % per;
  const int64_t block = pos == 0 ? H * c.layer_input(pl / c.dirs()) : pos == 1 ? H * H : H;
  const size_t id = static_cast<size_t>(pl * 2 * G + (pos % 2 == 0 ? g : G + g));
  return {pos < 2 ? p.matrix_offset[id] : p.bias_offset[id], block};
}

// Fills the plan's tensor offsets from its gate offsets.
void find_tensor_offsets(const RnnConfig& c, RnnPlan& p) {
  const int64_t count = c.num_layers * c.dirs() * c.tensors_per_layer();
  p.grads_in_space = true;
  for (int64_t k = 0; k < count; ++k) {
    const auto [start, block] = gate_block(c, p, k, 0);
    bool runs = true;
    for (int64_t g = 1; g < c.gates() && runs; ++g) runs = gate_block(c, p, k, g).first == start + g * block;
    p.tensor_offset.push_back(runs ? start : -1);
    p.grads_in_space = p.grads_in_space && runs;
  }
}

int64_t descriptor_numel(cudnnTensorDescriptor_t d) {
  cudnnDataType_t t;
  int nb = 0, dims[8] = {}, strides[8] = {};
  TG_CUDNN_CHECK(cudnnGetTensorNdDescriptor(d, 8, &t, &nb, dims, strides));
  int64_t n = 1;
  for (int k = 0; k < nb; ++k) n *= dims[k];
  return nb > 0 ? n : 0;
}

// The recurrence algorithm of a geometry, as PyTorch picks it for full-length batches: float32
// LSTM/GRU layers with hidden_size <= 128 (the bound of both passes) run cuDNN's persistent
// small-hidden kernels, which keep the recurrent weights on chip and run the whole sequence in a few
// launches; everything else runs the standard algorithm (kernels per time step). Layers without
// biases stay on the standard algorithm. TG_CUDNN_RNN_ALGO=standard (read once) turns the persistent
// kernels off.
cudnnRNNAlgo_t preferred_algo(const RnnConfig& c) {
  static const bool standard_only = [] {
    const char* v = std::getenv("TG_CUDNN_RNN_ALGO");
    return v != nullptr && std::string(v) == "standard";
  }();
  const bool small_h = c.dtype == kFloat32 && c.bias && c.hidden_size <= 128;
  return small_h && !standard_only ? CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H : CUDNN_RNN_ALGO_STANDARD;
}

// The descriptors and buffer sizes of `algo`, or false when cuDNN refuses the geometry with it.
bool query_sizes(const RnnConfig& c, cudnnHandle_t handle, int device, RnnPlan& p,
                 std::unique_ptr<RnnDescriptors>& d) {
  try {
    d = std::make_unique<RnnDescriptors>(c, handle, device, p.algo);
  } catch (const Error&) {
    if (p.algo == CUDNN_RNN_ALGO_STANDARD) throw;
    return false;
  }
  size_t unused = 0;
  const cudnnStatus_t sizes[] = {
      cudnnGetRNNWeightSpaceSize(handle, d->rnn, &p.weight_bytes),
      cudnnGetRNNTempSpaceSizes(handle, d->rnn, CUDNN_FWD_MODE_TRAINING, d->x, &p.train_work_bytes, &p.reserve_bytes),
      cudnnGetRNNTempSpaceSizes(handle, d->rnn, CUDNN_FWD_MODE_INFERENCE, d->x, &p.infer_work_bytes, &unused)};
  for (const cudnnStatus_t st : sizes) {
    if (st == CUDNN_STATUS_SUCCESS) continue;
    if (p.algo == CUDNN_RNN_ALGO_STANDARD) TG_CUDNN_CHECK(st);
    return false;
  }
  return true;
}

RnnPlan make_plan(const RnnConfig& c, int device) {
  DeviceGuard guard(device);
  cudnnHandle_t handle = cudnn_handle(device);
  // The weight space is laid out by the standard algorithm's descriptor (as PyTorch flattens its
  // weights); another algorithm is taken only where cuDNN accepts it with a weight space of that size.
  RnnPlan p;
  std::unique_ptr<RnnDescriptors> standard;
  query_sizes(c, handle, device, p, standard);
  if (preferred_algo(c) != CUDNN_RNN_ALGO_STANDARD) {
    RnnPlan other;
    other.algo = preferred_algo(c);
    std::unique_ptr<RnnDescriptors> unused;
    if (query_sizes(c, handle, device, other, unused) && other.weight_bytes == p.weight_bytes) p = other;
  }
  const RnnDescriptors& d = *standard;
  // Offsets are read against a real weight space (cuDNN returns addresses inside it).
  const int64_t esize = dtype_size(c.dtype);
  OpObserverGuard untraced(nullptr);  // a real buffer even when a trace asks (shape rules run on fake tensors)
  const Tensor probe = empty({static_cast<int64_t>(p.weight_bytes) / esize + 1}, {.dtype = c.dtype,
                                                                                  .device = cuda_device(device)});
  char* const base = static_cast<char*>(probe.raw_data());
  cudnnTensorDescriptor_t md = nullptr, bd = nullptr;
  TG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&md));
  TG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&bd));
  const int64_t G = c.gates(), H = c.hidden_size, pseudo_layers = c.num_layers * c.dirs();
  int64_t covered = 0;
  std::string error;
  for (int64_t pl = 0; pl < pseudo_layers && error.empty(); ++pl) {
    const int64_t in = c.layer_input(pl / c.dirs());
    for (int64_t lin = 0; lin < 2 * G && error.empty(); ++lin) {
      void* m = nullptr;
      void* b = nullptr;
      const cudnnStatus_t st = cudnnGetRNNWeightParams(handle, d.rnn, static_cast<int32_t>(pl), p.weight_bytes, base,
                                                       static_cast<int32_t>(lin), md, &m, bd, &b);
      if (st != CUDNN_STATUS_SUCCESS) {
        error = std::string("cudnnGetRNNWeightParams failed: ") + cudnnGetErrorString(st);
        break;
      }
      const int64_t want = H * (lin < G ? in : H);
      if (m == nullptr || descriptor_numel(md) != want || (c.bias && (b == nullptr || descriptor_numel(bd) != H))) {
        std::ostringstream s;
        s << "cuDNN's weight layout is not the expected one at pseudo-layer " << pl << ", linear layer " << lin
          << " (matrix of " << (m ? descriptor_numel(md) : 0) << " elements, expected " << want << ")";
        error = s.str();
        break;
      }
      p.matrix_offset.push_back((static_cast<char*>(m) - base) / esize);
      p.bias_offset.push_back(c.bias ? (static_cast<char*>(b) - base) / esize : 0);
      covered += want + (c.bias ? H : 0);
    }
  }
  cudnnDestroyTensorDescriptor(md);
  cudnnDestroyTensorDescriptor(bd);
  TG_CHECK(error.empty(), "[rnn] ", error, " for ", c.str());
  p.has_gaps = static_cast<size_t>(covered * esize) < p.weight_bytes;
  find_tensor_offsets(c, p);
  return p;
}

std::mutex g_plan_mutex;
std::unordered_map<std::string, RnnPlan> g_plans;  // node-based: references stay valid

// The cache key of a geometry on a device.
std::string plan_key(const RnnConfig& c, int device) {
  std::ostringstream k;
  k << c.str() << '|' << dtype_name(c.dtype) << '|' << c.seq_len << 'x' << c.batch << 'x' << c.input_size << '|'
    << device;
  return k.str();
}

const RnnPlan& plan_for(const RnnConfig& c, int device) {
  const std::string key = plan_key(c, device);
  {
    std::lock_guard<std::mutex> lock(g_plan_mutex);
    auto it = g_plans.find(key);
    if (it != g_plans.end()) return it->second;
  }
  RnnPlan p = make_plan(c, device);
  std::lock_guard<std::mutex> lock(g_plan_mutex);
  return g_plans.emplace(key, std::move(p)).first->second;
}

// Segments between each tensor of rnn()'s weight list and its gates' places in the weight space at
// `space`; `into_space` picks the direction. Neighbouring segments are merged.
std::vector<CopySegment> weight_segments(const RnnConfig& c, const RnnPlan& p, const TensorList& weights, char* space,
                                         bool into_space) {
  const int64_t esize = dtype_size(c.dtype);
  std::vector<CopySegment> out;
  for (size_t k = 0; k < weights.size(); ++k) {
    char* const tensor = static_cast<char*>(weights[k].raw_data());
    for (int64_t g = 0; g < c.gates(); ++g) {
      const auto [offset, block] = gate_block(c, p, static_cast<int64_t>(k), g);
      char* const a = tensor + g * block * esize;
      char* const b = space + offset * esize;
      CopySegment s{into_space ? a : b, into_space ? b : a, block};
      if (!out.empty()) {
        CopySegment& last = out.back();
        const int64_t bytes = last.count * esize;
        if (static_cast<const char*>(last.src) + bytes == s.src && static_cast<char*>(last.dst) + bytes == s.dst) {
          last.count += s.count;
          continue;
        }
      }
      out.push_back(s);
    }
  }
  return out;
}

Tensor buffer(size_t bytes, DType dtype, Device device) {
  const int64_t esize = dtype_size(dtype);
  return empty({static_cast<int64_t>((bytes + static_cast<size_t>(esize) - 1) / static_cast<size_t>(esize))},
               {.dtype = dtype, .device = device});
}

void* ptr(const Tensor& t) { return t.defined() && t.numel() > 0 ? t.raw_data() : nullptr; }

// cuDNN's flat weight space filled from rnn()'s weight list, into `space` (a fresh buffer when undefined).
Tensor pack_weights(const RnnConfig& c, const RnnPlan& p, const TensorList& weights, Device device, Tensor space) {
  if (!space.defined() || space.numel() == 0) space = buffer(p.weight_bytes, c.dtype, device);
  if (p.has_gaps) TG_CUDA_CHECK(cudaMemsetAsync(space.raw_data(), 0, p.weight_bytes, current_stream()));
  copy_segments(weight_segments(c, p, weights, static_cast<char*>(space.raw_data()), true), c.dtype);
  return space;
}

// No device copy of the sequence lengths: every sequence is full length, as the data descriptors say
// (PyTorch passes none either).
constexpr const int32_t* kAllFullLength = nullptr;

void check_dense(const Tensor& t) {
  TG_CHECK(!t.defined() || t.is_contiguous(), "[rnn] internal error: kernels expect contiguous operands, got ",
           "sizes ", shape_str(t.sizes()), " strides ", shape_str(t.strides()));
}

// Geometries (plan keys) of 16-bit layers that cuDNN refused.
std::mutex g_refused_mutex;
std::unordered_map<std::string, std::string> g_refused;

}  // namespace

bool rnn_takes_dtype(const RnnConfig& cfg, int device) {
  if (!is_low_precision(cfg.dtype)) return true;
  const std::string key = plan_key(cfg, device);
  {
    std::lock_guard<std::mutex> lock(g_refused_mutex);
    if (g_refused.count(key) != 0) return false;
  }
  try {
    plan_for(cfg, device);
    return true;
  } catch (const Error& e) {
    std::lock_guard<std::mutex> lock(g_refused_mutex);
    g_refused.emplace(key, e.what());
    return false;
  }
}

int64_t rnn_reserve_bytes(const RnnConfig& cfg, int device) {
  return static_cast<int64_t>(plan_for(cfg, device).reserve_bytes);
}

int64_t rnn_weight_space_bytes(const RnnConfig& cfg, int device) {
  return static_cast<int64_t>(plan_for(cfg, device).weight_bytes);
}

RnnGradLayout rnn_grad_layout(const RnnConfig& cfg, int device) {
  const RnnPlan& p = plan_for(cfg, device);
  if (!p.grads_in_space) return rnn_list_grad_layout(cfg);
  const int64_t esize = dtype_size(cfg.dtype);
  return {p.tensor_offset, static_cast<int64_t>((p.weight_bytes + static_cast<size_t>(esize) - 1) /
                                                static_cast<size_t>(esize))};
}

void rnn_forward(const RnnConfig& cfg, const Tensor& x, const Tensor& hx, const Tensor& cx, const TensorList& weights,
                 const Tensor& y, const Tensor& hy, const Tensor& cy, const Tensor& reserve, const Tensor& packed) {
  for (const Tensor* t : {&x, &hx, &cx}) check_dense(*t);
  for (const Tensor& w : weights) check_dense(w);
  const Device device = y.device();
  DeviceGuard guard(device.index);
  cudnnHandle_t handle = cudnn_handle(device.index);
  const RnnPlan& p = plan_for(cfg, device.index);
  RnnDescriptors d(cfg, handle, device.index, p.algo);
  const bool train = reserve.defined();
  TG_CHECK(!train || static_cast<size_t>(reserve.numel()) * 8 >= p.reserve_bytes,
           "[rnn] internal error: reserve space of ", reserve.numel() * 8, " bytes, cuDNN needs ",
           p.reserve_bytes);
  TG_CHECK(!packed.defined() || packed.numel() == 0 ||
               static_cast<size_t>(packed.numel() * dtype_size(cfg.dtype)) >= p.weight_bytes,
           "[rnn] internal error: packed weights of ", packed.numel(), " elements, cuDNN needs ", p.weight_bytes,
           " bytes");
  const Tensor space = pack_weights(cfg, p, weights, device, packed);
  // The forward leaves parts of the reserve for the backward to fill; zeroed, the saved blob holds no
  // undefined bytes (the backward copies all of it).
  if (train) TG_CUDA_CHECK(cudaMemsetAsync(reserve.raw_data(), 0, p.reserve_bytes, current_stream()));
  const size_t work_bytes = train ? p.train_work_bytes : p.infer_work_bytes;
  const Tensor work = buffer(work_bytes, kFloat64, device);
  TG_CUDNN_CHECK(cudnnRNNForward(handle, d.rnn, train ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                                 kAllFullLength, d.x, x.raw_data(), d.y, y.raw_data(),
                                 d.h, hx.raw_data(), hy.raw_data(), d.h, cfg.lstm() ? cx.raw_data() : nullptr,
                                 cfg.lstm() ? cy.raw_data() : nullptr, p.weight_bytes, space.raw_data(), work_bytes,
                                 ptr(work), train ? p.reserve_bytes : 0, train ? reserve.raw_data() : nullptr));
}

void rnn_backward(const RnnConfig& cfg, const Tensor& x, const Tensor& hx, const Tensor& cx, const Tensor& packed,
                  const Tensor& y, const Tensor& reserve, const Tensor& dy, const Tensor& dhy, const Tensor& dcy,
                  const Tensor& dx, const Tensor& dhx, const Tensor& dcx, const Tensor& dflat) {
  for (const Tensor* t : {&x, &hx, &cx, &packed, &y, &reserve, &dy, &dhy, &dcy, &dflat}) check_dense(*t);
  const Device device = dx.device();
  DeviceGuard guard(device.index);
  cudnnHandle_t handle = cudnn_handle(device.index);
  const RnnPlan& p = plan_for(cfg, device.index);
  RnnDescriptors d(cfg, handle, device.index, p.algo);
  TG_CHECK(static_cast<size_t>(reserve.numel()) * 8 >= p.reserve_bytes, "[rnn_backward] internal error: ",
           "reserve space of ", reserve.numel() * 8, " bytes, cuDNN needs ", p.reserve_bytes);
  TG_CHECK(static_cast<size_t>(packed.numel() * dtype_size(cfg.dtype)) >= p.weight_bytes, "[rnn_backward] ",
           "internal error: packed weights of ", packed.numel(), " elements, cuDNN needs ", p.weight_bytes, " bytes");
  const cudaStream_t stream = current_stream();
  // The backward passes write into the reserve space: they get a copy, so the saved one stays as the
  // forward left it (a second backward, or a replayed graph, reads it again).
  const Tensor scratch = buffer(p.reserve_bytes, kInt64, device);
  TG_CUDA_CHECK(cudaMemcpyAsync(scratch.raw_data(), reserve.raw_data(), p.reserve_bytes, cudaMemcpyDeviceToDevice,
                                stream));
  const Tensor work = buffer(p.train_work_bytes, kFloat64, device);
  const bool lstm = cfg.lstm();
  // An undefined final-state gradient goes as a null pointer, which cuDNN reads as zeros.
  TG_CUDNN_CHECK(cudnnRNNBackwardData_v8(handle, d.rnn, kAllFullLength, d.y, y.raw_data(), dy.raw_data(), d.x,
                                         dx.raw_data(), d.h, hx.raw_data(), ptr(dhy), dhx.raw_data(), d.h,
                                         lstm ? cx.raw_data() : nullptr, lstm ? ptr(dcy) : nullptr,
                                         lstm ? dcx.raw_data() : nullptr, p.weight_bytes, packed.raw_data(),
                                         p.train_work_bytes, ptr(work), p.reserve_bytes, scratch.raw_data()));
  // Weight gradients are accumulated by cuDNN (its only mode): into a zeroed space, which is the flat
  // gradient itself when the weights' gradients are views of it.
  const Tensor dspace = p.grads_in_space ? dflat : buffer(p.weight_bytes, cfg.dtype, device);
  TG_CUDA_CHECK(cudaMemsetAsync(dspace.raw_data(), 0, p.weight_bytes, stream));
  TG_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(handle, d.rnn, CUDNN_WGRAD_MODE_ADD, kAllFullLength, d.x, x.raw_data(),
                                            d.h, hx.raw_data(), d.y, y.raw_data(), p.weight_bytes, dspace.raw_data(),
                                            p.train_work_bytes, ptr(work), p.reserve_bytes, scratch.raw_data()));
  if (!p.grads_in_space) {
    const TensorList dweights = rnn_grad_views(cfg, rnn_list_grad_layout(cfg), dflat);
    copy_segments(weight_segments(cfg, p, dweights, static_cast<char*>(dspace.raw_data()), false), cfg.dtype);
  }
}

}  // namespace tg::cuda
