#include "ops/loss/linear_cross_entropy_chunks.h"

#include <algorithm>

#include "ops/elementwise/compare.h"
#include "ops/linalg/matmul_kernels.h"
#include "ops/reduce/reduce.h"
#include "tensor/shape.h"

namespace tg::lce {
namespace {

// The logits of one chunk stay under this many bytes when the caller picks no chunk size.
constexpr int64_t kChunkBytes = int64_t{256} << 20;

// out (contiguous [n, m]) = op(a) @ op(b), or += with `accumulate`; a float32 `out` of 16-bit
// operands is written by the product itself (its float32 accumulator, never rounded to 16 bits).
void product(const Tensor& out, int64_t n, int64_t m, int64_t k, const Tensor& a, bool trans_a, const Tensor& b,
             bool trans_b, bool accumulate) {
  if (out.dtype() == a.dtype() && !accumulate) {
    gemm_2d(out, n, m, k, a, trans_a, b, trans_b, 1.0, nullptr, 0.0);
    return;
  }
  Tensor keep_a, keep_b;
  Gemm g = gemm_2d_plan(out, n, m, k, a, trans_a, b, trans_b, 1.0, keep_a, keep_b);
  if (out.dtype() != a.dtype()) {
    TG_CHECK(out.dtype() == kFloat32 && dtype_size(a.dtype()) == 2, "[linear_cross_entropy] internal error: a ",
             dtype_name(out.dtype()), " product of ", dtype_name(a.dtype()), " operands");
    g.dtype = a.dtype();
    g.float32_out = true;
  }
  g.beta = accumulate ? 1.0 : 0.0;
  run_gemm(g);
}

}  // namespace

DType accumulation_dtype(DType t) { return t == kFloat16 || t == kBFloat16 ? kFloat32 : t; }

Device check_args(const char* op, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor& target,
                  bool any_rank) {
  TG_CHECK(x.dim() == 2 || (any_rank && x.dim() > 2), "[", op, "] expected input of shape [N, D]",
           any_rank ? " or [..., D]" : "", ", got ", shape_str(x.sizes()));
  TG_CHECK(is_floating(x.dtype()), "[", op, "] expected a floating input, got ", dtype_name(x.dtype()));
  TG_CHECK(w.dim() == 2, "[", op, "] expected weight of shape [V, D], got ", shape_str(w.sizes()));
  TG_CHECK(w.dtype() == x.dtype(), "[", op, "] expected weight of the input's dtype ", dtype_name(x.dtype()), ", got ",
           dtype_name(w.dtype()));
  const int64_t features = x.size(-1), rows = shape_numel(Shape(x.sizes().begin(), x.sizes().end() - 1));
  TG_CHECK(w.size(1) == features, "[", op, "] input ", shape_str(x.sizes()), " has ", features,
           " features but weight ", shape_str(w.sizes()), " expects ", w.size(1));
  TG_CHECK(w.size(0) >= 1, "[", op, "] expected at least one class (weight [V, D] with V >= 1), got weight ",
           shape_str(w.sizes()));
  if (b != nullptr) {
    TG_CHECK(b->dtype() == x.dtype(), "[", op, "] expected bias of the input's dtype ", dtype_name(x.dtype()),
             ", got ", dtype_name(b->dtype()));
    TG_CHECK(b->sizes() == Shape{w.size(0)}, "[", op, "] expected bias of shape [", w.size(0),
             "] (one per class), got ", shape_str(b->sizes()));
  }
  TG_CHECK(target.dtype() == kInt64, "[", op, "] expected target of dtype int64 (class indices), got ",
           dtype_name(target.dtype()));
  TG_CHECK(target.sizes() == Shape{rows}, "[", op, "] expected target of shape [", rows, "] for input ",
           shape_str(x.sizes()), ", got ", shape_str(target.sizes()));
  return b != nullptr ? common_device(op, {x, w, *b, target}) : common_device(op, {x, w, target});
}

int64_t chunk_rows_for(int64_t requested, int64_t rows, int64_t classes, DType dtype) {
  const int64_t most = std::max<int64_t>(rows, 1);
  if (requested > 0) return std::min(requested, most);
  return std::clamp<int64_t>(kChunkBytes / (classes * dtype_size(dtype)), 1, most);
}

void chunk_logits(const Tensor& logits, const Tensor& x, const Tensor& w, const Tensor* b, int64_t start, int64_t c) {
  BiasRef bias;
  if (b != nullptr) bias = BiasRef{b->raw_data(), 0, b->stride(0)};
  gemm_2d(logits, c, w.size(0), w.size(1), x.narrow(0, start, c), false, w, true, 1.0, b != nullptr ? &bias : nullptr,
          b != nullptr ? 1.0 : 0.0);
}

Tensor counted_rows(const Tensor& target, int64_t ignore_index, DType dtype) {
  return sum(ne(target, ignore_index).to(dtype));
}

void add_chunk_products(const Tensor& dl, const Tensor& x, const Tensor& w, int64_t start, const Tensor& dx,
                        const Tensor& dw, const Tensor& db) {
  const int64_t c = dl.size(0), v = w.size(0), d = w.size(1);
  if (d > 0) {
    if (dx.defined()) product(dx.narrow(0, start, c), c, d, v, dl, false, w, false, false);
    if (dw.defined()) product(dw, v, d, c, dl, true, x.narrow(0, start, c), false, start > 0);
  }
  if (db.defined()) {
    Tensor sums = db;
    sums.add_(sum(dl, {0}, false, db.dtype()));
  }
}

std::string LinearCrossEntropyBase::attrs() const {
  std::string s = std::string("reduction=") + reduction_name(reduction_);
  if (ignore_index_ != kDefaultIgnoreIndex) s += ", ignore_index=" + std::to_string(ignore_index_);
  if (chunk_rows_ != 0) s += ", chunk_rows=" + std::to_string(chunk_rows_);
  return s;
}

}  // namespace tg::lce
