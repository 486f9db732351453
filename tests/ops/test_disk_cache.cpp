// The on-disk cache (Note [Warm start]): entries come back as stored; truncated, damaged, stale and
// colliding entries are reported once and rebuilt, never trusted; an unwritable directory is
// reported once; concurrent writers never expose part of a file. Where the library was built with
// CUDA, NVRTC's images go through it (NVRTC runs on the host: no GPU needed); on a GPU, cuBLASLt's
// algorithm choices and cuDNN's attention plans do too.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "ops/core/disk_cache.h"
#include "support/test_support.h"

#ifdef TG_WITH_CUDA
#include "graphs/capture/fake.h"
#include "graphs/capture/joint.h"
#include "graphs/partition/partition.h"
#include "graphs/passes/elementwise_fusion.h"
#include "ops/attention/flash_attention.h"
#include "ops/attention/flash_attention_kernels.h"
#include "ops/conv/conv_kernels.h"
#include "ops/elementwise/cuda/nvrtc_compiler.h"
#include "ops/elementwise/fused_elementwise.h"
#include "ops/elementwise/fused_elementwise_codegen.h"
#include "ops/linalg/cuda/blas.h"
#endif

namespace tg {
namespace {

namespace fs = std::filesystem;

// Points the cache at a fresh directory for one test and back at the environment's afterwards.
class DiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int n = 0;
    dir_ = fs::temp_directory_path() / ("tg_disk_cache_test_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(dir_);
    set_disk_cache_dir(dir_.string());
    reset_disk_cache_stats();
  }
  void TearDown() override {
    set_disk_cache_dir("");
    fs::remove_all(dir_);
  }
  fs::path dir_;
};

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// The file's bytes with the byte at `at` (from the end when negative) inverted.
void flip(const std::string& path, long at) {
  std::string bytes = read(path);
  const size_t i = at >= 0 ? static_cast<size_t>(at) : bytes.size() - static_cast<size_t>(-at);
  bytes[i] = static_cast<char>(~bytes[i]);
  write(path, bytes);
}

// What `load` printed on stderr while it ran.
template <typename Fn>
std::string stderr_of(Fn load) {
  ::testing::internal::CaptureStderr();
  load();
  return ::testing::internal::GetCapturedStderr();
}

TEST(DiskCacheHash, IsFnv1a64) {
  // The published FNV-1a 64-bit values of "" and "a".
  EXPECT_EQ(disk_cache_hash(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(disk_cache_hash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(disk_cache_hash("foobar"), 0x85944171f73967e8ull);
}

TEST_F(DiskCacheTest, StoresAndLoads) {
  EXPECT_FALSE(disk_cache_load("test", "key one").has_value());
  const std::string payload("payload\0with a NUL", 18);
  disk_cache_store("test", "key one", payload);
  EXPECT_TRUE(fs::exists(disk_cache_path("test", "key one")));
  EXPECT_EQ(disk_cache_path("test", "key one").rfind(dir_.string() + "/test-", 0), 0u);
  const auto loaded = disk_cache_load("test", "key one");
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(*loaded, payload);
  const DiskCacheStats s = disk_cache_stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.stores, 1);
  EXPECT_EQ(s.rejected, 0);
  disk_cache_store("test", "empty", "");
  EXPECT_EQ(disk_cache_load("test", "empty"), std::optional<std::string>(""));
  disk_cache_store("other", "k", "v");
  const auto by_kind = disk_cache_stats_by_kind();
  ASSERT_EQ(by_kind.size(), 2u);
  EXPECT_EQ(by_kind.at("test").hits, 2);
  EXPECT_EQ(by_kind.at("test").stores, 2);
  EXPECT_EQ(by_kind.at("other").stores, 1);
  EXPECT_EQ(by_kind.at("other").hits, 0);
}

TEST_F(DiskCacheTest, OtherKeysAndKindsMiss) {
  disk_cache_store("test", "device A, library 1.0", "x");
  EXPECT_FALSE(disk_cache_load("test", "device B, library 1.0").has_value());
  EXPECT_FALSE(disk_cache_load("test", "device A, library 1.1").has_value());
  EXPECT_FALSE(disk_cache_load("other", "device A, library 1.0").has_value());
  EXPECT_NE(disk_cache_path("test", "device A, library 1.0"), disk_cache_path("test", "device B, library 1.0"));
  EXPECT_EQ(disk_cache_stats().misses, 3);
  EXPECT_EQ(disk_cache_stats().rejected, 0);
}

TEST_F(DiskCacheTest, OffStoresNothing) {
  set_disk_cache_dir("off");
  EXPECT_EQ(disk_cache_dir(), "");
  EXPECT_EQ(disk_cache_path("test", "k"), "");
  disk_cache_store("test", "k", "v");
  EXPECT_FALSE(disk_cache_load("test", "k").has_value());
  EXPECT_FALSE(fs::exists(dir_));
  EXPECT_EQ(disk_cache_stats().stores, 0);
}

TEST_F(DiskCacheTest, TruncatedEntryIsReportedOnceAndRebuilt) {
  const std::string payload(1000, 'p');
  disk_cache_store("test", "k", payload);
  const std::string path = disk_cache_path("test", "k");
  fs::resize_file(path, fs::file_size(path) - 300);
  const std::string err = stderr_of([] { EXPECT_FALSE(disk_cache_load("test", "k").has_value()); });
  EXPECT_NE(err.find("warning: cache entry " + path + " is truncated"), std::string::npos) << err;
  EXPECT_NE(err.find("rebuilding it"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(path));  // never read again
  EXPECT_EQ(disk_cache_stats().rejected, 1);
  // Rebuilt (stored again by its user), it loads; a second truncation of the same entry is not
  // reported again in this process.
  disk_cache_store("test", "k", payload);
  EXPECT_EQ(disk_cache_load("test", "k"), std::optional<std::string>(payload));
  fs::resize_file(path, 10);  // shorter than the header
  EXPECT_EQ(stderr_of([] { EXPECT_FALSE(disk_cache_load("test", "k").has_value()); }), "");
  EXPECT_EQ(disk_cache_stats().rejected, 2);
}

TEST_F(DiskCacheTest, ShortFileIsTruncated) {
  disk_cache_store("test", "k", "v");
  const std::string path = disk_cache_path("test", "k");
  fs::resize_file(path, 10);
  const std::string err = stderr_of([] { EXPECT_FALSE(disk_cache_load("test", "k").has_value()); });
  EXPECT_NE(err.find("is truncated (10 bytes, shorter than its header)"), std::string::npos) << err;
}

TEST_F(DiskCacheTest, FlippedBytesAreDetected) {
  const std::string payload(500, 'p');
  // The last byte (payload), a byte of the key text, of the magic, and of the payload size.
  for (long at : {-1L, 45L, 0L, 31L}) {
    disk_cache_store("test", "the key", payload);
    const std::string path = disk_cache_path("test", "the key");
    flip(path, at);
    set_disk_cache_dir(dir_.string());  // forget the earlier warning
    const std::string err = stderr_of([] { EXPECT_FALSE(disk_cache_load("test", "the key").has_value()); });
    EXPECT_NE(err.find(at == 31 ? "is truncated" : "is damaged"), std::string::npos) << at << ": " << err;
    EXPECT_FALSE(fs::exists(path));
  }
  EXPECT_EQ(disk_cache_stats().rejected, 4);
  EXPECT_EQ(disk_cache_stats().hits, 0);
}

TEST_F(DiskCacheTest, OtherFormatVersionIsStale) {
  disk_cache_store("test", "k", "v");
  const std::string path = disk_cache_path("test", "k");
  std::string bytes = read(path);
  bytes[8] = static_cast<char>(bytes[8] + 1);  // the format version follows the 8-byte magic
  write(path, bytes);
  const std::string err = stderr_of([] { EXPECT_FALSE(disk_cache_load("test", "k").has_value()); });
  EXPECT_NE(err.find("is stale (cache format 2, this build reads 1)"), std::string::npos) << err;
}

TEST_F(DiskCacheTest, EntryOfAnotherKeyIsStale) {
  // As if two keys hashed to one file name: the entry's own key text tells them apart.
  disk_cache_store("test", "key A", "payload of A");
  fs::copy_file(disk_cache_path("test", "key A"), disk_cache_path("test", "key B"));
  const std::string err = stderr_of([] { EXPECT_FALSE(disk_cache_load("test", "key B").has_value()); });
  EXPECT_NE(err.find("is stale (written for another key)"), std::string::npos) << err;
  EXPECT_EQ(disk_cache_load("test", "key A"), std::optional<std::string>("payload of A"));
}

TEST_F(DiskCacheTest, RefusedPayloadIsReportedAndRemoved) {
  disk_cache_store("test", "k", "not what the library wants");
  ASSERT_TRUE(disk_cache_load("test", "k").has_value());
  const std::string err = stderr_of([] { disk_cache_reject("test", "k", "the library refused it"); });
  EXPECT_NE(err.find("was refused (the library refused it); rebuilding it"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(disk_cache_path("test", "k")));
  const DiskCacheStats s = disk_cache_stats();
  EXPECT_EQ(s.hits, 0);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.rejected, 1);
}

TEST_F(DiskCacheTest, UnwritableDirectoryIsReportedOnce) {
  fs::create_directories(dir_);
  write((dir_ / "a_file").string(), "x");
  set_disk_cache_dir((dir_ / "a_file" / "cache").string());  // under a file: never creatable
  const std::string err = stderr_of([] {
    disk_cache_store("test", "k", "v");
    disk_cache_store("test", "k2", "v");
  });
  EXPECT_NE(err.find("warning: cannot write the cache directory"), std::string::npos) << err;
  EXPECT_EQ(err.find("warning", err.find("warning") + 1), std::string::npos) << err;
  EXPECT_FALSE(disk_cache_load("test", "k").has_value());
  EXPECT_EQ(disk_cache_stats().stores, 0);
  EXPECT_EQ(disk_cache_stats().write_failures, 1);  // the second store is not tried
}

TEST_F(DiskCacheTest, ConcurrentWritersNeverExposePartOfAFile) {
  const std::string a(200000, 'a'), b(300000, 'b');
  std::atomic<bool> bad{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        if (t < 2) {
          disk_cache_store("test", "shared", t == 0 ? a : b);
        } else if (auto v = disk_cache_load("test", "shared")) {
          if (*v != a && *v != b) bad = true;
        }
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(bad.load());
  EXPECT_EQ(disk_cache_stats().rejected, 0);
  for (const auto& entry : fs::directory_iterator(dir_))  // no temporary file left behind
    EXPECT_EQ(entry.path().extension(), ".bin") << entry.path();
}

#ifdef TG_WITH_CUDA
// The kernel fused_elementwise generates for tanh(a * b) + a on float32 operands.
std::string generated_kernel_source() {
  auto fn = [](const TensorList& x) { return TensorList{add(tanh(mul(x[0], x[1])), x[0])}; };
  const Device cuda = cuda_device(0);
  graphs::Partition p = graphs::partition(
      graphs::trace_joint(fn, {graphs::fake_tensor({4, 5}, kFloat32, cuda, false),
                               graphs::fake_tensor({4, 5}, kFloat32, cuda, false)}),
      graphs::PartitionerKind::Default);
  EXPECT_EQ(graphs::fuse_elementwise_chains(p.forward), 1);
  for (const graphs::GraphNode& n : p.forward.nodes)
    if (auto* f = dynamic_cast<const FusedElementwiseOp*>(n.op.get())) {
      std::vector<TensorMeta> inputs;
      for (graphs::ValueId v : n.inputs) inputs.push_back(p.forward.values[static_cast<size_t>(v)].meta);
      return fused_kernel_source(f->program(), fused_geometry(p.forward.values[static_cast<size_t>(n.outputs[0])].meta, inputs));
    }
  ADD_FAILURE() << "no fused node in\n" << p.forward.to_text();
  return {};
}

// The one nvrtc entry the directory holds.
std::string nvrtc_entry(const fs::path& dir) {
  std::string found;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().rfind("nvrtc-", 0) == 0) {
      EXPECT_EQ(found, "") << "two nvrtc entries";
      found = entry.path().string();
    }
  return found;
}

TEST_F(DiskCacheTest, SecondNvrtcCompileIsAHit) {
  const std::string src = generated_kernel_source();
  for (const char* arch : {"compute_90", "sm_90"}) {
    reset_disk_cache_stats();
    const cuda::CompiledImage cold = cuda::nvrtc_compile(src, arch);
    EXPECT_EQ(disk_cache_stats().misses, 1) << arch;
    EXPECT_EQ(disk_cache_stats().stores, 1) << arch;
    const cuda::CompiledImage warm = cuda::nvrtc_compile(src, arch);
    EXPECT_EQ(disk_cache_stats().hits, 1) << arch;
    EXPECT_EQ(disk_cache_stats().stores, 1) << arch;  // nothing compiled, nothing stored again
    EXPECT_EQ(warm.image, cold.image) << arch;
    EXPECT_EQ(warm.cubin, cold.cubin) << arch;
    EXPECT_EQ(warm.log, cold.log) << arch;
  }
  // Another target (device) or another source is another entry.
  reset_disk_cache_stats();
  (void)cuda::nvrtc_compile(src, "compute_80");
  (void)cuda::nvrtc_compile(src + "\n// another source\n", "compute_90");
  EXPECT_EQ(disk_cache_stats().hits, 0);
  EXPECT_EQ(disk_cache_stats().misses, 2);
}

TEST_F(DiskCacheTest, DamagedNvrtcImageIsRebuilt) {
  const std::string src = generated_kernel_source();
  const cuda::CompiledImage cold = cuda::nvrtc_compile(src, "compute_90");
  EXPECT_NE(cold.image.find(".entry tg_fused_elementwise"), std::string::npos);
  const std::string path = nvrtc_entry(dir_);
  ASSERT_NE(path, "");
  fs::resize_file(path, fs::file_size(path) / 2);
  cuda::CompiledImage rebuilt;
  std::string err = stderr_of([&] { rebuilt = cuda::nvrtc_compile(src, "compute_90"); });
  EXPECT_NE(err.find("is truncated"), std::string::npos) << err;
  EXPECT_EQ(rebuilt.image, cold.image);
  EXPECT_EQ(disk_cache_stats().stores, 2);  // compiled again and stored again
  EXPECT_EQ(cuda::nvrtc_compile(src, "compute_90").image, cold.image);
  EXPECT_EQ(disk_cache_stats().hits, 1);
  // A flipped byte inside the image: detected by the checksum, compiled again.
  flip(path, -100);
  set_disk_cache_dir(dir_.string());
  err = stderr_of([&] { rebuilt = cuda::nvrtc_compile(src, "compute_90"); });
  EXPECT_NE(err.find("is damaged (checksum mismatch)"), std::string::npos) << err;
  EXPECT_EQ(rebuilt.image, cold.image);
  EXPECT_EQ(disk_cache_stats().rejected, 2);
}

TEST_F(DiskCacheTest, NvrtcWithoutCacheStillCompiles) {
  set_disk_cache_dir("off");
  const std::string src = generated_kernel_source();
  EXPECT_EQ(cuda::nvrtc_compile(src, "compute_90").image, cuda::nvrtc_compile(src, "compute_90").image);
  EXPECT_EQ(disk_cache_stats().hits + disk_cache_stats().misses + disk_cache_stats().stores, 0);
}

// ---- on a GPU: cuBLASLt's choices and cuDNN's attention plans --------------------------------------

// The entries of `kind` in dir, by path.
std::vector<std::string> entries(const fs::path& dir, const std::string& kind) {
  std::vector<std::string> found;
  if (!fs::exists(dir)) return found;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().rfind(kind + "-", 0) == 0) found.push_back(entry.path().string());
  return found;
}

// The key an entry file was stored under (its header's key text, less the kind's line).
std::string key_of(const std::string& path) {
  const std::string bytes = read(path);
  uint64_t key_size = 0;
  std::memcpy(&key_size, bytes.data() + 16, sizeof key_size);  // after the magic, version, reserved word
  const std::string full = bytes.substr(40, key_size);
  return full.substr(full.find('\n') + 1);
}

TEST_F(DiskCacheTest, CublasLtChoiceIsReadBackInsteadOfTimed) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device(0);
  const Tensor x = testing::random_tensor({64, 128}, kFloat32).to(dev), w = testing::random_tensor({96, 128}, kFloat32).to(dev),
               b = testing::random_tensor({96}, kFloat32).to(dev);
  cuda::clear_gemm_lt_plans();
  const Tensor cold = linear(x, w, b).cpu();
  const std::vector<std::string> stored = entries(dir_, "cublaslt");
  ASSERT_EQ(stored.size(), 1u) << "linear with a bias went through cuBLASLt once";
  testing::expect_close(cold, linear(x.cpu(), w.cpu(), b.cpu()), 1e-3, 1e-3);
  // As in a new process: no plan in memory, the choice on disk, read back and checked by cuBLASLt.
  cuda::clear_gemm_lt_plans();
  reset_disk_cache_stats();
  const Tensor warm = linear(x, w, b).cpu();
  EXPECT_EQ(disk_cache_stats().hits, 1);
  EXPECT_EQ(disk_cache_stats().misses, 0);
  EXPECT_EQ(disk_cache_stats().stores, 0);
  testing::expect_close(warm, cold, 1e-6, 1e-6);  // the same algorithm
  // An algorithm cuBLASLt refuses (all bits set: no such algorithm) is reported and chosen again.
  disk_cache_store("cublaslt", key_of(stored[0]), std::string(64, '\xff'));
  cuda::clear_gemm_lt_plans();
  reset_disk_cache_stats();
  Tensor again;
  const std::string err = stderr_of([&] { again = linear(x, w, b).cpu(); });
  EXPECT_NE(err.find("was refused (cuBLASLt does not accept it for this product)"), std::string::npos) << err;
  EXPECT_EQ(disk_cache_stats().rejected, 1);
  EXPECT_EQ(disk_cache_stats().stores, 1);
  testing::expect_close(again, cold, 1e-3, 1e-3);
}

// The fused attention's plans are built in every process, never read back from disk (a plan cuDNN
// deserialized ran without writing its outputs; Note [Warm start]). Its outputs and gradients match
// the composed path's, computed in float32.
TEST_F(DiskCacheTest, CudnnAttentionPlansAreNotKeptOnDisk) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device(0);
  auto run = [&](SdpaKernel kernel, DType dtype, TensorList& grads) {
    SdpaKernelGuard chosen(kernel);
    manual_seed(3);
    TensorList qkv;
    for (int i = 0; i < 3; ++i) qkv.push_back(randn({2, 4, 128, 64}).to(dev).to(dtype).requires_grad_(true));
    const Tensor out = scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], Tensor(), 0.0, true);
    out.to(kFloat32).sum().backward();
    grads.clear();
    for (const Tensor& t : qkv) grads.push_back(t.grad().to(kFloat32).cpu());
    return out.to(kFloat32).cpu();
  };
  TensorList fused_grads, reference_grads;
  for (int process = 0; process < 2; ++process) {
    cuda::clear_flash_attention_plans();
    const Tensor fused = run(SdpaKernel::kFused, kBFloat16, fused_grads);
    const Tensor reference = run(SdpaKernel::kComposed, kFloat32, reference_grads);
    testing::expect_close(fused, reference, 2e-2, 2e-2);
    for (size_t i = 0; i < 3; ++i) testing::expect_close(fused_grads[i], reference_grads[i], 5e-2, 5e-2);
  }
  EXPECT_TRUE(entries(dir_, "cudnn_sdpa").empty());
}

TEST_F(DiskCacheTest, CudnnConvolutionChoicesAreReadBackInsteadOfSearched) {
  TG_REQUIRE_CUDA();
  const Device dev = cuda_device(0);
  const Tensor x0 = testing::random_tensor({2, 3, 16, 16}, kFloat32).to(dev);
  const Tensor w0 = testing::random_tensor({8, 3, 3, 3}, kFloat32).to(dev);
  auto run = [&](Tensor& gw) {
    const Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
    const Tensor y = conv2d(x, w, Tensor(), {1}, 1);
    y.sum().backward();
    gw = w.grad().cpu();
    return y.cpu();
  };
  cuda::clear_conv_algorithms();
  Tensor cold_gw, warm_gw;
  const Tensor cold = run(cold_gw);
  EXPECT_EQ(entries(dir_, "cudnn_conv").size(), 3u) << "forward, input gradient and weight gradient";
  cuda::clear_conv_algorithms();
  reset_disk_cache_stats();
  const Tensor warm = run(warm_gw);
  EXPECT_EQ(disk_cache_stats().hits, 3);
  EXPECT_EQ(disk_cache_stats().misses, 0);
  EXPECT_EQ(disk_cache_stats().stores, 0);
  testing::expect_close(warm, cold, 1e-6, 1e-6);
  testing::expect_close(warm_gw, cold_gw, 1e-5, 1e-5);
}
#endif

}  // namespace
}  // namespace tg
