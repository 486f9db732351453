// CPU loops of linear_cross_entropy's per-row steps, and the dispatch to the CUDA kernels.
#include "ops/loss/linear_cross_entropy_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/half.h"

#ifdef TG_WITH_CUDA
#include "ops/loss/cuda/linear_cross_entropy.h"
#endif

namespace tg {
namespace {

// Row r's class index, or -1 when ignored; a target outside [0, classes) is an error.
int64_t checked_row_target(const char* op, const Tensor& target, int64_t r, int64_t classes, int64_t ignore_index,
                           int64_t first_row) {
  const int64_t t = target.data_ptr<int64_t>()[r * target.stride(0)];
  if (t == ignore_index) return -1;
  TG_CHECK(t >= 0 && t < classes, "[", op, "] target ", t, " is out of bounds: expected a class index in [0, ",
           classes - 1, "] or ignore_index ", ignore_index, " (at batch index ", first_row + r, ")");
  return t;
}

}  // namespace

void linear_cross_entropy_rows_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                       int64_t first_row, const Tensor& lse, const Tensor& loss) {
  if (logits.numel() == 0) return;
#ifdef TG_WITH_CUDA
  if (logits.is_cuda()) {
    cuda::linear_cross_entropy_rows_forward(logits, target, ignore_index, first_row, lse, loss);
    return;
  }
#endif
  const int64_t rows = logits.size(0), classes = logits.size(1);
  TG_DISPATCH_FLOATING(logits.dtype(), "linear_cross_entropy", [&] {
    using A = acc_type<scalar_t>;
    const scalar_t* x = logits.data_ptr<scalar_t>();
    A* lse_p = lse.data_ptr<A>();
    A* loss_p = loss.data_ptr<A>();
    for (int64_t r = 0; r < rows; ++r) {
      const scalar_t* row = x + r * classes;
      A m = -std::numeric_limits<A>::infinity();
      for (int64_t c = 0; c < classes; ++c) m = std::max(m, static_cast<A>(row[c]));
      A s = 0;
      for (int64_t c = 0; c < classes; ++c) s += std::exp(static_cast<A>(row[c]) - m);
      const A l = m + std::log(s);
      lse_p[r] = l;
      const int64_t t = checked_row_target("linear_cross_entropy", target, r, classes, ignore_index, first_row);
      loss_p[r] = t < 0 ? A(0) : l - static_cast<A>(row[t]);
    }
  });
}

void linear_cross_entropy_rows_backward(const Tensor& logits, const Tensor& lse, const Tensor& target,
                                        int64_t ignore_index, int64_t first_row, const Tensor& row_grad) {
  if (logits.numel() == 0) return;
#ifdef TG_WITH_CUDA
  if (logits.is_cuda()) {
    cuda::linear_cross_entropy_rows_backward(logits, lse, target, ignore_index, first_row, row_grad);
    return;
  }
#endif
  const int64_t rows = logits.size(0), classes = logits.size(1);
  const int64_t grad_stride = row_grad.numel() == 1 ? 0 : 1;
  TG_DISPATCH_FLOATING(logits.dtype(), "linear_cross_entropy_backward", [&] {
    using A = acc_type<scalar_t>;
    scalar_t* x = logits.data_ptr<scalar_t>();
    const A* lse_p = lse.data_ptr<A>();
    const A* g = row_grad.data_ptr<A>();
    for (int64_t r = 0; r < rows; ++r) {
      scalar_t* row = x + r * classes;
      const int64_t t =
          checked_row_target("linear_cross_entropy_backward", target, r, classes, ignore_index, first_row);
      if (t < 0) {  // an ignored row takes no gradient
        std::fill(row, row + classes, scalar_t(0));
        continue;
      }
      const A gr = g[r * grad_stride];
      for (int64_t c = 0; c < classes; ++c) {
        const A p = std::exp(static_cast<A>(row[c]) - lse_p[r]);
        row[c] = static_cast<scalar_t>((p - (c == t ? A(1) : A(0))) * gr);
      }
    }
  });
}

void linear_cross_entropy_rows_forward_backward(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                                int64_t first_row, const Tensor& lse, const Tensor& loss,
                                                const Tensor& row_grad) {
#ifdef TG_WITH_CUDA
  if (logits.is_cuda() &&
      cuda::linear_cross_entropy_rows_fused(logits, target, ignore_index, first_row, lse, loss, row_grad))
    return;
#endif
  linear_cross_entropy_rows_forward(logits, target, ignore_index, first_row, lse, loss);
  linear_cross_entropy_rows_backward(logits, lse, target, ignore_index, first_row, row_grad);
}

}  // namespace tg
