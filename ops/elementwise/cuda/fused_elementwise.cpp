#include "ops/elementwise/cuda/fused_elementwise.h"

#include <cuda.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "ops/elementwise/cuda/nvrtc_compiler.h"
#include "ops/elementwise/fused_elementwise_codegen.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"

namespace tg::cuda {
namespace {

// The driver calls this file makes, looked up through the runtime: the library then needs no link
// against libcuda, so programs built with CUDA still start (and skip GPU work) where no driver is.
struct DriverApi {
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                            void**, void**) = nullptr;
  CUresult (*get_error_name)(CUresult, const char**) = nullptr;
};

template <typename Fn>
void load_entry_point(const char* symbol, Fn& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  TG_CUDA_CHECK(cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &status));
  TG_CHECK(status == cudaDriverEntryPointSuccess && p != nullptr, "[fused_elementwise] the CUDA driver has no ", symbol);
  fn = reinterpret_cast<Fn>(p);
}

const DriverApi& driver() {
  static const DriverApi api = [] {
    DriverApi a;
    load_entry_point("cuModuleLoadData", a.module_load_data);
    load_entry_point("cuModuleGetFunction", a.module_get_function);
    load_entry_point("cuLaunchKernel", a.launch_kernel);
    load_entry_point("cuGetErrorName", a.get_error_name);
    return a;
  }();
  return api;
}

void check_driver(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return;
  const char* name = "unknown error";
  if (driver().get_error_name) driver().get_error_name(r, &name);
  TG_FAIL("[fused_elementwise] ", call, " failed: ", name);
}

// "L", "B" or "S" per operand, and the number of dims when some operand is strided.
std::string layout_key(const FusedGeometry& g) {
  std::string key;
  for (OperandAccess a : g.access) key += a == OperandAccess::Linear ? 'L' : a == OperandAccess::Broadcast ? 'B' : 'S';
  if (g.any_strided()) key += std::to_string(g.sizes.size());
  return key;
}

// Loaded kernels by (device, signature, layout). Modules stay loaded for the process's lifetime.
struct KernelCache {
  std::mutex mutex;
  std::map<std::tuple<int, std::string, std::string>, CUfunction> kernels;
  std::map<int, std::string> targets;  // per device: what NVRTC compiles for
};

KernelCache& cache() {
  static KernelCache* c = new KernelCache;  // never destroyed: kernels may launch during exit
  return *c;
}

bool stream_is_capturing() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TG_CUDA_CHECK(cudaStreamIsCapturing(current_stream(), &status));
  return status != cudaStreamCaptureStatusNone;
}

std::string target_for_device(KernelCache& c, int device) {
  auto it = c.targets.find(device);
  if (it != c.targets.end()) return it->second;
  int major = 0, minor = 0;
  TG_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  TG_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return c.targets[device] = nvrtc_target_for(major, minor);
}

// The loaded kernel for this signature and layout on `device` (current), compiled on first use.
CUfunction kernel_for(int device, const FusedProgram& program, const std::string& signature, const FusedGeometry& g) {
  KernelCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto key = std::make_tuple(device, signature, layout_key(g));
  auto it = c.kernels.find(key);
  if (it != c.kernels.end()) return it->second;
  TG_CHECK(!stream_is_capturing(), "[fused_elementwise] the kernel for ", program.describe(), " (layout ",
           std::get<2>(key), ") is not compiled yet, and modules cannot be loaded while a stream is captured; "
           "run the graph once outside capture first (the cudagraphs backend does: it warms up before recording)");
  const std::string source = fused_kernel_source(program, g);
  const CompiledImage image = nvrtc_compile(source, target_for_device(c, device));
  CUmodule module = nullptr;
  check_driver(driver().module_load_data(&module, image.image.data()), "cuModuleLoadData");
  CUfunction fn = nullptr;
  check_driver(driver().module_get_function(&fn, module, kFusedKernelName), "cuModuleGetFunction");
  c.kernels.emplace(std::move(key), fn);
  return fn;
}

}  // namespace

void launch_fused_elementwise(const FusedProgram& program, const std::string& signature, const TensorList& inputs,
                              const Tensor& out) {
  if (out.numel() == 0) return;
  std::vector<TensorMeta> metas;
  std::vector<const void*> pointers{out.impl()->data()};
  for (const Tensor& t : inputs) {
    TG_CHECK(t.device() == out.device(), "[fused_elementwise] input on ", t.device().str(), ", output on ",
             out.device().str(), ": a fused group runs on one device");
    metas.push_back(meta_of(t));
    pointers.push_back(t.impl()->data());
  }
  const FusedGeometry g = fused_geometry(meta_of(out), metas);
  const int device = out.device().index;
  DeviceGuard guard(device);
  const CUfunction fn = kernel_for(device, program, signature, g);
  std::vector<int64_t> args = fused_kernel_args(g, pointers);
  void* params[] = {args.data()};
  constexpr unsigned kThreads = 256;
  const unsigned blocks = std::min(blocks_for(g.numel, kThreads), 1u << 20);  // grid-stride beyond that
  check_driver(driver().launch_kernel(fn, blocks, 1, 1, kThreads, 1, 1, 0, reinterpret_cast<CUstream>(current_stream()),
                                      params, nullptr),
               "cuLaunchKernel");
}

size_t fused_kernels_loaded() {
  KernelCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.kernels.size();
}

}  // namespace tg::cuda
