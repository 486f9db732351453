// Helpers shared by the test suites: gradient checks, CPU-vs-CUDA checks, error-message assertions.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "tapegraph.h"

namespace tg::testing {

// A function of several tensors returning one tensor, as checked by gradcheck.
using TensorFn = std::function<Tensor(const TensorList&)>;

// Compares the analytical gradient of fn at `inputs` (CPU float64 tensors; those with
// requires_grad are checked) with central finite differences of a random projection of fn's
// output. Records a gtest failure naming the input and element on mismatch.
void expect_gradcheck(const TensorFn& fn, const TensorList& inputs, double eps = 1e-6, double atol = 1e-5,
                      double rtol = 1e-3);

// Checks second derivatives: gradcheck of the map inputs -> grad(fn(inputs)) with create_graph.
void expect_gradgradcheck(const TensorFn& fn, const TensorList& inputs, double eps = 1e-6, double atol = 1e-5,
                          double rtol = 1e-3);

// Runs fn on the CPU inputs and on CUDA copies of them and expects equal values (within tolerance).
// Call only after TG_REQUIRE_CUDA().
void expect_cuda_matches_cpu(const TensorFn& fn, const TensorList& cpu_inputs, double rtol = 1e-5,
                             double atol = 1e-6);

// Expects a and b to have equal sizes and close values (any devices, any dtypes).
void expect_close(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

// Drops `model`'s gradients, runs loss.backward() and returns copies of the loss and then of every
// parameter's gradient, in parameters() order (compiled results compare with eager ones this way).
TensorList loss_and_grads(nn::Module& model, const Tensor& loss);

// Uniform random CPU tensor in [lo, hi) of the given dtype, optionally requiring grad.
Tensor random_tensor(const Shape& sizes, DType dtype = kFloat64, bool requires_grad = false, double lo = -1.0,
                     double hi = 1.0);

}  // namespace tg::testing

// Skips the current test when no CUDA device is present.
#define TG_REQUIRE_CUDA()                                          \
  do {                                                             \
    if (!::tg::cuda_is_available()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

// Expects `stmt` to throw tg::Error whose message contains `substring`.
#define EXPECT_THROW_MSG(stmt, substring)                                                         \
  do {                                                                                            \
    try {                                                                                         \
      stmt;                                                                                       \
      ADD_FAILURE() << "expected tg::Error containing \"" << (substring) << "\", nothing thrown"; \
    } catch (const ::tg::Error& e) {                                                              \
      EXPECT_NE(std::string(e.what()).find(substring), std::string::npos)                         \
          << "message was: " << e.what();                                                         \
    }                                                                                             \
  } while (0)
