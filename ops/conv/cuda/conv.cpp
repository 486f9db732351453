// 2-D and 3-D convolutions on CUDA through cuDNN's legacy convolution API. The algorithm of each shape is chosen
// once and cached, so a call under graph capture only launches: by timing the candidates
// (cudnnFind...Ex, as PyTorch's cudnn.benchmark, with as much scratch memory as the hungriest
// algorithm asks for, up to 256 MiB) on the first call outside a capture, or from cuDNN's heuristics
// (host-only queries) when the first call is captured. Workspaces are tensors
// from the caching allocator, so capture sees no hidden allocation. Math is FMA-only (no TF32),
// matching PyTorch with allow_tf32 off. Timed choices are kept on disk too, so later processes skip
// the search (see Note [Warm start]).
#include <cudnn.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/conv/conv_kernels.h"
#include "ops/core/cuda/cudnn_context.h"
#include "ops/core/cuda/device_cache_key.h"
#include "ops/core/disk_cache.h"
#include "ops/core/precision.h"
#include "ops/factory/factory.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {
namespace {

cudnnDataType_t cudnn_type(DType dtype) {
  switch (dtype) {
    case DType::Float16: return CUDNN_DATA_HALF;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Float64: return CUDNN_DATA_DOUBLE;
    default: TG_FAIL("[conv2d] cuDNN convolutions take a floating dtype, got ", dtype_name(dtype));
  }
}

// Tensor-core algorithms serve 16-bit data always and float32 data only with TF32 allowed (their
// products round the operands to TF32).
bool tensor_cores_allowed(DType dtype) { return is_low_precision(dtype) || (dtype == kFloat32 && allow_tf32()); }

std::vector<int> ints(const Shape& v) { return std::vector<int>(v.begin(), v.end()); }

// A packed (contiguous) 4-D or 5-D tensor descriptor of `sizes`.
void set_packed(cudnnTensorDescriptor_t d, const Shape& sizes, cudnnDataType_t t) {
  const std::vector<int> dims = ints(sizes);
  std::vector<int> strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * std::max(dims[i], 1);
  TG_CUDNN_CHECK(cudnnSetTensorNdDescriptor(d, t, static_cast<int>(dims.size()), dims.data(), strides.data()));
}

// The descriptors of one convolution (input x, filter w, output y), released on scope exit.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  bool tensor_cores = false;  // whether tensor-core algorithms may run

  Descriptors(const Shape& xs, const Shape& ws, const Shape& ys, DType dtype, const ConvParams& p)
      : tensor_cores(tensor_cores_allowed(dtype)) {
    const cudnnDataType_t t = cudnn_type(dtype);
    TG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    TG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    TG_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    TG_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    set_packed(x, xs, t);
    set_packed(y, ys, t);
    const std::vector<int> wd = ints(ws);
    TG_CUDNN_CHECK(cudnnSetFilterNdDescriptor(w, t, CUDNN_TENSOR_NCHW, static_cast<int>(wd.size()), wd.data()));
    std::vector<int> pad, stride, dil;
    for (int i = 0; i < p.spatial; ++i) {
      pad.push_back(static_cast<int>(p.padding[static_cast<size_t>(i)]));
      stride.push_back(static_cast<int>(p.stride[static_cast<size_t>(i)]));
      dil.push_back(static_cast<int>(p.dilation[static_cast<size_t>(i)]));
    }
    TG_CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(conv, p.spatial, pad.data(), stride.data(), dil.data(),
                                                   CUDNN_CROSS_CORRELATION,
                                                   dtype == kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT));
    TG_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv, static_cast<int>(p.groups)));
    TG_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, tensor_cores ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  }
  ~Descriptors() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

// An algorithm, its workspace bytes and the math type cuDNN named with it (set on the convolution
// before it runs, as cuDNN asks), as cached per (device, direction, shapes, params, dtype).
struct Choice {
  int algo = 0;
  size_t workspace = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

std::mutex g_cache_mutex;
std::unordered_map<std::string, Choice> g_cache;

std::string cache_key(const char* direction, const Shape& xs, const Shape& ws, DType dtype, const ConvParams& p) {
  std::ostringstream k;
  k << direction << '|' << shape_str(xs) << '|' << shape_str(ws) << '|' << dtype_name(dtype) << '|' << p.str()
    << (tensor_cores_allowed(dtype) ? "|tc" : "");
  return k.str();
}

// Largest workspace the timed search may use.
constexpr size_t kMaxSearchWorkspace = size_t{256} << 20;

bool uses_tensor_cores(cudnnMathType_t m) { return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION; }

// Heuristic suggestions, best first, keeping those cuDNN supports here with their workspace sizes.
// `query` fills perf results; `size_of` returns the workspace of an algorithm (or fails).
template <typename Perf, typename Query, typename SizeOf>
std::vector<Choice> suggestions(bool tensor_cores, int max_count, Query query, SizeOf size_of) {
  std::vector<Perf> perf(static_cast<size_t>(std::max(max_count, 1)));
  int returned = 0;
  TG_CUDNN_CHECK(query(static_cast<int>(perf.size()), &returned, perf.data()));
  std::vector<Choice> out;
  for (int i = 0; i < returned; ++i) {
    const Perf& p = perf[static_cast<size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS || (!tensor_cores && uses_tensor_cores(p.mathType))) continue;
    size_t bytes = 0;
    if (size_of(p.algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;
    out.push_back({static_cast<int>(p.algo), bytes, p.mathType});
  }
  return out;
}

// The largest workspace any of the `count` algorithms needs for this convolution (capped): the
// timed search gets that much, so no algorithm is left out for want of scratch memory.
template <typename Algo, typename SizeOf>
size_t search_workspace(int count, SizeOf size_of) {
  size_t most = 0;
  for (int a = 0; a < count; ++a) {
    size_t bytes = 0;
    if (size_of(static_cast<Algo>(a), &bytes) == CUDNN_STATUS_SUCCESS && bytes <= kMaxSearchWorkspace)
      most = std::max(most, bytes);
  }
  return most;
}

// Scratch memory for the timed search, straight from the driver and returned right after: the search
// runs once per shape, and its workspace should not stay in (or count toward) the caching allocator.
class SearchWorkspace {
 public:
  explicit SearchWorkspace(size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0 && cudaMalloc(&data_, bytes_) != cudaSuccess) {
      (void)cudaGetLastError();  // too little free memory: search among the algorithms needing none
      data_ = nullptr;
      bytes_ = 0;
    }
  }
  ~SearchWorkspace() {
    if (data_) cudaFree(data_);
  }
  SearchWorkspace(const SearchWorkspace&) = delete;
  SearchWorkspace& operator=(const SearchWorkspace&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_;
};

// The fastest algorithm by cuDNN's timed search, given `search_bytes` of workspace; falls back to the
// heuristics' first choice under capture or when the search finds none.
// `find(n, &got, perf, ws, bytes)` runs the search.
template <typename Perf, typename Find>
Choice pick(const char* what, bool tensor_cores, const std::vector<Choice>& heuristic, size_t search_bytes, Find find) {
  TG_CHECK(!heuristic.empty(), "[", what, "] cuDNN reports no supported algorithm for this convolution");
  if (current_stream_capturing()) return heuristic.front();
  TG_CUDA_CHECK(cudaStreamSynchronize(current_stream()));  // the operands are ready before the driver allocation
  const SearchWorkspace ws(search_bytes);
  std::vector<Perf> perf(16);
  int returned = 0;
  TG_CUDNN_CHECK(find(static_cast<int>(perf.size()), &returned, perf.data(), ws.data(), ws.bytes()));
  for (int i = 0; i < returned; ++i) {
    const Perf& p = perf[static_cast<size_t>(i)];
    if (p.status == CUDNN_STATUS_SUCCESS && (tensor_cores || !uses_tensor_cores(p.mathType)) && p.memory <= ws.bytes())
      return {static_cast<int>(p.algo), p.memory, p.mathType};
  }
  return heuristic.front();
}

// The on-disk cache key of the choice under `key` on `device`: the device and cuDNN's version.
std::string disk_key(const std::string& key, int device) {
  return device_cache_key(device) + "\ncuDNN " + std::to_string(cudnnGetVersion()) + "\n" + key;
}

// The choice an earlier process made for `key`, from the on-disk cache.
std::optional<Choice> load_choice(const std::string& key) {
  const std::optional<std::string> saved = disk_cache_load("cudnn_conv", key);
  if (!saved) return std::nullopt;
  int64_t fields[3] = {-1, 0, -1};  // the algorithm, its workspace bytes, its math type
  if (saved->size() == sizeof fields) std::memcpy(fields, saved->data(), sizeof fields);
  if (fields[0] >= 0 && fields[0] < 64 && fields[1] >= 0 && fields[2] >= 0 && fields[2] < 16)
    return Choice{static_cast<int>(fields[0]), static_cast<size_t>(fields[1]), static_cast<cudnnMathType_t>(fields[2])};
  disk_cache_reject("cudnn_conv", key, "not an algorithm choice");
  return std::nullopt;
}

// Keeps choice `c` under `key` in the on-disk cache.
void store_choice(const std::string& key, const Choice& c) {
  const int64_t fields[3] = {c.algo, static_cast<int64_t>(c.workspace), static_cast<int64_t>(c.math)};
  disk_cache_store("cudnn_conv", key, std::string(reinterpret_cast<const char*>(fields), sizeof fields));
}

// The cached choice for `key` on `device`, read from disk or computed by `pick` on first use.
template <typename Pick>
Choice cached(const std::string& shape_key, int device, Pick pick) {
  const std::string key = std::to_string(device) + "|" + shape_key;
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    auto it = g_cache.find(key);
    if (it != g_cache.end()) return it->second;
  }
  const std::string on_disk = disk_key(shape_key, device);
  std::optional<Choice> c = load_choice(on_disk);
  if (!c) {
    // Under capture `pick` takes the heuristics' first choice: this process's, not one to keep.
    const bool timed = !current_stream_capturing();
    c = pick();
    if (timed) store_choice(on_disk, *c);
  }
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  g_cache.emplace(key, *c);
  return *c;
}

// A workspace of `bytes` from the caching allocator (kept alive by the returned tensor).
Tensor workspace(size_t bytes, Device device) {
  if (bytes == 0) return Tensor();
  return empty({static_cast<int64_t>((bytes + 7) / 8)}, {.dtype = kFloat64, .device = device});
}

void* ws_ptr(const Tensor& ws) { return ws.defined() ? ws.raw_data() : nullptr; }

// Runs `run(choice, workspace)` with the cached choice; where cuDNN refuses it (a bad parameter, or
// not supported: some algorithms the heuristics list fail on some shapes, such as grouped 16-bit
// convolutions) the heuristics' other suggestions in turn, keeping the first that runs as the
// choice for this key. Raises when none runs.
template <typename Heuristic, typename Run>
void run_choice(const char* what, const std::string& shape_key, Device device, cudnnConvolutionDescriptor_t conv,
                const Choice& c, Heuristic heuristic, Run run) {
  auto attempt = [&](const Choice& choice) {
    TG_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, choice.math));
    const Tensor ws = workspace(choice.workspace, device);
    return run(choice, ws_ptr(ws));
  };
  auto refused = [](cudnnStatus_t st) {
    return CUDNN_STATUS_CATEGORY(st) == CUDNN_STATUS_BAD_PARAM || CUDNN_STATUS_CATEGORY(st) == CUDNN_STATUS_NOT_SUPPORTED;
  };
  const cudnnStatus_t first = attempt(c);
  if (first == CUDNN_STATUS_SUCCESS) return;
  if (!refused(first)) TG_CUDNN_CHECK(first);
  for (const Choice& other : heuristic()) {
    if (other.algo == c.algo && other.math == c.math) continue;
    const cudnnStatus_t st = attempt(other);
    if (st == CUDNN_STATUS_SUCCESS) {
      if (!current_stream_capturing()) store_choice(disk_key(shape_key, device.index), other);
      std::lock_guard<std::mutex> lock(g_cache_mutex);
      g_cache[std::to_string(device.index) + "|" + shape_key] = other;
      return;
    }
    if (!refused(st)) TG_CUDNN_CHECK(st);
  }
  TG_FAIL("[", what, "] cuDNN refused every algorithm it suggests for this convolution (", shape_key,
          "); the first refusal: ", cudnnGetErrorString(first));
}

// alpha/beta scalars in the type cuDNN expects for the data type.
struct Scaling {
  float f1 = 1.f, f0 = 0.f;
  double d1 = 1.0, d0 = 0.0;
  bool dbl;
  explicit Scaling(DType dtype) : dbl(dtype == kFloat64) {}
  const void* one() const { return dbl ? static_cast<const void*>(&d1) : static_cast<const void*>(&f1); }
  const void* zero() const { return dbl ? static_cast<const void*>(&d0) : static_cast<const void*>(&f0); }
};

void check_packed(const Tensor& t) {
  TG_CHECK(t.is_contiguous(), "[conv] internal error: kernels expect contiguous operands, got strides ",
           shape_str(t.strides()));
}

}  // namespace

void clear_conv_algorithms() {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  g_cache.clear();
}

void conv_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const ConvParams& p) {
  check_packed(x);
  check_packed(w);
  const int dev = y.device().index;
  DeviceGuard guard(dev);
  cudnnHandle_t h = cudnn_handle(dev);
  Descriptors d(x.sizes(), w.sizes(), y.sizes(), x.dtype(), p);
  const std::string key = cache_key("fwd", x.sizes(), w.sizes(), x.dtype(), p);
  int count = 0;
  TG_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &count));
  auto size_of = [&](cudnnConvolutionFwdAlgo_t a, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, a, bytes);
  };
  auto heuristic = [&] {
    return suggestions<cudnnConvolutionFwdAlgoPerf_t>(
        d.tensor_cores, count,
        [&](int n, int* got, cudnnConvolutionFwdAlgoPerf_t* out) {
          return cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, n, got, out);
        },
        size_of);
  };
  const Choice c = cached(key, dev, [&] {
    return pick<cudnnConvolutionFwdAlgoPerf_t>("conv2d", d.tensor_cores, heuristic(),
                                               search_workspace<cudnnConvolutionFwdAlgo_t>(count, size_of),
                                               [&](int n, int* got, cudnnConvolutionFwdAlgoPerf_t* out, void* ws,
                                                   size_t bytes) {
                                                 return cudnnFindConvolutionForwardAlgorithmEx(
                                                     h, d.x, x.raw_data(), d.w, w.raw_data(), d.conv, d.y,
                                                     y.raw_data(), n, got, out, ws, bytes);
                                               });
  });
  const Scaling s(x.dtype());
  run_choice("conv2d", key, y.device(), d.conv, c, heuristic, [&](const Choice& ch, void* ws) {
    return cudnnConvolutionForward(h, s.one(), d.x, x.raw_data(), d.w, w.raw_data(), d.conv,
                                   static_cast<cudnnConvolutionFwdAlgo_t>(ch.algo), ws, ch.workspace, s.zero(), d.y,
                                   y.raw_data());
  });
  if (bias.defined()) {
    cudnnTensorDescriptor_t bd = nullptr;
    TG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&bd));
    // bias as [1, C, 1, 1(, 1)], broadcast over y by cudnnAddTensor
    std::vector<int> dims(y.sizes().size(), 1), strides(y.sizes().size(), 1);
    dims[1] = static_cast<int>(bias.size(0));
    strides[1] = static_cast<int>(bias.strides()[0]);
    strides[0] = dims[1] * strides[1];
    const cudnnStatus_t st = cudnnSetTensorNdDescriptor(bd, cudnn_type(bias.dtype()), static_cast<int>(dims.size()),
                                                        dims.data(), strides.data());
    const cudnnStatus_t add =
        st == CUDNN_STATUS_SUCCESS ? cudnnAddTensor(h, s.one(), bd, bias.raw_data(), s.one(), d.y, y.raw_data()) : st;
    cudnnDestroyTensorDescriptor(bd);
    TG_CUDNN_CHECK(add);
  }
}

void conv_backward_input(const Tensor& gy, const Tensor& w, const Tensor& gx, const ConvParams& p) {
  check_packed(gy);
  check_packed(w);
  const int dev = gx.device().index;
  DeviceGuard guard(dev);
  cudnnHandle_t h = cudnn_handle(dev);
  Descriptors d(gx.sizes(), w.sizes(), gy.sizes(), gy.dtype(), p);
  const std::string key = cache_key("bwd_data", gx.sizes(), w.sizes(), gy.dtype(), p);
  int count = 0;
  TG_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &count));
  auto size_of = [&](cudnnConvolutionBwdDataAlgo_t a, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, a, bytes);
  };
  auto heuristic = [&] {
    return suggestions<cudnnConvolutionBwdDataAlgoPerf_t>(
        d.tensor_cores, count,
        [&](int n, int* got, cudnnConvolutionBwdDataAlgoPerf_t* out) {
          return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, n, got, out);
        },
        size_of);
  };
  const Choice c = cached(key, dev, [&] {
    return pick<cudnnConvolutionBwdDataAlgoPerf_t>(
        "conv2d_backward_input", d.tensor_cores, heuristic(),
        search_workspace<cudnnConvolutionBwdDataAlgo_t>(count, size_of),
        [&](int n, int* got, cudnnConvolutionBwdDataAlgoPerf_t* out, void* ws, size_t bytes) {
          return cudnnFindConvolutionBackwardDataAlgorithmEx(h, d.w, w.raw_data(), d.y, gy.raw_data(), d.conv, d.x,
                                                             gx.raw_data(), n, got, out, ws, bytes);
        });
  });
  const Scaling s(gy.dtype());
  run_choice("conv2d_backward_input", key, gx.device(), d.conv, c, heuristic, [&](const Choice& ch, void* ws) {
    return cudnnConvolutionBackwardData(h, s.one(), d.w, w.raw_data(), d.y, gy.raw_data(), d.conv,
                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(ch.algo), ws, ch.workspace,
                                        s.zero(), d.x, gx.raw_data());
  });
}

void conv_backward_weight(const Tensor& gy, const Tensor& x, const Tensor& gw, const ConvParams& p) {
  check_packed(gy);
  check_packed(x);
  const int dev = gw.device().index;
  DeviceGuard guard(dev);
  if (x.numel() == 0) {  // an empty batch contributes nothing: the gradient is zero
    TG_CUDA_CHECK(cudaMemsetAsync(gw.raw_data(), 0, static_cast<size_t>(gw.numel()) * dtype_size(gw.dtype()),
                                  current_stream()));
    return;
  }
  cudnnHandle_t h = cudnn_handle(dev);
  Descriptors d(x.sizes(), gw.sizes(), gy.sizes(), gy.dtype(), p);
  const std::string key = cache_key("bwd_filter", x.sizes(), gw.sizes(), gy.dtype(), p);
  int count = 0;
  TG_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &count));
  auto size_of = [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, a, bytes);
  };
  auto heuristic = [&] {
    return suggestions<cudnnConvolutionBwdFilterAlgoPerf_t>(
        d.tensor_cores, count,
        [&](int n, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* out) {
          return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, n, got, out);
        },
        size_of);
  };
  const Choice c = cached(key, dev, [&] {
    return pick<cudnnConvolutionBwdFilterAlgoPerf_t>(
        "conv2d_backward_weight", d.tensor_cores, heuristic(),
        search_workspace<cudnnConvolutionBwdFilterAlgo_t>(count, size_of),
        [&](int n, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* out, void* ws, size_t bytes) {
          return cudnnFindConvolutionBackwardFilterAlgorithmEx(h, d.x, x.raw_data(), d.y, gy.raw_data(), d.conv, d.w,
                                                               gw.raw_data(), n, got, out, ws, bytes);
        });
  });
  const Scaling s(gy.dtype());
  run_choice("conv2d_backward_weight", key, gw.device(), d.conv, c, heuristic, [&](const Choice& ch, void* ws) {
    return cudnnConvolutionBackwardFilter(h, s.one(), d.x, x.raw_data(), d.y, gy.raw_data(), d.conv,
                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(ch.algo), ws, ch.workspace,
                                          s.zero(), d.w, gw.raw_data());
  });
}

}  // namespace tg::cuda
