// Fused attention (cuDNN's flash attention): values and gradients of the fused kernel against a
// float32 composition of the same 16-bit operands, for causal and full attention, additive and
// bool masks, head dims 64/80/128, sequence lengths off the tile size and batch x heads from 1 to
// 2048; dropout (its statistics, and the backward dropping what the forward dropped, eager and
// under CUDA graph replays); compiled (cudagraphs) against eager; where scaled_dot_product_attention falls back to the
// composed path; and errors for bad operands. The dispatch tests run without a GPU (on the CPU and
// on fake CUDA tensors); the rest skip without one.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "graphs/capture/fake.h"
#include "graphs/capture/joint.h"
#include "graphs/compile.h"
#include "graphs/cudagraphs/segments.h"
#include "graphs/partition/partition.h"
#include "nn/transformer/attention.h"
#include "ops/attention/flash_attention.h"
#include "support/test_support.h"

namespace tg {
namespace {

using testing::expect_close;

const CompileOptions kCudagraphs{.backend = "cudagraphs"};
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- dispatch rules, no GPU needed --------------------------------------------------------------

Tensor fake_cuda(const Shape& s, DType dtype = kBFloat16, bool requires_grad = false) {
  return graphs::fake_tensor(s, dtype, cuda_device(), requires_grad);
}

TEST(FlashAttentionDispatch, CpuOperandsTakeTheComposedPath) {
  manual_seed(1);
  const Tensor q = randn({2, 3, 5, 8}).to(kBFloat16), k = randn({2, 3, 7, 8}).to(kBFloat16),
               v = randn({2, 3, 7, 8}).to(kBFloat16);
  EXPECT_NE(fused_attention_blocker(q, k, v, Tensor(), 0.0, false, 0.5).find("CUDA tensors"), std::string::npos);
  Tensor composed;
  {
    SdpaKernelGuard off(SdpaKernel::kComposed);
    composed = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true);
  }
  // kAuto runs the composed path on the CPU: the very same numbers.
  expect_close(scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true), composed, 0.0, 0.0);
  SdpaKernelGuard on(SdpaKernel::kFused);
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v), "the fused kernel was asked for (SdpaKernel::kFused) but "
                                                          "does not apply: it runs on CUDA tensors, got the query on cpu");
}

TEST(FlashAttentionDispatch, TheGuardRestoresTheChoice) {
  EXPECT_EQ(sdpa_kernel(), SdpaKernel::kAuto);
  {
    SdpaKernelGuard a(SdpaKernel::kComposed);
    EXPECT_EQ(sdpa_kernel(), SdpaKernel::kComposed);
    {
      SdpaKernelGuard b(SdpaKernel::kFused);
      EXPECT_EQ(sdpa_kernel(), SdpaKernel::kFused);
    }
    EXPECT_EQ(sdpa_kernel(), SdpaKernel::kComposed);
  }
  EXPECT_EQ(sdpa_kernel(), SdpaKernel::kAuto);
}

// What the fused kernel refuses, by the static rules (on fake CUDA tensors; with a GPU, cuDNN is
// asked too and accepts every other case here).
TEST(FlashAttentionDispatch, StaticRulesNameWhatTheFusedKernelCannotTake) {
  const Tensor q = fake_cuda({2, 4, 77, 64}), k = fake_cuda({2, 4, 200, 64}), v = fake_cuda({2, 4, 200, 64});
  auto blocker = [](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& m = Tensor(), double p = 0.0) {
    return fused_attention_blocker(q, k, v, m, p, false, 0.125);
  };
  EXPECT_EQ(blocker(q, k, v), "");
  EXPECT_EQ(blocker(q, k, v, fake_cuda({77, 200}, kBool)), "");
  EXPECT_EQ(blocker(q, k, v, fake_cuda({2, 1, 1, 200})), "");
  EXPECT_EQ(blocker(fake_cuda({2, 77, 64}), fake_cuda({2, 9, 64}), fake_cuda({2, 9, 64})), "");
  auto has = [](const std::string& s, const char* part) { return s.find(part) != std::string::npos; };
  EXPECT_TRUE(has(blocker(fake_cuda({2, 4, 77, 64}, kFloat32), fake_cuda({2, 4, 200, 64}, kFloat32),
                          fake_cuda({2, 4, 200, 64}, kFloat32)),
                  "float16 or bfloat16 operands, got float32"));
  EXPECT_TRUE(has(blocker(fake_cuda({2, 4, 77, 60}), fake_cuda({2, 4, 200, 60}), fake_cuda({2, 4, 200, 60})),
                  "head dims must be multiples of 8 up to 128, got 60 and 60"));
  EXPECT_TRUE(has(blocker(fake_cuda({2, 4, 7, 256}), fake_cuda({2, 4, 9, 256}), fake_cuda({2, 4, 9, 256})),
                  "up to 128"));
  EXPECT_EQ(blocker(q, k, v, Tensor(), 0.1), "");  // dropout runs in the fused kernel
  EXPECT_TRUE(has(blocker(q, k, v, fake_cuda({77, 200}, kFloat32)), "a mask of dtype float32"));
  EXPECT_TRUE(has(blocker(q, k, v, graphs::fake_tensor({77, 200}, kBool, kCPU)), "a mask on cpu"));
  EXPECT_TRUE(has(blocker(q, k, v, fake_cuda({77, 200}, kBFloat16, true)), "a mask that requires grad"));
  EXPECT_TRUE(has(blocker(q, k, v, fake_cuda({3, 2, 4, 77, 200}, kBool)), "a mask of 5 dims"));
  EXPECT_TRUE(has(blocker(q, k, v, fake_cuda({2, 4, 77, 100}, kBool)), "does not broadcast"));
  EXPECT_TRUE(has(blocker(q, fake_cuda({1, 4, 200, 64}), fake_cuda({1, 4, 200, 64})), "broadcast"));
  EXPECT_TRUE(has(blocker(fake_cuda({3, 2, 4, 7, 64}), fake_cuda({3, 2, 4, 9, 64}), fake_cuda({3, 2, 4, 9, 64})),
                  "3 or 4 dims"));
  EXPECT_TRUE(has(blocker(fake_cuda({2, 4, 0, 64}), k, v), "empty"));
}

// Traced on fake CUDA tensors (no GPU needed), scaled_dot_product_attention is one flash_attention
// node forward and one flash_attention_backward node backward, laid out as [B, L, H, Dv] so that
// merging the heads back is a view, and the cudagraphs backend would capture every node.
TEST(FlashAttentionDispatch, TracesToOneFusedOpEachWayAndCapturesThem) {
  const TensorList args{fake_cuda({2, 4, 77, 64}, kBFloat16, true), fake_cuda({2, 4, 200, 64}, kBFloat16, true),
                        fake_cuda({2, 4, 200, 32}, kBFloat16, true), fake_cuda({2, 1, 77, 200}, kBool)};
  Shape out_strides;
  auto fn = [&](const TensorList& x) {
    SdpaKernelGuard on(SdpaKernel::kFused);
    const Tensor o = scaled_dot_product_attention(x[0], x[1], x[2], x[3]);
    EXPECT_EQ(o.sizes(), (Shape{2, 4, 77, 32}));
    out_strides = o.strides();
    return TensorList{o.transpose(1, 2).reshape({2, 77, 128}).to(kFloat32).sum()};
  };
  graphs::JointGraph joint = graphs::trace_joint(fn, args);
  EXPECT_EQ(out_strides, (Shape{77 * 4 * 32, 32, 4 * 32, 1}));
  auto counts = joint.graph.op_counts();
  EXPECT_EQ(counts["flash_attention"], 1) << joint.graph.to_text();
  EXPECT_EQ(counts["flash_attention_backward"], 1) << joint.graph.to_text();
  EXPECT_EQ(counts["matmul"] + counts["bmm"] + counts["softmax"], 0) << joint.graph.to_text();
  const graphs::Partition part = graphs::partition(joint, graphs::PartitionerKind::Default);
  for (const graphs::Graph* g : {&part.forward, &part.backward}) {
    const graphs::SegmentPlan plan = graphs::plan_segments(*g);
    for (const graphs::Segment& seg : plan.segments) EXPECT_TRUE(seg.captured) << seg.reason << "\n" << g->to_text();
  }
  // 3-D operands and the causal mask.
  auto fn3 = [](const TensorList& x) {
    SdpaKernelGuard on(SdpaKernel::kFused);
    const Tensor o = scaled_dot_product_attention(x[0], x[1], x[1], Tensor(), 0.0, true);
    EXPECT_EQ(o.sizes(), (Shape{2, 77, 64}));
    return TensorList{o.to(kFloat32).sum()};
  };
  graphs::JointGraph j3 = graphs::trace_joint(fn3, {fake_cuda({2, 77, 64}, kFloat16, true),
                                                    fake_cuda({2, 9, 64}, kFloat16, true)});
  EXPECT_EQ(j3.graph.op_counts()["flash_attention"], 1) << j3.graph.to_text();
}

TEST(FlashAttentionDispatch, BadOperandsOfTheFusedOpAreErrors) {
  const TensorList args{fake_cuda({2, 4, 7, 64}),           fake_cuda({2, 4, 9, 64}),
                        fake_cuda({2, 4, 9, 64}),           fake_cuda({2, 4, 7, 64}, kFloat32),
                        fake_cuda({2, 4, 9, 64}, kFloat32), fake_cuda({2, 4, 9, 64}, kFloat32),
                        fake_cuda({2, 4, 9, 32}),           fake_cuda({2, 4, 9, 64}, kFloat16),
                        fake_cuda({2, 3, 7, 9}),            fake_cuda({4, 7, 64}),
                        fake_cuda({4, 9, 64})};
  auto expect_error = [&](const std::function<Tensor(const TensorList&)>& f, const std::string& message) {
    EXPECT_THROW_MSG(graphs::trace_joint([&](const TensorList& x) { return TensorList{f(x)}; }, args), message);
  };
  expect_error([](const TensorList& x) { return flash_attention(x[3], x[4], x[5], Tensor(), 0.1, false); },
               "[flash_attention] takes float16 or bfloat16 operands, got float32");
  expect_error([](const TensorList& x) { return flash_attention(x[0], x[6], x[2], Tensor(), 0.1, false); },
               "[flash_attention] expected query [B, H, L, D], key [B, H, S, D] and value [B, H, S, Dv], got "
               "[2, 4, 7, 64], [2, 4, 9, 32] and [2, 4, 9, 64]");
  expect_error([](const TensorList& x) { return flash_attention(x[0], x[1], x[7], Tensor(), 0.1, false); },
               "[flash_attention] expected operand 2 as bfloat16");
  expect_error([](const TensorList& x) { return flash_attention(x[0], x[1], x[2], x[8], 0.1, false); },
               "[flash_attention] expected a bias of shape [2|1, 4|1, 7, 9], got [2, 3, 7, 9]");
  expect_error([](const TensorList& x) { return flash_attention(x[9], x[10], x[10], Tensor(), 0.1, false); },
               "[flash_attention] expected query of shape [B, H, L, D], got [4, 7, 64]");
}

// ---- the kernel, on a GPU -----------------------------------------------------------------------

// Maximum |a - b| within atol + rtol * max |b| (b the float32 reference), in float32 on the host.
void expect_near_ref(const Tensor& got, const Tensor& ref, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.sizes(), ref.sizes()) << what;
  const Tensor a = got.to(kCPU, kFloat32), b = ref.to(kCPU, kFloat32);
  const double scale = amax(abs(b)).item<float>();
  const double err = amax(abs(a - b)).item<float>();
  EXPECT_TRUE(std::isfinite(err)) << what << ": non-finite values";
  EXPECT_LE(err, atol + rtol * scale) << what << ": max error " << err << " against max |ref| " << scale;
}

// 16-bit tolerances of a result against float32 math on the same rounded operands.
double tol_of(DType dtype) { return dtype == kBFloat16 ? 2.5e-2 : 4e-3; }

struct AttnCase {
  int64_t B, H, L, S, D;
  bool causal;
  // 0 none, 1 additive [L, S], 2 bool [B, 1, L, S], 3 bool key padding [B, 1, 1, S]; 4, 5, 6: the
  // same with rows that attend to nothing (queries 1 and 5 of 1, 2; batch 0 of 3).
  int mask;
};

std::string name_of(const AttnCase& c, DType dtype) {
  return std::string(dtype_name(dtype)) + " B" + std::to_string(c.B) + " H" + std::to_string(c.H) + " L" +
         std::to_string(c.L) + " S" + std::to_string(c.S) + " D" + std::to_string(c.D) +
         (c.causal ? " causal" : "") + " mask" + std::to_string(c.mask);
}

Tensor make_mask(const AttnCase& c, DType dtype) {
  const Device dev = cuda_device();
  if (c.mask == 1) {  // additive, some -inf, never a whole row (column 0 stays finite)
    Tensor m = randn({c.L, c.S}, {.device = dev});
    Tensor drop = lt(rand({c.L, c.S}, {.device = dev}), 0.2);
    drop.slice(1, 0, 1).fill_(false);
    return masked_fill(m, drop, -kInf).to(dtype);
  }
  if (c.mask == 2) {  // keep ~70%, and always key 0
    Tensor keep = lt(rand({c.B, 1, c.L, c.S}, {.device = dev}), 0.7);
    keep.slice(3, 0, 1).fill_(true);
    return keep;
  }
  if (c.mask == 3) {  // the first keys of each batch row are kept
    Tensor keep = lt(rand({c.B, 1, 1, c.S}, {.device = dev}), 0.6);
    keep.slice(3, 0, 1).fill_(true);
    return keep;
  }
  if (c.mask >= 4) {  // as mask - 3, with rows masked whole
    Tensor m = make_mask({c.B, c.H, c.L, c.S, c.D, c.causal, c.mask - 3}, dtype);
    const Scalar none = c.mask == 4 ? Scalar(-kInf) : Scalar(false);
    if (c.mask == 6) {
      m.select(0, 0).fill_(none);
    } else {
      m.select(-2, 1).fill_(none);
      m.select(-2, 5).fill_(none);
    }
    return m;
  }
  return Tensor();
}

// Fused values and gradients against the composed path in float32 on the same 16-bit operands.
// `kernel` kAuto lets the dispatch choose (for shapes cuDNN may refuse); the values are checked alike.
void check_case(const AttnCase& c, DType dtype, SdpaKernel kernel = SdpaKernel::kFused) {
  SCOPED_TRACE(name_of(c, dtype));
  const Device dev = cuda_device();
  const Tensor q0 = randn({c.B, c.H, c.L, c.D}, {.device = dev}).to(dtype);
  const Tensor k0 = randn({c.B, c.H, c.S, c.D}, {.device = dev}).to(dtype);
  const Tensor v0 = randn({c.B, c.H, c.S, c.D}, {.device = dev}).to(dtype);
  const Tensor mask = make_mask(c, dtype);
  const Tensor dout = randn({c.B, c.H, c.L, c.D}, {.device = dev}).to(dtype);

  Tensor q = q0.detach().requires_grad_(true), k = k0.detach().requires_grad_(true),
         v = v0.detach().requires_grad_(true);
  Tensor out;
  {
    SdpaKernelGuard fused(kernel);
    out = scaled_dot_product_attention(q, k, v, mask, 0.0, c.causal);
  }
  EXPECT_EQ(out.dtype(), dtype);
  out.backward(dout);

  Tensor qr = q0.to(kFloat32).requires_grad_(true), kr = k0.to(kFloat32).requires_grad_(true),
         vr = v0.to(kFloat32).requires_grad_(true);
  const Tensor mr = mask.defined() && mask.dtype() != kBool ? mask.to(kFloat32) : mask;
  Tensor ref;
  {
    SdpaKernelGuard composed(SdpaKernel::kComposed);
    ref = scaled_dot_product_attention(qr, kr, vr, mr, 0.0, c.causal);
  }
  ref.backward(dout.to(kFloat32));
  const double tol = tol_of(dtype);
  expect_near_ref(out, ref, tol, tol, "output");
  expect_near_ref(q.grad(), qr.grad(), 2 * tol, 2 * tol, "dq");
  expect_near_ref(k.grad(), kr.grad(), 2 * tol, 2 * tol, "dk");
  expect_near_ref(v.grad(), vr.grad(), 2 * tol, 2 * tol, "dv");
}

TEST(FlashAttentionCuda, MatchesFloat32CompositionAcrossShapesMasksAndDtypes) {
  TG_REQUIRE_CUDA();
  manual_seed(11);
  for (int64_t D : {64, 80, 128})
    for (int64_t T : {77, 200})
      for (bool causal : {false, true}) check_case({2, 3, T, T, D, causal, 0}, kBFloat16);
  for (int64_t D : {64, 128})
    for (bool causal : {false, true}) check_case({2, 3, 77, 77, D, causal, 0}, kFloat16);
}

// Sequences of one: cuDNN 9.19 refuses L = S = 1 in some configurations ("s_q = s_kv = 1 is not
// supported"), and kAuto then composes; L = S = 1 and a single query over many keys (decoding) are
// checked whichever path takes them.
TEST(FlashAttentionCuda, SequencesOfOne) {
  TG_REQUIRE_CUDA();
  manual_seed(21);
  const Device dev = cuda_device();
  const Tensor one = randn({2, 3, 1, 64}, {.device = dev}).to(kBFloat16);
  for (bool causal : {false, true}) {
    const std::string why = fused_attention_blocker(one, one, one, Tensor(), 0.0, causal, 0.125);
    if (!why.empty()) EXPECT_NE(why.find("cuDNN does not take it"), std::string::npos) << why;
  }
  for (int64_t D : {64, 128})
    for (bool causal : {false, true}) {
      check_case({2, 3, 1, 1, D, causal, 0}, kBFloat16, SdpaKernel::kAuto);
      check_case({2, 3, 1, 77, D, causal, 0}, kBFloat16, SdpaKernel::kAuto);
    }
  check_case({2, 3, 1, 77, 64, false, 2}, kFloat16, SdpaKernel::kAuto);
}

TEST(FlashAttentionCuda, MasksAndUnequalLengths) {
  TG_REQUIRE_CUDA();
  manual_seed(12);
  for (int mask : {1, 2, 3})
    for (int64_t D : {64, 80}) {
      check_case({2, 3, 77, 77, D, false, mask}, kBFloat16);
      check_case({2, 2, 77, 200, D, false, mask}, kBFloat16);
    }
  for (int mask : {1, 2}) check_case({2, 3, 200, 200, 128, false, mask}, kFloat16);
  // Causal with L != S: PyTorch's is_causal aligns the mask at the top left.
  check_case({2, 2, 77, 200, 64, true, 0}, kBFloat16);
  check_case({2, 2, 200, 77, 64, true, 0}, kBFloat16);
}

// Rows whose every key is masked: zeros out and zero gradients through them, as PyTorch 2.5+ and the
// composed path give (the kernel alone would give NaN there and in every gradient).
TEST(FlashAttentionCuda, FullyMaskedRowsGiveZerosAndZeroGradients) {
  TG_REQUIRE_CUDA();
  manual_seed(14);
  for (DType dtype : {kBFloat16, kFloat16})
    for (int mask : {4, 5, 6}) check_case({2, 3, 77, 77, 64, false, mask}, dtype);
}

TEST(FlashAttentionCuda, BatchTimesHeadsOfOneAndOfThousands) {
  TG_REQUIRE_CUDA();
  manual_seed(13);
  check_case({1, 1, 200, 200, 64, true, 0}, kBFloat16);
  check_case({16, 128, 64, 64, 64, true, 0}, kBFloat16);  // 2048 heads
  check_case({8, 256, 33, 33, 128, false, 1}, kFloat16);  // 2048 heads
}

// q, k, v as MultiheadAttention makes them ([B, L, H, D] memory seen as [B, H, L, D]), misaligned
// strides (copied first), and 3-D operands.
TEST(FlashAttentionCuda, LayoutsAndThreeDimOperands) {
  TG_REQUIRE_CUDA();
  manual_seed(14);
  const Device dev = cuda_device();
  const Tensor x = randn({2, 77, 4, 64}, {.device = dev}).to(kBFloat16);
  const Tensor bshd = x.transpose(1, 2);
  const Tensor wide = randn({2, 4, 77, 72}, {.device = dev}).to(kBFloat16);
  const Tensor odd = wide.narrow(3, 3, 64);  // offset 3: rows not 16-byte aligned
  for (const Tensor& t : {bshd, odd}) {
    Tensor fused, ref;
    {
      SdpaKernelGuard on(SdpaKernel::kFused);
      fused = scaled_dot_product_attention(t, t, t, Tensor(), 0.0, true);
    }
    {
      SdpaKernelGuard off(SdpaKernel::kComposed);
      ref = scaled_dot_product_attention(t.to(kFloat32), t.to(kFloat32), t.to(kFloat32), Tensor(), 0.0, true);
    }
    expect_near_ref(fused, ref, tol_of(kBFloat16), tol_of(kBFloat16), "strided operands");
  }
  const Tensor q3 = randn({6, 77, 64}, {.device = dev}).to(kFloat16);
  const Tensor k3 = randn({6, 50, 64}, {.device = dev}).to(kFloat16);
  const Tensor m3 = lt(rand({6, 77, 50}, {.device = dev}), 0.8);
  m3.slice(2, 0, 1).fill_(true);
  Tensor fused, ref;
  {
    SdpaKernelGuard on(SdpaKernel::kFused);
    fused = scaled_dot_product_attention(q3, k3, k3, m3);
  }
  {
    SdpaKernelGuard off(SdpaKernel::kComposed);
    ref = scaled_dot_product_attention(q3.to(kFloat32), k3.to(kFloat32), k3.to(kFloat32), m3);
  }
  EXPECT_EQ(fused.sizes(), (Shape{6, 77, 64}));
  expect_near_ref(fused, ref, tol_of(kFloat16), tol_of(kFloat16), "3-D operands");
}

// kAuto takes the fused kernel for 16-bit CUDA operands and the composed path for the rest.
TEST(FlashAttentionCuda, AutoFallsBackWhereTheFusedKernelDoesNotApply) {
  TG_REQUIRE_CUDA();
  manual_seed(15);
  const Device dev = cuda_device();
  auto qkv = [&](DType dtype, int64_t D) {
    return TensorList{randn({2, 2, 9, D}, {.device = dev}).to(dtype), randn({2, 2, 9, D}, {.device = dev}).to(dtype),
                      randn({2, 2, 9, D}, {.device = dev}).to(dtype)};
  };
  const TensorList h = qkv(kBFloat16, 64);
  EXPECT_EQ(fused_attention_blocker(h[0], h[1], h[2], Tensor(), 0.0, true, 0.125), "");
  const TensorList f = qkv(kFloat32, 64);
  EXPECT_NE(fused_attention_blocker(f[0], f[1], f[2], Tensor(), 0.0, false, 0.125), "");
  const TensorList d = qkv(kBFloat16, 36);
  EXPECT_NE(fused_attention_blocker(d[0], d[1], d[2], Tensor(), 0.0, false, 0.125), "");
  EXPECT_EQ(fused_attention_blocker(h[0], h[1], h[2], Tensor(), 0.2, false, 0.125), "");  // cuDNN's dropout
  // The fallbacks compute what the composed path computes.
  for (const TensorList* in : {&f, &d}) {
    Tensor a = scaled_dot_product_attention((*in)[0], (*in)[1], (*in)[2]);
    SdpaKernelGuard off(SdpaKernel::kComposed);
    expect_close(a, scaled_dot_product_attention((*in)[0], (*in)[1], (*in)[2]), 0.0, 0.0);
  }
  // Compiled, kAuto puts the fused ops in the graphs of 16-bit operands only.
  for (DType dtype : {kBFloat16, kFloat32}) {
    auto fn = compile([](const Tensor& q, const Tensor& k, const Tensor& v) {
      return scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true).to(kFloat32).sum();
    });
    const TensorList in = qkv(dtype, 64);
    Tensor q = in[0].detach().requires_grad_(true);
    fn(q, in[1], in[2]).backward();
    const bool fused = dtype == kBFloat16;
    EXPECT_EQ(fn.counters().forward_ops.count("flash_attention"), fused ? 1u : 0u) << dtype_name(dtype);
    EXPECT_EQ(fn.counters().backward_ops.count("flash_attention_backward"), fused ? 1u : 0u) << dtype_name(dtype);
  }
}

// Under autocast the float32 operands are cast to bfloat16 and the fused kernel runs.
TEST(FlashAttentionCuda, AutocastTakesTheFusedKernel) {
  TG_REQUIRE_CUDA();
  manual_seed(16);
  const Device dev = cuda_device();
  const Tensor q = randn({2, 4, 77, 64}, {.device = dev}), k = randn({2, 4, 77, 64}, {.device = dev}),
               v = randn({2, 4, 77, 64}, {.device = dev});
  Tensor got;
  {
    AutocastGuard amp(dev, kBFloat16);
    SdpaKernelGuard on(SdpaKernel::kFused);  // throws unless the fused kernel runs
    got = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true);
  }
  EXPECT_EQ(got.dtype(), kBFloat16);
  SdpaKernelGuard off(SdpaKernel::kComposed);
  const Tensor ref = scaled_dot_product_attention(q.to(kBFloat16).to(kFloat32), k.to(kBFloat16).to(kFloat32),
                                                  v.to(kBFloat16).to(kFloat32), Tensor(), 0.0, true);
  expect_near_ref(got, ref, tol_of(kBFloat16), tol_of(kBFloat16), "autocast");
}

// A compiled step with the cudagraphs backend captures the fused ops and matches eager.
TEST(FlashAttentionCuda, CompiledWithCudagraphsMatchesEager) {
  TG_REQUIRE_CUDA();
  manual_seed(17);
  const Device dev = cuda_device();
  const Tensor w = randn({2, 4, 77, 80}, {.device = dev}).to(kBFloat16);
  const Tensor mask = lt(rand({77, 77}, {.device = dev}), 0.8);
  mask.slice(1, 0, 1).fill_(true);
  auto step = [&](const Tensor& q, const Tensor& k, const Tensor& v) {
    return (scaled_dot_product_attention(q, k, v, mask) * w).to(kFloat32).sum();
  };
  auto compiled = compile(step, kCudagraphs);
  for (int i = 0; i < 4; ++i) {  // warm-up, recording, replays
    const Tensor q0 = randn({2, 4, 77, 80}, {.device = dev}).to(kBFloat16);
    const Tensor k0 = randn({2, 4, 77, 80}, {.device = dev}).to(kBFloat16);
    const Tensor v0 = randn({2, 4, 77, 80}, {.device = dev}).to(kBFloat16);
    TensorList eager_in{q0.detach().requires_grad_(true), k0.detach().requires_grad_(true),
                        v0.detach().requires_grad_(true)};
    TensorList comp_in{q0.detach().requires_grad_(true), k0.detach().requires_grad_(true),
                       v0.detach().requires_grad_(true)};
    Tensor le = step(eager_in[0], eager_in[1], eager_in[2]);
    le.backward();
    Tensor lc = compiled(comp_in[0], comp_in[1], comp_in[2]);
    lc.backward();
    expect_close(lc, le, 1e-3, 1e-2);
    for (size_t j = 0; j < 3; ++j) expect_close(comp_in[j].grad(), eager_in[j].grad(), 1e-2, 1e-2);
  }
  const auto& c = compiled.counters();
  EXPECT_EQ(c.forward_ops.count("flash_attention"), 1u);
  EXPECT_EQ(c.backward_ops.count("flash_attention_backward"), 1u);
  EXPECT_GE(c.graphs_captured, 2);
  EXPECT_GE(c.replays, 2);
  std::string skips;
  for (const auto& [reason, n] : c.cudagraph_skips) skips += reason + " x" + std::to_string(n) + "; ";
  EXPECT_EQ(skips, "");
}

// Dropout in the fused kernel (cuDNN's Philox masks). With v the identity (S = Dv), O is the
// dropped, rescaled probability matrix itself: its zeros are the dropped entries (about p of
// them), its other entries are softmax / (1 - p), and the backward must drop the same entries:
// dV = O^T dO exactly as the forward's O says.
TEST(FlashAttentionCuda, DropoutDropsAboutPAndTheBackwardDropsTheSameEntries) {
  TG_REQUIRE_CUDA();
  manual_seed(19);
  const Device dev = cuda_device();
  constexpr int64_t B = 2, H = 2, L = 100, S = 64;
  constexpr double p = 0.3;
  const Tensor idx = arange(S, {.device = dev});
  const Tensor eye = eq(idx.view({S, 1}), idx.view({1, S})).to(kBFloat16);
  const Tensor q0 = randn({B, H, L, S}, {.device = dev}).to(kBFloat16);
  const Tensor k0 = randn({B, H, S, S}, {.device = dev}).to(kBFloat16);
  Tensor q = q0.detach().requires_grad_(true), k = k0.detach().requires_grad_(true);
  Tensor v = eye.expand({B, H, S, S}).contiguous().requires_grad_(true);
  Tensor o;
  {
    SdpaKernelGuard on(SdpaKernel::kFused);
    o = scaled_dot_product_attention(q, k, v, Tensor(), p);
  }
  const Tensor dout = randn({B, H, L, S}, {.device = dev}).to(kBFloat16);
  o.backward(dout);
  const Tensor of = o.to(kFloat32);
  const double dropped = mean(eq(of, 0.0).to(kFloat32)).item<float>();
  EXPECT_NEAR(dropped, p, 0.02);
  Tensor probs;
  {
    SdpaKernelGuard off(SdpaKernel::kComposed);
    probs = scaled_dot_product_attention(q0.to(kFloat32), k0.to(kFloat32), eye.to(kFloat32).expand({B, H, S, S}));
  }
  const Tensor kept = ne(of, 0.0);
  expect_near_ref(where(kept, of * (1.0 - p), of), where(kept, probs, of), 2e-2, 2e-3, "kept entries");
  expect_near_ref(v.grad(), matmul(of.transpose(-2, -1), dout.to(kFloat32)), 3e-2, 3e-2, "dv against O^T dO");
  // The same seed draws the same masks; the next call draws new ones.
  auto run = [&] {
    SdpaKernelGuard on(SdpaKernel::kFused);
    return scaled_dot_product_attention(q0, k0, eye.expand({B, H, S, S}).contiguous(), Tensor(), p).to(kFloat32);
  };
  manual_seed(5);
  const Tensor a = run();
  const Tensor b = run();
  manual_seed(5);
  const Tensor a2 = run();
  EXPECT_TRUE(equal(eq(a, 0.0), eq(a2, 0.0)));
  EXPECT_FALSE(equal(eq(a, 0.0), eq(b, 0.0)));
}

// Compiled with cudagraphs, every replay draws fresh dropout masks.
TEST(FlashAttentionCuda, DropoutUnderCudagraphsDrawsFreshMasksEachReplay) {
  TG_REQUIRE_CUDA();
  manual_seed(20);
  const Device dev = cuda_device();
  const Tensor q = randn({2, 4, 77, 64}, {.device = dev}).to(kBFloat16).requires_grad_(true);
  const Tensor k = randn({2, 4, 77, 64}, {.device = dev}).to(kBFloat16);
  auto fn = compile([](const Tensor& a, const Tensor& b) {
    const Tensor o = scaled_dot_product_attention(a, b, b, Tensor(), 0.5, true);
    return std::make_tuple(o.to(kFloat32).sum(), o.to(kFloat32));
  }, kCudagraphs);
  TensorList outs;
  for (int i = 0; i < 4; ++i) {
    auto [loss, o] = fn(q, k);
    loss.backward();
    outs.push_back(o.clone());
    EXPECT_TRUE(std::isfinite(q.grad().to(kFloat32).abs().sum().item<float>()));
  }
  EXPECT_EQ(fn.counters().forward_ops.count("flash_attention"), 1u);
  EXPECT_GE(fn.counters().replays, 2);
  for (size_t i = 1; i < outs.size(); ++i) EXPECT_FALSE(equal(outs[i], outs[i - 1])) << i;
}

// MultiheadAttention under autocast: the fused and composed paths agree on outputs and gradients,
// and the module's graph holds the fused ops; need_weights still composes.
TEST(FlashAttentionCuda, MultiheadAttentionChoosesTheFusedKernel) {
  TG_REQUIRE_CUDA();
  manual_seed(18);
  const Device dev = cuda_device();
  nn::MultiheadAttention mha(256, 4, 0.0, true, true, {.device = dev});
  const Tensor x = randn({3, 77, 256}, {.device = dev});
  const Tensor kpm = lt(rand({3, 77}, {.device = dev}), 0.3);  // true: ignore that key
  kpm.slice(1, 0, 1).fill_(false);
  auto run = [&](SdpaKernel kernel, bool causal, const Tensor& padding) {
    SdpaKernelGuard choice(kernel);
    for (const Tensor& p : mha.parameters()) p.set_grad(Tensor());
    Tensor out;
    {
      AutocastGuard amp(dev, kBFloat16);
      out = mha.attend(x, x, x, Tensor(), causal, padding);
    }
    const Tensor o32 = out.to(kFloat32);
    (o32 * o32).sum().backward();
    TensorList r{out};
    for (const Tensor& p : mha.parameters()) r.push_back(p.grad());
    return r;
  };
  for (bool causal : {true, false}) {
    const Tensor padding = causal ? Tensor() : kpm;
    const TensorList fused = run(SdpaKernel::kFused, causal, padding);
    const TensorList composed = run(SdpaKernel::kComposed, causal, padding);
    for (size_t i = 0; i < fused.size(); ++i)
      expect_near_ref(fused[i], composed[i], 3e-2, 3e-2, "output/gradient " + std::to_string(i));
  }
  auto fn = compile([&](const Tensor& in) {
    AutocastGuard amp(dev, kBFloat16);
    return mha.attend(in, in, in, Tensor(), true).to(kFloat32).sum();
  });
  fn(x).backward();
  EXPECT_EQ(fn.counters().forward_ops.count("flash_attention"), 1u);
  // The weights are returned by the composed path only.
  const nn::MultiheadAttentionOutput w = mha.forward(x, x, x, {.need_weights = true});
  EXPECT_EQ(w.attn_weights.sizes(), (Shape{3, 77, 77}));
}

// A packed projection split into q, k and v for causal attention (GPT's block): compiled, cuDNN
// writes the three gradients into the projection's gradient (one flash_attention_backward_packed,
// no cat), with eager mode's values; with the split-gradient merge off, the separate gradients stay.
TEST(FlashAttentionCuda, PackedProjectionGradientsWithoutTheirCat) {
  TG_REQUIRE_CUDA();
  manual_seed(18);
  const Device dev = cuda_device();
  const int64_t B = 2, L = 33, H = 4, D = 64;
  const Tensor w = (randn({H * D, 3 * H * D}, {.device = dev}) * 0.05).to(kBFloat16).requires_grad_(true);
  auto step = [&](const Tensor& x) {
    const TensorList qkv = split(matmul(x, w), H * D, 2);
    auto heads = [&](const Tensor& z) { return z.view({B, L, H, D}).transpose(1, 2); };
    const Tensor a = scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), Tensor(), 0.0, true);
    return (a.transpose(1, 2).reshape({B, L, H * D}).to(kFloat32) * 0.5).square().sum();
  };
  const Tensor x0 = randn({B, L, H * D}, {.device = dev}).to(kBFloat16);
  const Tensor xe = x0.detach().requires_grad_(true);
  step(xe).backward();
  const Tensor wgrad = w.grad().clone(), xgrad = xe.grad().clone();
  for (bool merge : {true, false}) {
    auto compiled = compile(step, {.backend = "cudagraphs", .merge_split_gradients = merge});
    for (int i = 0; i < 3; ++i) {  // warm-up, recording, replay
      w.set_grad(Tensor());
      const Tensor xc = x0.detach().requires_grad_(true);
      compiled(xc).backward();
      expect_close(xc.grad().to(kFloat32), xgrad.to(kFloat32), 2e-2, 2e-2);
      expect_close(w.grad().to(kFloat32), wgrad.to(kFloat32), 2e-2, 2e-2);
    }
    const auto& bw = compiled.counters().backward_ops;
    auto count = [&bw](const char* op) { return bw.count(op) ? bw.at(op) : 0; };
    EXPECT_EQ(count("flash_attention_backward_packed"), merge ? 1 : 0);
    EXPECT_EQ(count("flash_attention_backward"), merge ? 0 : 1);
    EXPECT_EQ(count("cat"), 0) << "merge " << merge;
  }
}

}  // namespace
}  // namespace tg
