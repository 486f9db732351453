#include "ops/elementwise/cuda/nvrtc_compiler.h"

#include <nvrtc.h>

#include <cstring>
#include <iterator>
#include <optional>
#include <sstream>

#include "ops/core/disk_cache.h"
#include "tensor/check.h"

namespace tg::cuda {
namespace {

#define TG_NVRTC_CHECK(expr)                                                                   \
  do {                                                                                         \
    const nvrtcResult tg_res_ = (expr);                                                        \
    if (tg_res_ != NVRTC_SUCCESS) TG_FAIL("[nvrtc] ", #expr, " failed: ", nvrtcGetErrorString(tg_res_)); \
  } while (0)

// Destroys the program whatever happens to the compilation.
struct ProgramHolder {
  nvrtcProgram program = nullptr;
  ~ProgramHolder() {
    if (program) (void)nvrtcDestroyProgram(&program);
  }
};

std::string numbered(const std::string& source) {
  std::istringstream in(source);
  std::ostringstream out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) out << n << "\t" << line << "\n";
  return out.str();
}

std::string program_log(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return {};
  log.resize(size - 1);
  return log;
}

// What a compilation depends on besides its source: NVRTC's version and the options.
std::string cache_key(const std::string& source, const char* const* options, size_t count) {
  int major = 0, minor = 0;
  TG_NVRTC_CHECK(nvrtcVersion(&major, &minor));
  std::string key = "nvrtc " + std::to_string(major) + "." + std::to_string(minor) + "\n";
  for (size_t i = 0; i < count; ++i) key += std::string(options[i]) + "\n";
  return key + source;
}

// The payload: whether the image is a cubin, the log's size, the log, the image.
std::string encode(const CompiledImage& image) {
  const uint64_t log_size = image.log.size();
  std::string bytes(1, image.cubin ? '\1' : '\0');
  bytes.append(reinterpret_cast<const char*>(&log_size), sizeof log_size);
  return bytes + image.log + image.image;
}

// The image in `bytes`, or nothing when they do not hold one of the kind `cubin` asks for.
std::optional<CompiledImage> decode(const std::string& bytes, bool cubin) {
  uint64_t log_size = 0;
  if (bytes.size() < 1 + sizeof log_size) return std::nullopt;
  std::memcpy(&log_size, bytes.data() + 1, sizeof log_size);
  const size_t start = 1 + sizeof log_size;
  if (log_size > bytes.size() - start || bytes.size() - start - log_size == 0) return std::nullopt;
  if ((bytes[0] != '\0') != cubin) return std::nullopt;
  CompiledImage image;
  image.cubin = cubin;
  image.log = bytes.substr(start, log_size);
  image.image = bytes.substr(start + log_size);
  return image;
}

}  // namespace

CompiledImage nvrtc_compile(const std::string& source, const std::string& arch) {
  const std::string arch_option = "--gpu-architecture=" + arch;
  // No fast math: the generated kernels call the same device math functions as the eager kernels.
  // No contraction either: each op of a chain rounds its result before the next reads it, as it does
  // between eager kernels; a multiply-add contracted across two ops keeps the product unrounded, and
  // a difference of two equal products (a gradient that cancels exactly) came out nonzero.
  const char* options[] = {arch_option.c_str(), "--std=c++17", "--fmad=false"};
  // A process that compiled this source before left its image on disk (see Note [Warm start]).
  const std::string key = cache_key(source, options, std::size(options));
  if (std::optional<std::string> cached = disk_cache_load("nvrtc", key)) {
    if (std::optional<CompiledImage> image = decode(*cached, arch.rfind("sm_", 0) == 0)) return *image;
    disk_cache_reject("nvrtc", key, "not a compiled image");
  }
  ProgramHolder holder;
  TG_NVRTC_CHECK(nvrtcCreateProgram(&holder.program, source.c_str(), "fused_elementwise.cu", 0, nullptr, nullptr));
  const nvrtcResult compiled = nvrtcCompileProgram(holder.program, static_cast<int>(std::size(options)), options);
  CompiledImage result;
  result.log = program_log(holder.program);
  TG_CHECK(compiled == NVRTC_SUCCESS, "[nvrtc] compiling a generated kernel for ", arch, " failed: ",
           nvrtcGetErrorString(compiled), "\n", result.log, "\nsource:\n", numbered(source));
  result.cubin = arch.rfind("sm_", 0) == 0;
  size_t size = 0;
  if (result.cubin) {
    TG_NVRTC_CHECK(nvrtcGetCUBINSize(holder.program, &size));
    result.image.resize(size);
    TG_NVRTC_CHECK(nvrtcGetCUBIN(holder.program, result.image.data()));
  } else {
    TG_NVRTC_CHECK(nvrtcGetPTXSize(holder.program, &size));
    result.image.resize(size);  // includes the terminating NUL the driver expects
    TG_NVRTC_CHECK(nvrtcGetPTX(holder.program, result.image.data()));
  }
  disk_cache_store("nvrtc", key, encode(result));
  return result;
}

std::string nvrtc_target_for(int major, int minor) {
  int count = 0;
  TG_NVRTC_CHECK(nvrtcGetNumSupportedArchs(&count));
  std::vector<int> archs(static_cast<size_t>(count));
  TG_NVRTC_CHECK(nvrtcGetSupportedArchs(archs.data()));
  const int wanted = major * 10 + minor;
  int best = -1;
  for (int a : archs) {
    if (a == wanted) return "sm_" + std::to_string(a);
    if (a < wanted && a > best) best = a;
  }
  TG_CHECK(best > 0, "[nvrtc] this NVRTC cannot compile for compute capability ", major, ".", minor);
  return "compute_" + std::to_string(best);
}

}  // namespace tg::cuda
