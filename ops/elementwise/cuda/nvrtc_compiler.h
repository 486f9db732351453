// Runtime compilation of generated CUDA C++ with NVRTC (needs the toolkit's libnvrtc, not a GPU).
#pragma once

#include <string>
#include <vector>

namespace tg::cuda {

// A compiled kernel image and what NVRTC said while making it.
struct CompiledImage {
  std::string image;  // a cubin for an "sm_XY" target, NUL-terminated PTX for "compute_XY"
  bool cubin = false;
  std::string log;
};

// Compiles `source` for `arch` ("sm_90" gives a cubin; "compute_90" gives PTX). Throws tg::Error with
// NVRTC's log and the numbered source when compilation fails.
CompiledImage nvrtc_compile(const std::string& source, const std::string& arch);

// The target to compile for a device of compute capability major.minor: its own cubin when NVRTC
// supports it, else PTX for the newest architecture NVRTC knows that the device can run (the
// driver compiles PTX to the device when the module loads).
std::string nvrtc_target_for(int major, int minor);

}  // namespace tg::cuda
