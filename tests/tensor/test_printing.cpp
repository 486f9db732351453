// Printing: the exact strings PyTorch produces for the same tensors.
#include <cmath>
#include <limits>
#include <sstream>

#include "support/test_support.h"

namespace tg {
namespace {

Tensor iota(int64_t n, DType dtype) { return arange(n, {.dtype = dtype}); }

TEST(Printing, FloatMatrix) {
  Tensor x = tensor({1.f, 2.f, 3.f, 4.f}).view({2, 2});
  EXPECT_EQ(x.to_string(), "tensor([[1., 2.],\n        [3., 4.]])");
  std::ostringstream os;
  os << x;
  EXPECT_EQ(os.str(), x.to_string());
}

TEST(Printing, NumberFormats) {
  EXPECT_EQ(tensor({1.5f, 2.25f}).to_string(), "tensor([1.5000, 2.2500])");
  EXPECT_EQ(tensor({-1.5f, 2.f}).to_string(), "tensor([-1.5000,  2.0000])");
  EXPECT_EQ(tensor({1e-5f, 1.f}).to_string(), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(tensor({1.f, 2000.f}).to_string(), "tensor([1.0000e+00, 2.0000e+03])");
  EXPECT_EQ(tensor({0.f, 0.f}).to_string(), "tensor([0., 0.])");
  EXPECT_EQ(tensor({-3.f, 10.f}).to_string(), "tensor([-3., 10.])");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(tensor({nan, 1.f, inf, -inf}).to_string(), "tensor([nan, 1., inf, -inf])");
  EXPECT_EQ(tensor({0.1f, nan}).to_string(), "tensor([0.1000,    nan])");
  EXPECT_EQ(scalar_tensor(3.0f).to_string(), "tensor(3.)");
  EXPECT_EQ(scalar_tensor(0.5, {.dtype = kFloat64}).to_string(), "tensor(0.5000, dtype=torch.float64)");
}

TEST(Printing, IntegersBoolsAndDtypes) {
  EXPECT_EQ(tensor<int64_t>({1, 2, 3}).to_string(), "tensor([1, 2, 3])");
  EXPECT_EQ(tensor<int64_t>({-10, 2}).to_string(), "tensor([-10,   2])");
  EXPECT_EQ(tensor<int32_t>({1, 2}).to_string(), "tensor([1, 2], dtype=torch.int32)");
  EXPECT_EQ(tensor({true, false}).to_string(), "tensor([ True, False])");
  EXPECT_EQ(tensor({1.0, 2.0}).to_string(), "tensor([1., 2.], dtype=torch.float64)");
  EXPECT_EQ(scalar_tensor(true).to_string(), "tensor(True)");
  EXPECT_EQ(scalar_tensor(7).to_string(), "tensor(7)");
}

TEST(Printing, ThreeDims) {
  EXPECT_EQ(iota(8, kInt64).view({2, 2, 2}).to_string(),
            "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])");
}

TEST(Printing, LineWrapping) {
  EXPECT_EQ(iota(30, kFloat32).to_string(),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
            "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
            "        28., 29.])");
}

TEST(Printing, Summarization) {
  EXPECT_EQ(iota(2000, kInt64).to_string(), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  EXPECT_EQ(iota(2000, kFloat32).to_string(),
            "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n        1.9990e+03])");
  EXPECT_EQ(zeros({100, 100}).to_string(),
            "tensor([[0., 0., 0.,  ..., 0., 0., 0.],\n"
            "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
            "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
            "        ...,\n"
            "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
            "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
            "        [0., 0., 0.,  ..., 0., 0., 0.]])");
  // Exactly 1000 elements are printed in full.
  EXPECT_EQ(iota(1000, kInt64).to_string().find("..."), std::string::npos);
}

TEST(Printing, NonContiguousPrintsLogicalOrder) {
  Tensor x = iota(6, kInt64).view({2, 3}).t();
  EXPECT_EQ(x.to_string(), "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])");
}

TEST(Printing, EmptyAndMeta) {
  EXPECT_EQ(zeros({0}).to_string(), "tensor([])");
  EXPECT_EQ(zeros({2, 0}).to_string(), "tensor([], size=(2, 0))");
  EXPECT_EQ(zeros({0}, {.dtype = kInt64}).to_string(), "tensor([], dtype=torch.int64)");
  EXPECT_EQ(empty({2, 3}, {.device = kMeta}).to_string(), "tensor(..., device='meta', size=(2, 3))");
  EXPECT_EQ(empty({4}, {.dtype = kFloat64, .device = kMeta}).to_string(),
            "tensor(..., device='meta', size=(4,), dtype=torch.float64)");
}

TEST(Printing, AutogradSuffixes) {
  Tensor x = tensor({1.f, 2.f}).requires_grad_();
  EXPECT_EQ(x.to_string(), "tensor([1., 2.], requires_grad=True)");
  EXPECT_EQ((x * 2.0).to_string(), "tensor([2., 4.], grad_fn=<MulBackward0>)");
  EXPECT_EQ(x.detach().to_string(), "tensor([1., 2.])");
  // A suffix that would pass 80 columns goes on its own line.
  Tensor y = iota(14, kFloat32).requires_grad_();
  EXPECT_EQ(y.to_string(),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.],\n"
            "       requires_grad=True)");
  // Printing records nothing on the tape.
  const auto before = x.grad_fn();
  (void)x.to_string();
  EXPECT_EQ(x.grad_fn(), before);
}

TEST(Printing, CudaDeviceSuffix) {
  TG_REQUIRE_CUDA();
  EXPECT_EQ(tensor({1.f, 2.f}).cuda().to_string(), "tensor([1., 2.], device='cuda:0')");
  EXPECT_EQ(tensor<int32_t>({3}).cuda().to_string(), "tensor([3], device='cuda:0', dtype=torch.int32)");
}

}  // namespace
}  // namespace tg
