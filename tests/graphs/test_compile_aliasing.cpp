// compile() against eager mode where in-place writes meet aliasing: an operand that aliases the
// tensor it writes, an input written with a value that requires grad, and writes through views
// whose results feed later ops (cases found by the differential fuzzer, each with its class).
#include <gtest/gtest.h>

#include "graphs/testing/parity.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::random_tensor;

testing::ParityOptions aot3() { return {.compile = {.backend = "aot_eager"}, .rtol = 1e-5, .atol = 1e-6, .calls = 3}; }

// The operand is the whole tensor that its own narrow view is written with: eager reads the
// operand before the write lands, and so must the compiled graph.
TEST(CompileAliasing, InPlaceOperandAliasesItsTarget) {
  auto fn = [](const TensorList& in) {
    Tensor c = in[0];
    c.narrow(1, 0, 1).add_(c);
    return TensorList{c.amax({0}, true) * 1};
  };
  testing::expect_compiled_matches_eager(fn, {random_tensor({3, 1}, kFloat32)}, aot3());
}

// The class: a view written with its own base read through another view, and a partially
// overlapping operand, which eager mode rejects and so must compiled mode. The first write reads
// the very elements it overwrites, which autograd would need saved (eager's backward reports
// them as modified, as PyTorch's does), so the values are compared without gradients.
TEST(CompileAliasing, InPlaceOperandOverlapsItsTarget) {
  auto from_base = [](const TensorList& in) {
    Tensor c = in[0].clone();
    Tensor v = c.t();
    v.add_(c.t() * 2);
    v.narrow(0, 0, 1).mul_(c.narrow(1, 0, 1).t());
    return TensorList{v.sum({0}), c};
  };
  testing::expect_compiled_matches_eager(from_base, {random_tensor({3, 3}, kFloat32)}, aot3());
  auto shifted = [](const TensorList& in) {
    Tensor c = in[0];
    c.narrow(0, 1, 3).mul_(c.narrow(0, 0, 3));
    return TensorList{c * 1};
  };
  const char* message = "refer to a single memory location";
  EXPECT_THROW_MSG(shifted({random_tensor({4, 2}, kFloat32)}), message);
  graphs::CompiledFunction compiled(shifted, aot3().compile);
  EXPECT_THROW_MSG(compiled.call({random_tensor({4, 2}, kFloat32)}), message);
}

// An input that does not require grad is written with a value that does, then used: its
// gradient flows into b through the write.
TEST(CompileAliasing, InputWrittenWithAValueThatRequiresGrad) {
  auto fn = [](const TensorList& in) {
    Tensor b = in[0], c = in[1];
    c.narrow(0, 0, 2).add_(b.sum({0}));
    return TensorList{c * 1};
  };
  testing::expect_compiled_matches_eager(fn, {random_tensor({3, 4}, kFloat32, true), random_tensor({3, 4}, kFloat32)},
                                         aot3());
  auto whole = [](const TensorList& in) {
    Tensor b = in[0], c = in[1];
    c.copy_(b.exp());
    return TensorList{(c * c).sum()};
  };
  testing::expect_compiled_matches_eager(whole, {random_tensor({3}, kFloat32, true), random_tensor({3}, kFloat32)},
                                         aot3());
}

// The same through a view of a non-contiguous input: the backward's buffers keep the input's
// layout inside the graph as they do in eager mode.
TEST(CompileAliasing, NonContiguousInputWrittenWithAValueThatRequiresGrad) {
  auto fn = [](const TensorList& in) {
    Tensor a = in[0], c = in[1];
    Tensor v = c.narrow(1, 1, 1);
    v.copy_(a * -0.5 + 1.0);
    return TensorList{v.exp()};
  };
  const Tensor c = random_tensor({1, 4, 2}, kFloat32).transpose(-1, -2);
  testing::expect_compiled_matches_eager(fn, {random_tensor({4}, kFloat32, true), c}, aot3());
}

// Writes into an input through a view and into a transposed intermediate, with grads; this
// program crashed the compiled call.
TEST(CompileAliasing, WritesThroughViewsFeedingLaterOps) {
  auto fn = [](const TensorList& in) {
    Tensor a = in[0], b = in[1], c = in[2];
    Tensor v3 = c.softmax(1);
    Tensor v4 = b.amax({1});
    c.narrow(0, 0, 1).add_(v4.detach() * 0 + 1);
    Tensor v8 = v3.t().add_(v4);
    return TensorList{a.mean({0}, true) * 1, v8 * 1};
  };
  testing::expect_compiled_matches_eager(
      fn, {random_tensor({3, 4}, kFloat32, true), random_tensor({1, 4}, kFloat32, true), random_tensor({1, 4}, kFloat32)},
      aot3());
}

}  // namespace
}  // namespace tg
