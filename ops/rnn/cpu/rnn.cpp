// Stacked LSTM/GRU layers on the CPU, one kernel per call: per layer and direction, the input
// projection of every step is one GEMM, then each step is one recurrent GEMM and a fused gate loop.
// The backward walks the steps in reverse with the same fused loops, and forms the weight gradients
// and the input gradient as whole-sequence GEMMs. The reserve keeps, per layer and direction, the
// activated gates and the cell states (LSTM) or the recurrent part of the candidate (GRU), plus the
// outputs of every layer but the last.
#include <Eigen/Core>
#include <cmath>
#include <vector>

#include "ops/rnn/rnn_kernels.h"

namespace tg::cpu {
namespace {

template <typename T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using CMap = Eigen::Map<const Mat<T>>;
template <typename T>
using MMap = Eigen::Map<Mat<T>>;
template <typename T>
using CRow = Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>;
template <typename T>
using MRow = Eigen::Map<Eigen::Matrix<T, 1, Eigen::Dynamic>>;
template <typename T>
using CStrided = Eigen::Map<const Mat<T>, 0, Eigen::OuterStride<>>;

template <typename T>
T sigmoid(T v) {
  return T(1) / (T(1) + std::exp(-v));
}

// Where each saved quantity lives in the reserve (offsets in elements).
struct ReserveLayout {
  int64_t T, B, H, G, D, L;
  explicit ReserveLayout(const RnnConfig& c)
      : T(c.seq_len), B(c.batch), H(c.hidden_size), G(c.gates()), D(c.dirs()), L(c.num_layers) {}
  // Activated gates of (layer, dir): [T, B, G*H].
  int64_t gates(int64_t l, int64_t d) const { return (l * D + d) * T * B * G * H; }
  // Cell states (LSTM) or W_hn h + b_hn (GRU) of (layer, dir): [T, B, H].
  int64_t cell(int64_t l, int64_t d) const { return L * D * T * B * G * H + (l * D + d) * T * B * H; }
  // Output of layer l < L - 1: [T, B, D*H].
  int64_t out(int64_t l) const { return L * D * T * B * (G + 1) * H + l * T * B * D * H; }
  int64_t total() const { return out(L - 1); }
};

// The weights of (layer, dir): w_ih, w_hh, b_ih, b_hh (biases null when absent).
template <typename T>
struct LayerWeights {
  const T *ih, *hh, *b_ih, *b_hh;
};

template <typename T>
LayerWeights<T> layer_weights(const RnnConfig& c, const TensorList& w, int64_t k) {
  const auto at = [&](int64_t i) {
    return static_cast<const T*>(w[static_cast<size_t>(k * c.tensors_per_layer() + i)].raw_data());
  };
  return {at(0), at(1), c.bias ? at(2) : nullptr, c.bias ? at(3) : nullptr};
}

template <typename T>
void forward(const RnnConfig& c, const Tensor& xt, const Tensor& hxt, const Tensor& cxt, const TensorList& w,
             const Tensor& yt, const Tensor& hyt, const Tensor& cyt, T* res) {
  const ReserveLayout lay(c);
  const int64_t Tn = c.seq_len, B = c.batch, H = c.hidden_size, GH = c.gates() * H, D = c.dirs(), L = c.num_layers;
  const bool lstm = c.lstm();
  const T* hx = static_cast<const T*>(hxt.raw_data());
  const T* cx = lstm ? static_cast<const T*>(cxt.raw_data()) : nullptr;
  Mat<T> xw(Tn * B, GH), hw(B, GH);
  for (int64_t l = 0; l < L; ++l) {
    const int64_t in = c.layer_input(l);
    const T* X = l == 0 ? static_cast<const T*>(xt.raw_data()) : res + lay.out(l - 1);
    T* Y = l == L - 1 ? static_cast<T*>(yt.raw_data()) : res + lay.out(l);
    for (int64_t d = 0; d < D; ++d) {
      const int64_t k = l * D + d;
      const LayerWeights<T> wt = layer_weights<T>(c, w, k);
      xw.noalias() = CMap<T>(X, Tn * B, in) * CMap<T>(wt.ih, GH, in).transpose();
      if (wt.b_ih) xw.rowwise() += CRow<T>(wt.b_ih, GH);
      if (lstm && wt.b_hh) xw.rowwise() += CRow<T>(wt.b_hh, GH);
      T* gates = res + lay.gates(l, d);
      T* cell = res + lay.cell(l, d);
      const T* hprev = hx + k * B * H;
      int64_t hld = H;  // row stride of hprev: H for h0, D*H inside the output
      const T* cprev = lstm ? cx + k * B * H : nullptr;
      for (int64_t s = 0; s < Tn; ++s) {
        const int64_t t = d == 1 ? Tn - 1 - s : s;
        hw.noalias() = CStrided<T>(hprev, B, H, Eigen::OuterStride<>(hld)) * CMap<T>(wt.hh, GH, H).transpose();
        if (!lstm && wt.b_hh) hw.rowwise() += CRow<T>(wt.b_hh, GH);
        T* gt = gates + t * B * GH;
        T* ct = cell + t * B * H;
        T* ht = Y + t * B * D * H + d * H;
        for (int64_t b = 0; b < B; ++b) {
          const T* xr = xw.data() + (t * B + b) * GH;
          const T* hr = hw.data() + b * GH;
          T* g = gt + b * GH;
          for (int64_t j = 0; j < H; ++j) {
            if (lstm) {
              const T i = sigmoid(xr[j] + hr[j]), f = sigmoid(xr[H + j] + hr[H + j]);
              const T gg = std::tanh(xr[2 * H + j] + hr[2 * H + j]), o = sigmoid(xr[3 * H + j] + hr[3 * H + j]);
              const T cn = f * cprev[b * H + j] + i * gg;
              g[j] = i, g[H + j] = f, g[2 * H + j] = gg, g[3 * H + j] = o;
              ct[b * H + j] = cn;
              ht[b * D * H + j] = o * std::tanh(cn);
            } else {
              const T r = sigmoid(xr[j] + hr[j]), z = sigmoid(xr[H + j] + hr[H + j]);
              const T n = std::tanh(xr[2 * H + j] + r * hr[2 * H + j]);
              g[j] = r, g[H + j] = z, g[2 * H + j] = n;
              ct[b * H + j] = hr[2 * H + j];
              ht[b * D * H + j] = (T(1) - z) * n + z * hprev[b * hld + j];
            }
          }
        }
        hprev = ht;
        hld = D * H;
        if (lstm) cprev = ct;
      }
      T* hy = static_cast<T*>(hyt.raw_data()) + k * B * H;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < H; ++j) hy[b * H + j] = hprev[b * hld + j];
      if (lstm) std::copy(cprev, cprev + B * H, static_cast<T*>(cyt.raw_data()) + k * B * H);
    }
  }
}

template <typename T>
void backward(const RnnConfig& c, const Tensor& xt, const Tensor& hxt, const Tensor& cxt, const TensorList& w,
              const Tensor& yt, const T* res, const Tensor& dyt, const Tensor& dhyt, const Tensor& dcyt,
              const Tensor& dxt, const Tensor& dhxt, const Tensor& dcxt, const TensorList& dw) {
  const ReserveLayout lay(c);
  const int64_t Tn = c.seq_len, B = c.batch, H = c.hidden_size, GH = c.gates() * H, D = c.dirs(), L = c.num_layers;
  const bool lstm = c.lstm();
  const T* hx = static_cast<const T*>(hxt.raw_data());
  const T* cx = lstm ? static_cast<const T*>(cxt.raw_data()) : nullptr;
  const auto out_of = [&](int64_t i) { return static_cast<T*>(dw[static_cast<size_t>(i)].raw_data()); };
  Mat<T> dY = CMap<T>(static_cast<const T*>(dyt.raw_data()), Tn * B, D * H);  // gradient of layer l's output
  Mat<T> dG(Tn * B, GH), dGh(lstm ? 0 : Tn * B, GH), hprev_all(Tn * B, H), dh(B, H), dc(lstm ? B : 0, H), direct(B, H);
  for (int64_t l = L - 1; l >= 0; --l) {
    const int64_t in = c.layer_input(l);
    const T* X = l == 0 ? static_cast<const T*>(xt.raw_data()) : res + lay.out(l - 1);
    const T* Y = l == L - 1 ? static_cast<const T*>(yt.raw_data()) : res + lay.out(l);
    Mat<T> dX = Mat<T>::Zero(Tn * B, in);
    for (int64_t d = 0; d < D; ++d) {
      const int64_t k = l * D + d;
      const LayerWeights<T> wt = layer_weights<T>(c, w, k);
      const T* gates = res + lay.gates(l, d);
      const T* cell = res + lay.cell(l, d);
      dh = CMap<T>(static_cast<const T*>(dhyt.raw_data()) + k * B * H, B, H);
      if (lstm) dc = CMap<T>(static_cast<const T*>(dcyt.raw_data()) + k * B * H, B, H);
      for (int64_t s = Tn - 1; s >= 0; --s) {
        const int64_t t = d == 1 ? Tn - 1 - s : s;
        const int64_t tp = s == 0 ? -1 : (d == 1 ? t + 1 : t - 1);  // the step before t in this direction
        const T* hp = tp < 0 ? hx + k * B * H : Y + tp * B * D * H + d * H;
        const int64_t hld = tp < 0 ? H : D * H;
        const T* cp = !lstm ? nullptr : tp < 0 ? cx + k * B * H : cell + tp * B * H;
        for (int64_t b = 0; b < B; ++b) {
          const T* g = gates + (t * B + b) * GH;
          T* dg = dG.data() + (t * B + b) * GH;
          T* hrow = hprev_all.data() + (t * B + b) * H;
          for (int64_t j = 0; j < H; ++j) {
            const T gy = dY(t * B + b, d * H + j) + dh(b, j);
            hrow[j] = hp[b * hld + j];
            if (lstm) {
              const T i = g[j], f = g[H + j], gg = g[2 * H + j], o = g[3 * H + j];
              const T tc = std::tanh(cell[(t * B + b) * H + j]);
              const T dcell = dc(b, j) + gy * o * (T(1) - tc * tc);
              dg[j] = dcell * gg * i * (T(1) - i);
              dg[H + j] = dcell * cp[b * H + j] * f * (T(1) - f);
              dg[2 * H + j] = dcell * i * (T(1) - gg * gg);
              dg[3 * H + j] = gy * tc * o * (T(1) - o);
              dc(b, j) = dcell * f;
            } else {
              const T r = g[j], z = g[H + j], n = g[2 * H + j], hn = cell[(t * B + b) * H + j];
              const T dn = gy * (T(1) - z) * (T(1) - n * n);
              const T dr = dn * hn * r * (T(1) - r);
              const T dz = gy * (hrow[j] - n) * z * (T(1) - z);
              T* dgh = dGh.data() + (t * B + b) * GH;
              dg[j] = dgh[j] = dr;
              dg[H + j] = dgh[H + j] = dz;
              dg[2 * H + j] = dn;
              dgh[2 * H + j] = dn * r;
              direct(b, j) = gy * z;
            }
          }
        }
        const Mat<T>& dpre = lstm ? dG : dGh;
        if (lstm) {
          dh.noalias() = dpre.middleRows(t * B, B) * CMap<T>(wt.hh, GH, H);
        } else {
          dh = direct;
          dh.noalias() += dpre.middleRows(t * B, B) * CMap<T>(wt.hh, GH, H);
        }
      }
      const int64_t base = k * c.tensors_per_layer();
      MMap<T>(out_of(base), GH, in).noalias() = dG.transpose() * CMap<T>(X, Tn * B, in);
      MMap<T>(out_of(base + 1), GH, H).noalias() = (lstm ? dG : dGh).transpose() * hprev_all;
      if (c.bias) {
        MRow<T>(out_of(base + 2), GH) = dG.colwise().sum();
        MRow<T>(out_of(base + 3), GH) = (lstm ? dG : dGh).colwise().sum();
      }
      dX.noalias() += dG * CMap<T>(wt.ih, GH, in);
      MMap<T>(static_cast<T*>(dhxt.raw_data()) + k * B * H, B, H) = dh;
      if (lstm) MMap<T>(static_cast<T*>(dcxt.raw_data()) + k * B * H, B, H) = dc;
    }
    if (l > 0) {
      dY = std::move(dX);
    } else {
      MMap<T>(static_cast<T*>(dxt.raw_data()), Tn * B, in) = dX;
    }
  }
}

}  // namespace

int64_t rnn_reserve_elements(const RnnConfig& cfg) { return ReserveLayout(cfg).total(); }

namespace {

// The kernels take float32 or float64 (16-bit layers reach them widened) and a reserve that holds
// `n` elements of that dtype: a short one would be written or read past its end.
void check_kernel_operands(const char* op, const RnnConfig& cfg, const Tensor& reserve, size_t n) {
  TG_CHECK(cfg.dtype == kFloat32 || cfg.dtype == kFloat64, "[", op, "] internal error: the CPU kernels take ",
           "float32 or float64 (16-bit layers compute on float32 copies), got ", dtype_name(cfg.dtype));
  const auto bytes = static_cast<int64_t>(n) * dtype_size(cfg.dtype);
  TG_CHECK(!reserve.defined() || reserve.numel() * dtype_size(reserve.dtype()) >= bytes, "[", op,
           "] internal error: a reserve of ", reserve.numel() * dtype_size(reserve.dtype()), " bytes, the kernels need ",
           bytes);
}

}  // namespace

void rnn_forward(const RnnConfig& cfg, const Tensor& x, const Tensor& hx, const Tensor& cx, const TensorList& weights,
                 const Tensor& y, const Tensor& hy, const Tensor& cy, const Tensor& reserve) {
  // Without a reserve (no backward will follow) the saved quantities go to scratch memory.
  const auto n = static_cast<size_t>(rnn_reserve_elements(cfg));
  check_kernel_operands("rnn", cfg, reserve, n);
  if (cfg.dtype == kFloat32) {
    std::vector<float> scratch(reserve.defined() ? 0 : n);
    float* res = reserve.defined() ? static_cast<float*>(reserve.raw_data()) : scratch.data();
    forward<float>(cfg, x, hx, cx, weights, y, hy, cy, res);
  } else {
    std::vector<double> scratch(reserve.defined() ? 0 : n);
    double* res = reserve.defined() ? static_cast<double*>(reserve.raw_data()) : scratch.data();
    forward<double>(cfg, x, hx, cx, weights, y, hy, cy, res);
  }
}

void rnn_backward(const RnnConfig& cfg, const Tensor& x, const Tensor& hx, const Tensor& cx, const TensorList& weights,
                  const Tensor& y, const Tensor& reserve, const Tensor& dy, const Tensor& dhy, const Tensor& dcy,
                  const Tensor& dx, const Tensor& dhx, const Tensor& dcx, const TensorList& dweights) {
  check_kernel_operands("rnn_backward", cfg, reserve, static_cast<size_t>(rnn_reserve_elements(cfg)));
  if (cfg.dtype == kFloat32) {
    backward<float>(cfg, x, hx, cx, weights, y, static_cast<const float*>(reserve.raw_data()), dy, dhy, dcy, dx, dhx,
                    dcx, dweights);
  } else {
    backward<double>(cfg, x, hx, cx, weights, y, static_cast<const double*>(reserve.raw_data()), dy, dhy, dcy, dx,
                     dhx, dcx, dweights);
  }
}

}  // namespace tg::cpu
