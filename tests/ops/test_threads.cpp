// CPU thread control: products agree across thread counts, bad counts are rejected.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ops/linalg/cpu/openblas.h"
#include "support/test_support.h"

namespace tg {
namespace {

TEST(Threads, DefaultIsOneThread) { EXPECT_EQ(get_num_threads(), 1); }

TEST(Threads, ProductsAgreeAcrossThreadCounts) {
  const Tensor a = testing::random_tensor({96, 200}, kFloat32);
  const Tensor b = testing::random_tensor({200, 150}, kFloat32);
  const Tensor one = mm(a, b);
  set_num_threads(2);
  EXPECT_EQ(get_num_threads(), 2);
  const Tensor two = mm(a, b);
  set_num_threads(1);
  testing::expect_close(one, two, 1e-5, 1e-5);
  // Float64 against a float64 product of float32-exact values: the BLAS path is exact enough.
  testing::expect_close(mm(a.to(kFloat64), b.to(kFloat64)), one, 1e-5, 1e-4);
}

// OpenBLAS runs the kernels this CPU's features call for, whatever model name the CPU reports.
TEST(OpenBlasKernels, MatchTheCpuFeatures) {
  const std::string expected = cpu::openblas_core_for_this_cpu();
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  if (!cpu::openblas_chooses_kernels() || expected.empty() || (user != nullptr && *user != '\0'))
    GTEST_SKIP() << "no OpenBLAS with every kernel set, no AVX, or OPENBLAS_CORETYPE set by the user";
  EXPECT_EQ(cpu::openblas_core(), expected);
  EXPECT_EQ(std::getenv("OPENBLAS_CORETYPE"), nullptr) << "the variable set for loading OpenBLAS was left behind";
}

TEST(Threads, RejectsCountsBelowOne) {
  EXPECT_THROW_MSG(set_num_threads(0), "expected a thread count of at least 1, got 0");
  EXPECT_EQ(get_num_threads(), 1);
}

}  // namespace
}  // namespace tg
