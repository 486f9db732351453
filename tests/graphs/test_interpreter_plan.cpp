// The interpreter's output plan: calls whose inputs have the traced metadata allocate outputs from
// it; any other call (other sizes, dtypes, layouts, zero elements) infers them as eager code does.
#include <gtest/gtest.h>

#include "graphs/compile.h"
#include "graphs/runtime/interpreter.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::random_tensor;

CompileOptions aot() { return CompileOptions{.backend = "aot_eager"}; }

// Eager reference of the traced function below.
Tensor reference(const Tensor& x) { return (x * 2.0 + 1.0).relu() * x; }

// The forward graph of `reference`, traced for a 3x4 float32 input.
struct Traced {
  Compiled<Tensor (*)(const Tensor&)> f = compile(+[](const Tensor& x) { return reference(x); }, aot());
  Traced() { f(random_tensor({3, 4}, kFloat32)); }
  const graphs::Graph& graph() const { return f.last_partition()->forward; }
};

void expect_matches_reference(graphs::Interpreter& interp, const Tensor& x) {
  TensorList out = interp.run({x});
  const Tensor want = reference(x);
  ASSERT_EQ(out[0].sizes(), want.sizes());
  ASSERT_EQ(out[0].dtype(), want.dtype());
  testing::expect_close(out[0], want, 1e-6, 1e-6);
}

TEST(InterpreterPlan, TracedMetadataRunsMatchEager) {
  Traced t;
  graphs::Interpreter interp(t.graph());
  for (int i = 0; i < 3; ++i) expect_matches_reference(interp, random_tensor({3, 4}, kFloat32));
}

TEST(InterpreterPlan, OtherSizesDtypesAndLayoutsInferTheirOutputs) {
  Traced t;
  graphs::Interpreter interp(t.graph());
  expect_matches_reference(interp, random_tensor({5, 4}, kFloat32));
  expect_matches_reference(interp, random_tensor({3, 4}, kFloat64));
  expect_matches_reference(interp, random_tensor({4, 3}, kFloat32).t());
  expect_matches_reference(interp, random_tensor({0, 4}, kFloat32));
  expect_matches_reference(interp, random_tensor({3, 4}, kFloat32));  // and back to the plan
}

TEST(InterpreterPlan, ZeroElementGraphsLaunchNothing) {
  auto f = compile([](const Tensor& x) { return (x * 2.0 + 1.0).relu() * x; }, aot());
  const Tensor x = random_tensor({0, 4}, kFloat32);
  f(x);
  graphs::Interpreter interp(f.last_partition()->forward);
  TensorList out = interp.run({x});
  EXPECT_EQ(out[0].sizes(), (Shape{0, 4}));
}

}  // namespace
}  // namespace tg
