// N elements of T loaded or stored as one aligned access (16 bytes at most), for kernels that read
// rows in vectors.
#pragma once

namespace tg::cuda {

template <typename T, int N>
struct alignas(sizeof(T) * N) AlignedVector {
  T v[N];
};

}  // namespace tg::cuda
