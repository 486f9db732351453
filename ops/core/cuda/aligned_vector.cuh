// N elements of T loaded or stored as one aligned access (16 bytes at most), for kernels that read
// rows in vectors.
#pragma once

#include <cstdint>

namespace tg::cuda {

// Whether p can be read and written as 16-byte vectors.
inline bool aligned_16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename T, int N>
struct alignas(sizeof(T) * N) AlignedVector {
  T v[N];
};

}  // namespace tg::cuda
