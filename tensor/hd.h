// TG_HD marks functions usable from both host code and CUDA kernels.
#pragma once

#if defined(__CUDACC__)
#define TG_HD __host__ __device__ __forceinline__
#else
#define TG_HD inline
#endif
