#include "ops/random/random_draw.h"

#include "ops/random/cpu/philox_fill.h"
#include "ops/random/random_dist.h"
#include "tensor/check.h"

#ifdef TG_WITH_CUDA
#include "ops/random/cuda/random.h"
#endif

namespace tg {

int64_t elements_per_block(RandomKind kind, DType dtype) {
  if (kind == RandomKind::Randint) return RandintBlock<int64_t>::kPerBlock;
  return dtype == kFloat64 ? UniformBlock<double>::kPerBlock : UniformBlock<float>::kPerBlock;
}

uint64_t random_blocks(RandomKind kind, DType dtype, int64_t numel) {
  const auto per = static_cast<uint64_t>(elements_per_block(kind, dtype));
  return (static_cast<uint64_t>(numel) + per - 1) / per;
}

void draw_random(const Tensor& out, RandomKind kind, PhiloxState state, std::string_view op, int64_t low,
                 uint64_t range) {
  const int64_t n = out.numel();
  TG_CHECK(out.is_contiguous(), "[", op, "] expected a contiguous output");
#ifdef TG_WITH_CUDA
  if (out.is_cuda()) {
    switch (kind) {
      case RandomKind::Uniform: philox_uniform_cuda(out.raw_data(), out.dtype(), n, state); return;
      case RandomKind::Normal: philox_normal_cuda(out.raw_data(), out.dtype(), n, state); return;
      case RandomKind::Randint: philox_randint_cuda(out.raw_data(), out.dtype(), n, low, range, state); return;
    }
  }
#endif
  TG_CHECK(out.is_cpu(), "[", op, "] unsupported device ", out.device().str());
  if (kind == RandomKind::Randint) {
    TG_DISPATCH_ALL(out.dtype(), "randint", [&] {
      cpu::philox_fill(out.data_ptr<scalar_t>(), n, state, RandintBlock<scalar_t>{low, range});
    });
    return;
  }
  TG_DISPATCH_FLOATING(out.dtype(), op, [&] {
    if (kind == RandomKind::Uniform) cpu::philox_fill(out.data_ptr<scalar_t>(), n, state, UniformBlock<scalar_t>{});
    else cpu::philox_fill(out.data_ptr<scalar_t>(), n, state, NormalBlock<scalar_t>{});
  });
}

}  // namespace tg
