// How many threads CPU kernels may use (BLAS and Eigen). The default is 1, so that measurements
// compare with single-threaded libtorch; raise it for throughput on many-core hosts.
#pragma once

namespace tg {

// Sets the number of threads CPU matrix products may use (n >= 1).
void set_num_threads(int n);
// The number of threads CPU matrix products may use.
int get_num_threads();

namespace cpu {
// Applies the thread setting to the BLAS library once per process before its first use (OpenBLAS
// otherwise starts one thread per core).
void apply_thread_setting_once();
}  // namespace cpu

}  // namespace tg
