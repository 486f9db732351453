// Elementwise fusion of compiled CUDA graphs: which ops the pass groups and which it leaves (on
// graphs traced from data-less CUDA tensors, so these run anywhere), the generated kernel sources
// (compiled to PTX with NVRTC where the library was built with CUDA: no GPU needed), and on a GPU
// fused against unfused against eager, values and gradients, under both backends.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string>

#include "graphs/capture/fake.h"
#include "graphs/capture/functional_ops.h"
#include "graphs/compile.h"
#include "graphs/passes/elementwise_fusion.h"
#include "graphs/testing/parity.h"
#include "ops/core/dispatch.h"
#include "ops/elementwise/elementwise_math_source.h"
#include "ops/elementwise/fused_elementwise.h"
#include "ops/elementwise/fused_elementwise_codegen.h"
#include "support/test_support.h"

#ifdef TG_WITH_CUDA
#include "ops/elementwise/cuda/fused_elementwise.h"
#include "ops/elementwise/cuda/nvrtc_compiler.h"
#endif

namespace tg {
namespace {

using graphs::Graph;
using graphs::GraphFn;
using graphs::fake_tensor;

const Device kCuda = cuda_device(0);

// The forward and backward graphs of fn traced on data-less stand-ins of `args`.
graphs::Partition traced(const GraphFn& fn, const TensorList& args) {
  return graphs::partition(graphs::trace_joint(fn, args), graphs::PartitionerKind::Default);
}

int count_ops(const Graph& g, std::string_view name) {
  int n = 0;
  for (const graphs::GraphNode& node : g.nodes) n += node.op->name() == name;
  return n;
}

// The fused nodes' programs, in graph order.
std::vector<const FusedElementwiseOp*> fused_ops(const Graph& g) {
  std::vector<const FusedElementwiseOp*> out;
  for (const graphs::GraphNode& node : g.nodes)
    if (auto* f = dynamic_cast<const FusedElementwiseOp*>(node.op.get())) out.push_back(f);
  return out;
}

std::vector<std::string> step_names(const FusedElementwiseOp& op) {
  std::vector<std::string> names;
  for (const FusedStep& s : op.program().steps) names.emplace_back(s.op->name());
  return names;
}

Tensor cuda_fake(const Shape& s, DType d = kFloat32, bool requires_grad = false) {
  return fake_tensor(s, d, kCuda, requires_grad);
}

// ---- what the pass groups and what it leaves --------------------------------------------------

TEST(ElementwiseFusionPass, AChainBecomesOneNode) {
  auto fn = [](const TensorList& x) { return TensorList{mul(relu(add(mul(x[0], x[1]), 1.0)), 2.0)}; };
  graphs::Partition p = traced(fn, {cuda_fake({4, 5}), cuda_fake({4, 5})});
  EXPECT_EQ(graphs::fuse_elementwise_chains(p.forward), 1);
  ASSERT_EQ(p.forward.nodes.size(), 1u) << p.forward.to_text();
  const auto fused = fused_ops(p.forward);
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(step_names(*fused[0]), (std::vector<std::string>{"mul", "add", "relu", "mul"}));
  EXPECT_EQ(p.forward.nodes[0].inputs.size(), 2u);
  EXPECT_EQ(p.forward.nodes[0].outputs, p.forward.outputs);
}

TEST(ElementwiseFusionPass, ADagReadingAValueTwiceInsideTheGroupIsOneNode) {
  auto fn = [](const TensorList& x) {
    const Tensor t = tanh(x[0]);
    return TensorList{add(mul(t, t), sigmoid(t))};
  };
  graphs::Partition p = traced(fn, {cuda_fake({8})});
  EXPECT_EQ(graphs::fuse_elementwise_chains(p.forward), 1);
  ASSERT_EQ(p.forward.nodes.size(), 1u) << p.forward.to_text();
  EXPECT_EQ(fused_ops(p.forward)[0]->program().steps.size(), 4u);
  EXPECT_EQ(p.forward.nodes[0].inputs.size(), 1u);
}

TEST(ElementwiseFusionPass, LeavesIntermediatesReadOutsideTheGroup) {
  auto fn = [](const TensorList& x) {
    const Tensor t = exp(x[0]);
    return TensorList{add(mul(t, 2.0), 1.0), t.sum()};
  };
  graphs::Partition p = traced(fn, {cuda_fake({3, 4})});
  EXPECT_EQ(graphs::fuse_elementwise_chains(p.forward), 1);
  EXPECT_EQ(count_ops(p.forward, "exp"), 1) << p.forward.to_text();
  EXPECT_EQ(count_ops(p.forward, "sum"), 1);
  const auto fused = fused_ops(p.forward);
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(step_names(*fused[0]), (std::vector<std::string>{"mul", "add"}));
}

TEST(ElementwiseFusionPass, LeavesGraphOutputs) {
  auto fn = [](const TensorList& x) {
    const Tensor t = sin(x[0]);
    return TensorList{t, mul(cos(t), 3.0)};
  };
  graphs::Partition p = traced(fn, {cuda_fake({5})});
  EXPECT_EQ(graphs::fuse_elementwise_chains(p.forward), 1);
  EXPECT_EQ(count_ops(p.forward, "sin"), 1) << p.forward.to_text();
  EXPECT_EQ(step_names(*fused_ops(p.forward).at(0)), (std::vector<std::string>{"cos", "mul"}));
}

TEST(ElementwiseFusionPass, LeavesViewsMatmulsAndReductionsAndReadsViewsAsInputs) {
  auto fn = [](const TensorList& x) {
    const Tensor h = add(matmul(x[0], x[1]), x[2]);
    return TensorList{mul(exp(add(transpose(h, 0, 1), 1.0)), 0.5).sum({1})};
  };
  graphs::Partition p = traced(fn, {cuda_fake({4, 3}), cuda_fake({3, 6}), cuda_fake({6})});
  EXPECT_EQ(graphs::fuse_elementwise_chains(p.forward), 1);
  EXPECT_EQ(count_ops(p.forward, "matmul") + count_ops(p.forward, "mm"), 1) << p.forward.to_text();
  EXPECT_EQ(count_ops(p.forward, "transpose"), 1);
  EXPECT_EQ(count_ops(p.forward, "sum"), 1);
  EXPECT_EQ(count_ops(p.forward, "add"), 1);  // the bias add: its result is read by the view
  EXPECT_EQ(step_names(*fused_ops(p.forward).at(0)), (std::vector<std::string>{"add", "exp", "mul"}));
}

// dropout draws with `rand` (random: stays a node) and masks with elementwise ops (fused); an
// in-place write into an intermediate is functionalized, and that op stays too.
TEST(ElementwiseFusionPass, LeavesRandomAndInPlaceOps) {
  auto fn = [](const TensorList& x) {
    Tensor y = mul(x[0], 2.0);
    y.add_(1.0);
    return TensorList{add(dropout(exp(y), 0.5, true), 1.0)};
  };
  graphs::Partition p = traced(fn, {cuda_fake({16})});
  EXPECT_EQ(graphs::fuse_elementwise_chains(p.forward), 1);
  EXPECT_EQ(count_ops(p.forward, "rand"), 1) << p.forward.to_text();
  EXPECT_EQ(count_ops(p.forward, "mul"), 1) << p.forward.to_text();
  int functionalized = 0;
  for (const graphs::GraphNode& n : p.forward.nodes)
    functionalized += dynamic_cast<const graphs::FunctionalizedOp*>(n.op.get()) != nullptr;
  EXPECT_EQ(functionalized, 1) << p.forward.to_text();
  const auto fused = fused_ops(p.forward);
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(step_names(*fused[0]), (std::vector<std::string>{"exp", "ge", "mul", "mul", "add"}));
  for (const FusedStep& step : fused[0]->program().steps) EXPECT_EQ(dynamic_cast<const graphs::FunctionalizedOp*>(step.op.get()), nullptr);
}

TEST(ElementwiseFusionPass, LeavesCpuGraphsAndCpuScalarOperands) {
  auto fn = [](const TensorList& x) { return TensorList{exp(add(mul(x[0], x[1]), 1.0))}; };
  graphs::Partition cpu = traced(fn, {fake_tensor({4}, kFloat32, kCPU), fake_tensor({4}, kFloat32, kCPU)});
  EXPECT_EQ(graphs::fuse_elementwise_chains(cpu.forward), 0);
  // A CPU 0-dim operand of a CUDA op keeps its op out; the rest of the chain still fuses.
  graphs::Partition mixed = traced(fn, {cuda_fake({4}), fake_tensor({}, kFloat32, kCPU)});
  EXPECT_EQ(graphs::fuse_elementwise_chains(mixed.forward), 1);
  EXPECT_EQ(count_ops(mixed.forward, "mul"), 1) << mixed.forward.to_text();
  EXPECT_EQ(step_names(*fused_ops(mixed.forward).at(0)), (std::vector<std::string>{"add", "exp"}));
}

TEST(ElementwiseFusionPass, FusesActivationGradientsInTheBackward) {
  auto fn = [](const TensorList& x) { return TensorList{tanh(mul(x[0], 2.0)).sum()}; };
  graphs::Partition p = traced(fn, {cuda_fake({6, 7}, kFloat32, true)});
  EXPECT_EQ(graphs::fuse_elementwise_chains(p.backward), 1) << p.backward.to_text();
  EXPECT_EQ(count_ops(p.backward, "tanh_backward"), 0);
  EXPECT_EQ(step_names(*fused_ops(p.backward).at(0)), (std::vector<std::string>{"tanh_backward", "mul"}));
  // In the forward, tanh's result is saved for the backward (a graph output): mul + tanh still fuse.
  EXPECT_EQ(graphs::fuse_elementwise_chains(p.forward), 1) << p.forward.to_text();
}

TEST(ElementwiseFusionPass, ComparisonsWhereAndCastsJoinGroups) {
  auto fn = [](const TensorList& x) {
    const Tensor mask = gt(x[0], 0.0);
    return TensorList{where(mask, mul(x[0], 2.0), exp(x[1].to(kFloat64)).to(kFloat32))};
  };
  graphs::Partition p = traced(fn, {cuda_fake({3, 3}), cuda_fake({3, 3})});
  EXPECT_EQ(graphs::fuse_elementwise_chains(p.forward), 1);
  ASSERT_EQ(p.forward.nodes.size(), 1u) << p.forward.to_text();
}

// ---- the CPU path of the fused op ----------------------------------------------------------------

TEST(FusedElementwiseOp, CpuPathRunsTheGroupsOwnOps) {
  auto fn = [](const TensorList& x) {
    return TensorList{sub(gelu(add(mul(x[0], x[1]), x[2]), "tanh"), maximum(x[1], x[2]))};
  };
  graphs::Partition p = traced(fn, {cuda_fake({4, 1, 5}), cuda_fake({3, 5}), cuda_fake({5})});
  ASSERT_EQ(graphs::fuse_elementwise_chains(p.forward), 1);
  const graphs::GraphNode& node = p.forward.nodes.at(0);
  // Broadcast and non-contiguous CPU operands of the traced shapes.
  const Tensor a = randn({4, 1, 5});
  const Tensor b = transpose(randn({5, 3}), 0, 1);
  const Tensor c = randn({5});
  const TensorList args = {a, b, c};
  TensorList in;  // the fused node's inputs, in its own order
  for (graphs::ValueId v : node.inputs)
    for (const graphs::GraphInput& gi : p.forward.inputs)
      if (gi.value == v) in.push_back(args[static_cast<size_t>(gi.index)]);
  ASSERT_EQ(in.size(), 3u);
  const Tensor got = run_kernel(*node.op, in).at(0);
  testing::expect_close(got, fn(args)[0], 1e-6, 1e-7);
  EXPECT_EQ(got.sizes(), (Shape{4, 3, 5}));
  in[0] = in[0].to(kFloat64);
  EXPECT_THROW_MSG(run_kernel(*node.op, in), "has dtype float64 where the fused group");
}

// ---- generated sources -----------------------------------------------------------------------------

TEST(FusedKernelGeometry, ContiguousBroadcastAndStridedOperands) {
  const TensorMeta out = contiguous_meta({4, 5}, kFloat32, kCuda);
  const FusedGeometry same = fused_geometry(out, {contiguous_meta({4, 5}, kFloat32, kCuda)});
  EXPECT_EQ(same.sizes, (std::vector<int64_t>{20}));
  EXPECT_EQ(same.access, (std::vector<OperandAccess>{OperandAccess::Linear, OperandAccess::Linear}));
  EXPECT_FALSE(same.any_strided());

  const FusedGeometry bc = fused_geometry(out, {contiguous_meta({5}, kFloat32, kCuda), contiguous_meta({}, kFloat32, kCuda),
                                                contiguous_meta({4, 1}, kFloat32, kCuda)});
  EXPECT_EQ(bc.sizes, (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(bc.access, (std::vector<OperandAccess>{OperandAccess::Linear, OperandAccess::Strided,
                                                   OperandAccess::Broadcast, OperandAccess::Strided}));
  EXPECT_EQ(bc.strides[1], (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(bc.strides[3], (std::vector<int64_t>{0, 1}));

  TensorMeta transposed = contiguous_meta({4, 5}, kFloat32, kCuda);
  transposed.strides = {1, 4};
  const FusedGeometry tr = fused_geometry(out, {transposed});
  EXPECT_EQ(tr.access[1], OperandAccess::Strided);
  EXPECT_EQ(tr.strides[1], (std::vector<int64_t>{4, 1}));

  const std::vector<int64_t> args = fused_kernel_args(tr, {nullptr, nullptr});
  EXPECT_EQ(args.size(), 2u + 1u + 2u + 2u);  // pointers, numel, sizes, the strided input's strides
  EXPECT_EQ(args[2], 20);
}

// A program with every op family, from a traced CUDA function, with its fused node's input metas.
struct TracedGroup {
  graphs::Partition part;
  const FusedElementwiseOp* op = nullptr;
  std::vector<TensorMeta> inputs;
  TensorMeta output;
};

TracedGroup trace_group(const GraphFn& fn, const TensorList& args) {
  TracedGroup g;
  g.part = traced(fn, args);
  EXPECT_EQ(graphs::fuse_elementwise_chains(g.part.forward), 1) << g.part.forward.to_text();
  for (const graphs::GraphNode& n : g.part.forward.nodes)
    if (auto* f = dynamic_cast<const FusedElementwiseOp*>(n.op.get())) {
      g.op = f;
      for (graphs::ValueId v : n.inputs) g.inputs.push_back(g.part.forward.values[static_cast<size_t>(v)].meta);
      g.output = g.part.forward.values[static_cast<size_t>(n.outputs[0])].meta;
    }
  return g;
}

// Every unary kind, binary kind with tensor and scalar operands, comparison, where and cast.
TensorList all_families(const TensorList& x) {
  const Tensor a = x[0], b = x[1];
  Tensor u = add(neg(a), abs(b));
  u = add(u, mul(sgn(a), exp(b)));
  u = add(u, log(abs(a)));
  u = add(u, mul(sin(a), cos(b)));
  u = add(u, mul(tanh(a), sigmoid(b)));
  u = add(u, relu(a));
  u = add(u, gelu(a));
  u = add(u, gelu(b, "tanh"));
  u = add(u, sqrt(abs(b)));
  u = add(u, rsqrt(add(abs(a), 1.0)));
  u = add(u, trunc(mul(a, 3.0)));
  u = add(u, add(pow(a, 2), add(pow(a, 3), add(pow(abs(a), 0.5), add(pow(add(abs(a), 1.0), -1), pow(abs(b), 1.7))))));
  u = add(u, clamp(a, -0.5, 0.5));
  u = add(u, clamp(b, std::nullopt, 0.25));
  u = add(u, sub(a, b, 2.0));
  u = add(u, add(a, b, 0.1));
  u = add(u, div(a, add(abs(b), 1.0)));
  u = add(u, maximum(a, b));
  u = add(u, minimum(a, b));
  u = add(u, rsub(a, 1.0));
  u = add(u, rdiv(add(abs(a), 1.0), 1.0));
  u = add(u, tanh_backward(a, b));
  u = add(u, sigmoid_backward(a, b));
  u = add(u, threshold_backward(a, b));
  u = add(u, gelu_backward(a, b, false));
  u = add(u, gelu_backward(a, b, true));
  u = add(u, where(ne(a, b), a, b));
  u = add(u, where(le(a, 0.25), a, b));
  u = add(u, clamp(mul(a, std::numeric_limits<double>::infinity()), -3.0, 3.0));  // an infinite constant
  u = add(u, mul(add(eq(a, b).to(a.dtype()), ge(a, b).to(a.dtype())), lt(a, 0.0).to(a.dtype())));
  u = add(u, mul(x[2].to(a.dtype()), 0.5));  // an int64 input cast
  return {u};
}

TEST(FusedKernelSource, CoversEveryFamilyAndBakesConstantsExactly) {
  const TracedGroup g = trace_group(all_families, {cuda_fake({6, 7}), cuda_fake({7}), cuda_fake({6, 1}, kInt64)});
  ASSERT_NE(g.op, nullptr);
  const std::string src = fused_kernel_source(g.op->program(), fused_geometry(g.output, g.inputs));
  for (const char* piece : {"extern \"C\" __global__ void tg_fused_elementwise(const TgFusedArgs a)", "ew::GeluTanhFn<float>{}(",
                            "ew::ThresholdBackwardFn<float>{}(", "ew::ClampFn<float>{", "ew::PowFn<float>{", "(0x1.99999ap-4f)", "__int_as_float",
                            "const long long* in2", "a.strides_in", "a.out[i]"})
    EXPECT_NE(src.find(piece), std::string::npos) << piece << " not in\n" << src;
}

// The generated kernels carry ops/elementwise/elementwise_math.h exactly as the eager kernels compile it: the
// text embedded at build time is the file's, and every kernel holds all of it.
TEST(FusedKernelSource, EmbedsTheElementwiseMathHeaderAsWritten) {
  std::ifstream file(std::string(TG_TEST_DATA_DIR) + "/../../ops/elementwise/elementwise_math.h", std::ios::binary);
  ASSERT_TRUE(file.good());
  const std::string header((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(std::string(kElementwiseMathSource), header);
  const TracedGroup g = trace_group(all_families, {cuda_fake({6, 7}), cuda_fake({7}), cuda_fake({6, 1}, kInt64)});
  ASSERT_NE(g.op, nullptr);
  EXPECT_NE(fused_kernel_source(g.op->program(), fused_geometry(g.output, g.inputs)).find(header), std::string::npos);
}

TEST(FusedKernelSource, ContiguousOperandsIndexLinearly) {
  auto fn = [](const TensorList& x) { return TensorList{exp(add(x[0], x[1]))}; };
  const TracedGroup g = trace_group(fn, {cuda_fake({32, 8}, kFloat64), cuda_fake({32, 8}, kFloat64)});
  const std::string src = fused_kernel_source(g.op->program(), fused_geometry(g.output, g.inputs));
  EXPECT_NE(src.find("a.in0[i]"), std::string::npos) << src;
  EXPECT_NE(src.find("a.in1[i]"), std::string::npos) << src;
  EXPECT_EQ(src.find("sizes["), std::string::npos) << src;
  EXPECT_NE(src.find("double* out"), std::string::npos) << src;
}

// 16-bit floats: read as their bits and widened, every step rounded to its dtype, stored narrowed.
TEST(FusedKernelSource, SixteenBitFloatsComputeInFloatAndRoundEachStep) {
  auto fn = [](const TensorList& x) { return TensorList{mul(sigmoid(add(x[0], x[1])), x[2].to(kBFloat16))}; };
  const TracedGroup g = trace_group(fn, {cuda_fake({8, 3}, kBFloat16), cuda_fake({3}, kBFloat16), cuda_fake({8, 3}, kFloat16)});
  ASSERT_NE(g.op, nullptr);
  const std::string src = fused_kernel_source(g.op->program(), fused_geometry(g.output, g.inputs));
  // The cast comes first (in0, the float16 input), then add(in1, in2) and sigmoid.
  for (const char* piece : {"unsigned short* out", "const float in0 = tg_from_f16(a.in0[i])",
                            "const float in1 = tg_from_bf16(a.in1[i])", "t0 = tg_round_bf16(in0)",
                            "tg_round_bf16(ew::AddFn<float>{(0x1p+0f)}(in1, in2))", "tg_round_bf16(ew::SigmoidFn<float>{}(t1))", "a.out[i] = tg_to_bf16(t3)"})
    EXPECT_NE(src.find(piece), std::string::npos) << piece << " not in\n" << src;
}

TEST(FusedKernelSource, LoggedOncePerSignatureWithTgLogsFusion) {
  auto fn = [](const TensorList& x) { return TensorList{mul(exp(x[0]), 0.123456789)}; };
  ::setenv("TG_LOGS", "fusion", 1);
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 2; ++i) {
    graphs::Partition p = traced(fn, {cuda_fake({9})});
    graphs::fuse_elementwise_chains(p.forward);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  ::unsetenv("TG_LOGS");
  const size_t first = err.find("[tapegraph:fusion] generated kernel for exp(in0) -> t0; mul(t0, other=");
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find("[tapegraph:fusion] generated kernel", first + 1), std::string::npos) << err;
  EXPECT_NE(err.find("extern \"C\" __global__"), std::string::npos) << err;
}

#ifdef TG_WITH_CUDA
// NVRTC runs on the host: the generated sources must compile (here to PTX) without a GPU.
TEST(FusedKernelSource, CompilesWithNvrtc) {
  for (DType d : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const TracedGroup g = trace_group(all_families, {cuda_fake({6, 7}, d), cuda_fake({7}, d), cuda_fake({6, 1}, kInt64)});
    for (bool transposed_input : {false, true}) {
      std::vector<TensorMeta> inputs = g.inputs;
      if (transposed_input) inputs[0].strides = {1, 6};
      const std::string src = fused_kernel_source(g.op->program(), fused_geometry(g.output, inputs));
      const cuda::CompiledImage image = cuda::nvrtc_compile(src, "compute_90");
      EXPECT_FALSE(image.cubin);
      EXPECT_NE(image.image.find(".entry tg_fused_elementwise"), std::string::npos) << image.log;
    }
  }
  // Integer and bool arithmetic, comparisons of integers, casts to bool and back.
  auto ints = [](const TensorList& x) {
    const Tensor s = add(mul(x[0], 3), sub(x[1], x[0], 2));
    const Tensor m = mul(gt(s, 2), ne(x[1], 0));
    return TensorList{add(mul(where(m, abs(s), neg(pow(s, 2))), sgn(x[0])), clamp(x[1], 0, 9)).to(kBool)};
  };
  const TracedGroup g = trace_group(ints, {cuda_fake({5}, kInt32), cuda_fake({5}, kInt64)});
  const std::string src = fused_kernel_source(g.op->program(), fused_geometry(g.output, g.inputs));
  EXPECT_NE(cuda::nvrtc_compile(src, "compute_90").image.find(".entry"), std::string::npos);
  EXPECT_TRUE(cuda::nvrtc_compile(src, "sm_90").cubin);
}

TEST(FusedKernelSource, CompileErrorsShowTheSource) {
  EXPECT_THROW_MSG(cuda::nvrtc_compile("extern \"C\" __global__ void k() { undefined_name; }", "compute_90"),
                   "1\textern \"C\" __global__ void k()");
}
#endif

// ---- on a GPU: fused against unfused against eager ------------------------------------------------

struct Case {
  std::string name;
  GraphFn fn;
  TensorList inputs;
  double rtol, atol;
};

// Values and gradients of eager, compiled with fusion and compiled without, over three calls, and
// that the fused graphs hold fused_elementwise nodes and the unfused ones none.
void expect_fusion_parity(const Case& c, const std::string& backend) {
  SCOPED_TRACE(c.name + " under " + backend);
  for (bool fuse : {true, false}) {
    testing::expect_compiled_matches_eager(c.fn, c.inputs,
                                           {.compile = {.backend = backend, .fuse_elementwise = fuse},
                                            .rtol = c.rtol, .atol = c.atol, .calls = 3});
    auto fn = c.fn;
    Compiled<GraphFn> compiled(fn, {.backend = backend, .fuse_elementwise = fuse});
    TensorList outs;
    for (int call = 0; call < 3; ++call) outs = compiled(c.inputs);
    const TensorList eager = c.fn(c.inputs);
    for (size_t i = 0; i < outs.size(); ++i) testing::expect_close(outs[i], eager[i], c.rtol, c.atol);
    const auto& fw = compiled.counters().forward_ops;
    const auto& bw = compiled.counters().backward_ops;
    const int fw_fused = fw.count("fused_elementwise") ? fw.at("fused_elementwise") : 0;
    const int bw_fused = bw.count("fused_elementwise") ? bw.at("fused_elementwise") : 0;
    // Every case has groups both ways, and without the switch none anywhere.
    if (fuse) {
      EXPECT_GE(fw_fused, 1) << "forward ops: " << fw.size();
      EXPECT_GE(bw_fused, 1) << "backward ops: " << bw.size();
    } else {
      EXPECT_EQ(fw_fused + bw_fused, 0);
    }
    bool empty = false;
    for (const Tensor& t : c.inputs) empty = empty || t.numel() == 0;
    if (backend == "cudagraphs" && !empty) EXPECT_GT(compiled.counters().graphs_captured, 0);
  }
}

Tensor cuda_randn(const Shape& s, DType d, bool requires_grad = false) {
  Tensor t = randn(s, {.dtype = d, .device = kCuda});
  if (requires_grad) t.requires_grad_();
  return t;
}

// Tolerances of fused against unfused graphs: a 16-bit step may round an ulp apart when the
// generated code contracts into an FMA or holds a constant in float where the op's functor rounds it.
std::pair<double, double> parity_tolerance(DType d) {
  switch (d) {
    case DType::Float64: return {1e-12, 1e-13};
    case DType::Float16: return {8e-3, 4e-3};
    case DType::BFloat16: return {4e-2, 3e-2};
    default: return {2e-5, 2e-6};
  }
}

std::vector<Case> gpu_cases(DType d) {
  const auto [rtol, atol] = parity_tolerance(d);
  std::vector<Case> cases;
  // A chain with an activation whose gradient (gelu_backward) fuses with the chain's gradients.
  cases.push_back({"chain", [](const TensorList& x) { return TensorList{sub(gelu(add(mul(x[0], x[1]), 0.5)), sigmoid(x[1]))}; },
                   {cuda_randn({64, 129}, d, true), cuda_randn({64, 129}, d, true)}, rtol, atol});
  // Broadcasting: a row, a column, a 0-dim CUDA tensor; and a zero-size dim.
  cases.push_back({"broadcast",
                   [](const TensorList& x) { return TensorList{mul(tanh(add(mul(x[0], x[1]), x[2])), add(x[3], 1.0))}; },
                   {cuda_randn({33, 1, 17}, d, true), cuda_randn({5, 17}, d, true), cuda_randn({33, 5, 1}, d, true),
                    cuda_randn({}, d, true)},
                   rtol, atol});
  // tanh, not relu: a relu's gradient and the broadcast input's sum become one relu_backward_bias_grad
  // node (the epilogue fusion), which would leave no elementwise chain in the backward.
  cases.push_back({"empty", [](const TensorList& x) { return TensorList{mul(tanh(add(mul(x[0], 2.0), x[1])), 3.0)}; },
                   {cuda_randn({0, 7}, d, true), cuda_randn({7}, d, true)}, rtol, atol});
  // Non-contiguous inputs: a transpose, a strided slice and an expand, read in place.
  {
    const Tensor base = cuda_randn({40, 24}, d);
    const Tensor tr = transpose(base, 0, 1).detach().requires_grad_();
    const Tensor sl = slice(cuda_randn({24, 90}, d), 1, 1, 80, 2).detach().requires_grad_();
    const Tensor ex = cuda_randn({24, 1}, d);  // read broadcast
    cases.push_back({"strided", [](const TensorList& x) { return TensorList{mul(sigmoid(add(x[0], x[1])), sub(x[2], 0.3))}; },
                     {tr, sl, ex}, rtol, atol});
  }
  // ReLU and tanh gradients, comparisons, where, a cast of an integer input, several outputs.
  cases.push_back({"activations and masks",
                   [](const TensorList& x) {
                     const Tensor h = relu(add(x[0], x[1]));
                     const Tensor t = tanh(mul(h, 1.5));
                     const Tensor picked = where(gt(x[0], 0.2), t, mul(x[1], x[2].to(x[0].dtype())));
                     return TensorList{add(picked, exp(mul(x[1], -0.5))), t.sum()};
                   },
                   {cuda_randn({16, 48}, d, true), cuda_randn({16, 48}, d, true),
                    randint(0, 5, {16, 1}, {.dtype = kInt64, .device = kCuda})},
                   rtol, atol});
  return cases;
}

class FusionOnGpu : public ::testing::TestWithParam<std::tuple<DType, std::string>> {};

TEST_P(FusionOnGpu, FusedMatchesUnfusedAndEager) {
  TG_REQUIRE_CUDA();
  manual_seed(7);
  const auto& [dtype, backend] = GetParam();
  for (const Case& c : gpu_cases(dtype)) expect_fusion_parity(c, backend);
}

INSTANTIATE_TEST_SUITE_P(DtypesAndBackends, FusionOnGpu,
                         ::testing::Combine(::testing::Values(kFloat32, kFloat64, kBFloat16, kFloat16),
                                            ::testing::Values(std::string("aot_eager"), std::string("cudagraphs"))),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_" + std::get<1>(info.param);
                         });

// The fused op's CUDA kernel against the same ops run eagerly on the CPU: every family, float32 and
// float64 and both 16-bit floats, with broadcast, strided and integer inputs.
TEST(FusedElementwiseOnGpu, KernelMatchesEagerCpuOps) {
  TG_REQUIRE_CUDA();
  for (DType d : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    // The CPU's libm and CUDA's device math differ by an ulp or two per function, over ~40 terms;
    // in 16 bits such an ulp can survive the rounding of a step, and the terms sum to about 20.
    const double tol = d == kFloat64 ? 1e-11 : d == kFloat32 ? 5e-5 : d == kFloat16 ? 4e-2 : 3e-1;
    const TracedGroup g = trace_group(all_families, {cuda_fake({6, 7}, d), cuda_fake({7}, d), cuda_fake({6, 1}, kInt64)});
    ASSERT_NE(g.op, nullptr);
    // The fused node reads the graph inputs in its own order: map them.
    auto fused_inputs = [&](const TensorList& args) {
      TensorList in;
      for (const graphs::GraphNode& n : g.part.forward.nodes)
        if (n.op.get() == g.op)
          for (graphs::ValueId v : n.inputs)
            for (const graphs::GraphInput& gi : g.part.forward.inputs)
              if (gi.value == v) in.push_back(args[static_cast<size_t>(gi.index)].to(kCuda));
      return in;
    };
    const Tensor b = testing::random_tensor({7}, d, false, -2, 2);
    const Tensor i = randint(-3, 4, {6, 1}, {.dtype = kInt64});
    for (bool transposed : {false, true}) {
      SCOPED_TRACE(transposed ? "transposed first input" : "contiguous inputs");
      const Tensor a = transposed ? transpose(testing::random_tensor({7, 6}, d, false, -2, 2), 0, 1)
                                  : testing::random_tensor({6, 7}, d, false, -2, 2);
      TensorList in = fused_inputs({a, b, i});
      ASSERT_EQ(in.size(), 3u);
      if (transposed) {  // keep the device copy transposed, so the kernel reads it strided
        for (Tensor& t : in)
          if (t.sizes() == Shape{6, 7}) t = transpose(contiguous(transpose(t, 0, 1)), 0, 1);
      }
      const Tensor gpu = run_kernel(*g.op, in).at(0);
      testing::expect_close(gpu, all_families({a, b, i})[0], tol, tol);
    }
  }
}

#ifdef TG_WITH_CUDA
TEST(FusedElementwiseOnGpu, KernelsAreCachedBySignature) {
  TG_REQUIRE_CUDA();
  auto fn = [](const TensorList& x) { return TensorList{mul(sin(add(x[0], 0.77)), x[1])}; };
  const TensorList in = {cuda_randn({10, 3}, kFloat32), cuda_randn({10, 3}, kFloat32)};
  auto first = compile(fn);
  first(in);
  const size_t loaded = cuda::fused_kernels_loaded();
  auto second = compile(fn);  // another compiled function with the same group: no new kernel
  for (int call = 0; call < 3; ++call) testing::expect_close(second(in)[0], fn(in)[0], 2e-5, 2e-6);
  EXPECT_EQ(cuda::fused_kernels_loaded(), loaded);
  auto strided = compile(fn);  // a transposed input is another layout: one more kernel
  const TensorList tin = {transpose(cuda_randn({3, 10}, kFloat32), 0, 1), in[1]};
  testing::expect_close(strided(tin)[0], fn(tin)[0], 2e-5, 2e-6);
  EXPECT_EQ(cuda::fused_kernels_loaded(), loaded + 1);
}
#endif

}  // namespace
}  // namespace tg
