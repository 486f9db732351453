// float32 2-D and 3-D convolutions on the CPU through oneDNN (plain NCHW/OIHW or NCDHW/OIDHW memory,
// so tensors are read and written in place); primitives are built once per shape and cached. float64, which oneDNN lacks,
// stays on im2col + GEMM (ops/conv/cpu/conv.cpp).
#ifdef TG_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include <mutex>
#include <sstream>
#include <unordered_map>

#include "ops/conv/conv_kernels.h"
#include "ops/linalg/cpu/onednn_gemm.h"

namespace tg {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// The memory descriptors and attributes of one convolution.
struct Geometry {
  memory::desc src, weights, dst, bias;
  memory::dims strides, dilates, pad_l, pad_r;

  Geometry(const Shape& x, const Shape& w, const Shape& y, const ConvParams& p) {
    const bool three = p.spatial == 3;
    const memory::dims xd(x.begin(), x.end()), yd(y.begin(), y.end());
    src = memory::desc(xd, memory::data_type::f32, three ? tag::ncdhw : tag::nchw);
    dst = memory::desc(yd, memory::data_type::f32, three ? tag::ncdhw : tag::nchw);
    if (p.groups == 1) {
      weights = memory::desc(memory::dims(w.begin(), w.end()), memory::data_type::f32, three ? tag::oidhw : tag::oihw);
    } else {
      memory::dims gd{p.groups, w[0] / p.groups};
      gd.insert(gd.end(), w.begin() + 1, w.end());
      weights = memory::desc(gd, memory::data_type::f32, three ? tag::goidhw : tag::goihw);
    }
    bias = memory::desc({w[0]}, memory::data_type::f32, tag::x);
    for (int i = 0; i < p.spatial; ++i) {
      strides.push_back(p.stride[static_cast<size_t>(i)]);
      dilates.push_back(p.dilation[static_cast<size_t>(i)] - 1);
      pad_l.push_back(p.padding[static_cast<size_t>(i)]);
    }
    pad_r = pad_l;  // oneDNN floors the output extent as PyTorch does
  }
};

std::string key_of(const char* what, const Shape& x, const Shape& w, bool bias, const ConvParams& p) {
  std::ostringstream k;
  k << what << '|' << shape_str(x) << '|' << shape_str(w) << '|' << bias << '|' << p.str();
  return k.str();
}

dnnl::convolution_forward::primitive_desc forward_pd(const Geometry& g, bool with_bias) {
  const auto desc = with_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                                dnnl::algorithm::convolution_direct, g.src, g.weights,
                                                                g.bias, g.dst, g.strides, g.dilates, g.pad_l, g.pad_r)
                              : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                                dnnl::algorithm::convolution_direct, g.src, g.weights,
                                                                g.dst, g.strides, g.dilates, g.pad_l, g.pad_r);
  return dnnl::convolution_forward::primitive_desc(desc, engine());
}

// A cached primitive per shape (building one is far costlier than running it).
template <typename Make>
dnnl::primitive cached(const std::string& key, Make make) {
  static std::mutex mutex;
  static std::unordered_map<std::string, dnnl::primitive> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, make()).first;
  return it->second;
}

memory mem(const memory::desc& d, const Tensor& t) { return memory(d, engine(), t.raw_data()); }

}  // namespace

void onednn_conv_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                           const ConvParams& p) {
  const Geometry g(x.sizes(), w.sizes(), y.sizes(), p);
  const bool with_bias = bias.defined();
  dnnl::primitive prim = cached(key_of("fwd", x.sizes(), w.sizes(), with_bias, p),
                                [&] { return dnnl::convolution_forward(forward_pd(g, with_bias)); });
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, mem(g.src, x)}, {DNNL_ARG_WEIGHTS, mem(g.weights, w)}, {DNNL_ARG_DST, mem(g.dst, y)}};
  if (with_bias) args.emplace(DNNL_ARG_BIAS, mem(g.bias, bias));
  cpu::sync_onednn_threads();  // its kernels use this thread's OpenMP thread count
  dnnl::stream s(engine());
  prim.execute(s, args);
  s.wait();
}

void onednn_conv_backward_input(const Tensor& gy, const Tensor& w, const Tensor& gx, const ConvParams& p) {
  const Geometry g(gx.sizes(), w.sizes(), gy.sizes(), p);
  dnnl::primitive prim = cached(key_of("bwd_data", gx.sizes(), w.sizes(), false, p), [&] {
    const dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, g.src, g.weights, g.dst,
                                                     g.strides, g.dilates, g.pad_l, g.pad_r);
    return dnnl::convolution_backward_data(
        dnnl::convolution_backward_data::primitive_desc(desc, engine(), forward_pd(g, false)));
  });
  cpu::sync_onednn_threads();  // its kernels use this thread's OpenMP thread count
  dnnl::stream s(engine());
  prim.execute(s, {{DNNL_ARG_DIFF_DST, mem(g.dst, gy)}, {DNNL_ARG_WEIGHTS, mem(g.weights, w)},
                   {DNNL_ARG_DIFF_SRC, mem(g.src, gx)}});
  s.wait();
}

void onednn_conv_backward_weight(const Tensor& gy, const Tensor& x, const Tensor& gw, const ConvParams& p) {
  const Geometry g(x.sizes(), gw.sizes(), gy.sizes(), p);
  dnnl::primitive prim = cached(key_of("bwd_weights", x.sizes(), gw.sizes(), false, p), [&] {
    const dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, g.src, g.weights, g.dst,
                                                        g.strides, g.dilates, g.pad_l, g.pad_r);
    return dnnl::convolution_backward_weights(
        dnnl::convolution_backward_weights::primitive_desc(desc, engine(), forward_pd(g, false)));
  });
  cpu::sync_onednn_threads();  // its kernels use this thread's OpenMP thread count
  dnnl::stream s(engine());
  prim.execute(s, {{DNNL_ARG_DIFF_DST, mem(g.dst, gy)}, {DNNL_ARG_SRC, mem(g.src, x)},
                   {DNNL_ARG_DIFF_WEIGHTS, mem(g.weights, gw)}});
  s.wait();
}

}  // namespace tg
#endif  // TG_WITH_DNNL
