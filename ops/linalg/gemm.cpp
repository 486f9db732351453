#include "ops/linalg/gemm.h"

#include <algorithm>

#include "ops/elementwise/copy.h"

namespace tg {

std::optional<GemmOperand> blas_layout(const MatRef& m) {
  const int64_t r = m.rows, c = m.cols, rs = m.row_stride, cs = m.col_stride;
  // Row-major: unit column stride and rows that do not overlap (a single row or column needs less).
  if ((cs == 1 || c == 1) && (r == 1 || rs >= std::max<int64_t>(1, c)))
    return GemmOperand{m.data, false, r == 1 ? std::max<int64_t>(1, c) : rs, 0};
  // Column-major: the transpose of a row-major matrix.
  if ((rs == 1 || r == 1) && (c == 1 || cs >= std::max<int64_t>(1, r)))
    return GemmOperand{m.data, true, c == 1 ? std::max<int64_t>(1, r) : cs, 0};
  return std::nullopt;
}

std::optional<MatRef> as_matrix(const Tensor& t) {
  const Shape& sz = t.sizes();
  const Shape& st = t.strides();
  const int64_t d = t.dim();
  MatRef m;
  m.data = t.raw_data();
  if (d == 0) {
    m.rows = m.cols = m.row_stride = m.col_stride = 1;
    return m;
  }
  m.cols = sz[d - 1];
  m.col_stride = st[d - 1];
  m.rows = 1;
  m.row_stride = std::max<int64_t>(1, m.cols);
  bool first = true;
  for (int64_t i = d - 2; i >= 0; --i) {
    if (sz[i] == 1) continue;
    if (first) {
      m.row_stride = st[i];
      m.rows = sz[i];
      first = false;
    } else if (st[i] == m.row_stride * m.rows) {
      m.rows *= sz[i];
    } else {
      return std::nullopt;
    }
  }
  return m;
}

MatRef transposed(const MatRef& m) { return MatRef{m.data, m.cols, m.rows, m.col_stride, m.row_stride}; }

GemmOperand gemm_operand(const Tensor& t, bool transpose, Tensor& keep) {
  if (std::optional<MatRef> m = as_matrix(t)) {
    if (std::optional<GemmOperand> op = blas_layout(transpose ? transposed(*m) : *m)) return *op;
  }
  keep = contiguous(t);
  std::optional<MatRef> m = as_matrix(keep);
  TG_CHECK(m.has_value(), "[gemm] internal error: a contiguous tensor did not flatten to a matrix");
  std::optional<GemmOperand> op = blas_layout(transpose ? transposed(*m) : *m);
  TG_CHECK(op.has_value(), "[gemm] internal error: a contiguous matrix has no BLAS layout");
  return *op;
}

GemmOperand batched_gemm_operand(const Tensor& t, bool transpose, Tensor& keep) {
  auto inner = [transpose](const Tensor& x) {
    MatRef m{x.raw_data(), x.size(1), x.size(2), x.stride(1), x.stride(2)};
    return blas_layout(transpose ? transposed(m) : m);
  };
  if (std::optional<GemmOperand> op = inner(t)) {
    op->batch_stride = t.size(0) == 1 ? 0 : t.stride(0);
    return *op;
  }
  keep = contiguous(t);
  std::optional<GemmOperand> op = inner(keep);
  TG_CHECK(op.has_value(), "[gemm] internal error: a contiguous batch of matrices has no BLAS layout");
  op->batch_stride = keep.size(1) * keep.size(2);
  return *op;
}

}  // namespace tg
