// See graph_retarget.h and Note [CUDA graph executor] in docs/cudagraph_executor.md.
#include "graphs/cudagraphs/graph_retarget.h"

#ifdef TG_WITH_CUDA
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <mutex>

#include "tensor/check.h"
#include "tensor/cuda/cuda_check.h"
#endif

namespace tg::graphs {

#ifdef TG_WITH_CUDA
namespace {

// The driver calls for kernel nodes' arguments, looked up through the runtime (nothing links
// libcuda itself). The argument layout queries need a 12.4 driver; without them nothing is rewritten.
struct GraphDriverApi {
  CUresult (*get_params)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*) = nullptr;
  CUresult (*set_params)(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*) = nullptr;
  CUresult (*exec_set_params)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*) = nullptr;
  CUresult (*func_param_info)(CUfunction, size_t, size_t*, size_t*) = nullptr;
  CUresult (*kernel_param_info)(CUkernel, size_t, size_t*, size_t*) = nullptr;
};

template <typename Fn>
void find_entry_point(const char* symbol, int version, Fn& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(symbol, &p, version, cudaEnableDefault, &status) == cudaSuccess &&
      status == cudaDriverEntryPointSuccess) {
    fn = reinterpret_cast<Fn>(p);
  }
  (void)cudaGetLastError();
}

const GraphDriverApi& driver() {
  static const GraphDriverApi api = [] {
    GraphDriverApi a;
    find_entry_point("cuGraphKernelNodeGetParams", 12000, a.get_params);
    find_entry_point("cuGraphKernelNodeSetParams", 12000, a.set_params);
    find_entry_point("cuGraphExecKernelNodeSetParams", 12000, a.exec_set_params);
    find_entry_point("cuFuncGetParamInfo", 12040, a.func_param_info);
    find_entry_point("cuKernelGetParamInfo", 12040, a.kernel_param_info);
    return a;
  }();
  return api;
}

// A kernel node's rewritten arguments: their bytes and the pointer array the driver reads.
struct KernelPatch {
  cudaGraphNode_t node = nullptr;
  CUDA_KERNEL_NODE_PARAMS params{};
  std::vector<std::vector<char>> arguments;
  std::vector<void*> pointers;
};

// The sizes of a kernel's arguments, asked of the driver once per kernel. CUDA 13.0's driver API has
// no count query, so the query runs until it refuses an index: that one refusal per kernel is an
// expected CUDA_ERROR_INVALID_VALUE (compute-sanitizer lists it as an API error).
const std::vector<size_t>& argument_sizes(const CUDA_KERNEL_NODE_PARAMS& params) {
  static std::mutex mutex;
  static std::map<const void*, std::vector<size_t>> known;
  const void* key = params.func ? static_cast<const void*>(params.func) : static_cast<const void*>(params.kern);
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, fresh] = known.try_emplace(key);
  if (fresh) {
    const GraphDriverApi& api = driver();
    size_t offset = 0, size = 0;
    for (size_t i = 0;; ++i) {
      const CUresult r = params.func ? api.func_param_info(params.func, i, &offset, &size)
                                     : api.kernel_param_info(params.kern, i, &offset, &size);
      if (r != CUDA_SUCCESS) break;
      it->second.push_back(size);
    }
  }
  return it->second;
}

// Reads the arguments of a kernel node and rewrites moved addresses in them; false (with why) where
// their layout cannot be read. `patch` is left without arguments when nothing moved.
bool read_kernel(cudaGraphNode_t node, const std::vector<AddressMove>& moves, KernelPatch& patch, std::string& why) {
  const GraphDriverApi& api = driver();
  if (!api.get_params || !api.set_params || !api.exec_set_params || !api.func_param_info || !api.kernel_param_info) {
    why = "the CUDA driver cannot report kernel argument layouts (it needs CUDA 12.4)";
    return false;
  }
  patch.node = node;
  if (api.get_params(reinterpret_cast<CUgraphNode>(node), &patch.params) != CUDA_SUCCESS) {
    why = "a kernel node's arguments could not be read";
    return false;
  }
  if (patch.params.kernelParams == nullptr) {
    why = "a kernel launched with a packed argument buffer";
    return false;
  }
  bool changed = false;
  std::vector<std::vector<char>> arguments;
  for (size_t size : argument_sizes(patch.params)) {
    const size_t i = arguments.size();
    std::vector<char> bytes(size);
    std::memcpy(bytes.data(), patch.params.kernelParams[i], size);
    // Pointers sit at 8-byte offsets, in a plain argument or inside a struct passed by value.
    for (size_t at = 0; at + sizeof(uintptr_t) <= size; at += sizeof(uintptr_t)) {
      uintptr_t word = 0;
      std::memcpy(&word, bytes.data() + at, sizeof word);
      const uintptr_t to = moved_address(word, moves);
      if (to == word) continue;
      std::memcpy(bytes.data() + at, &to, sizeof to);
      changed = true;
    }
    arguments.push_back(std::move(bytes));
  }
  if (changed) patch.arguments = std::move(arguments);
  return true;
}

// The memcpy and memset nodes' parameters, rewritten.
struct CopyPatch {
  cudaGraphNode_t node = nullptr;
  cudaMemcpy3DParms params{};
};
struct SetPatch {
  cudaGraphNode_t node = nullptr;
  cudaMemsetParams params{};
};

void* moved_pointer(void* p, const std::vector<AddressMove>& moves, bool& changed) {
  const auto word = reinterpret_cast<uintptr_t>(p);
  const uintptr_t to = moved_address(word, moves);
  changed = changed || to != word;
  return reinterpret_cast<void*>(to);
}

}  // namespace

bool retarget_graph(CUgraph_st* graph, CUgraphExec_st* exec, const std::vector<AddressMove>& moves, std::string& why) {
  size_t n = 0;
  TG_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0) TG_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
  // Everything is read and checked first, so that a refusal leaves the graph as it was.
  std::vector<KernelPatch> kernels;
  std::vector<CopyPatch> copies;
  std::vector<SetPatch> sets;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    TG_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    switch (type) {
      case cudaGraphNodeTypeKernel: {
        KernelPatch patch;
        if (!read_kernel(node, moves, patch, why)) return false;
        if (!patch.arguments.empty()) kernels.push_back(std::move(patch));
        break;
      }
      case cudaGraphNodeTypeMemcpy: {
        CopyPatch patch{node, {}};
        TG_CUDA_CHECK(cudaGraphMemcpyNodeGetParams(node, &patch.params));
        bool changed = false;
        patch.params.srcPtr.ptr = moved_pointer(patch.params.srcPtr.ptr, moves, changed);
        patch.params.dstPtr.ptr = moved_pointer(patch.params.dstPtr.ptr, moves, changed);
        if (changed) copies.push_back(patch);
        break;
      }
      case cudaGraphNodeTypeMemset: {
        SetPatch patch{node, {}};
        TG_CUDA_CHECK(cudaGraphMemsetNodeGetParams(node, &patch.params));
        bool changed = false;
        patch.params.dst = moved_pointer(patch.params.dst, moves, changed);
        if (changed) sets.push_back(patch);
        break;
      }
      case cudaGraphNodeTypeEmpty:
      case cudaGraphNodeTypeWaitEvent:
      case cudaGraphNodeTypeEventRecord:
        break;  // no memory referenced
      default:
        why = "the graph has a node of type " + std::to_string(static_cast<int>(type)) +
              " (not a kernel, copy, memset or event)";
        return false;
    }
  }
  // The template is rewritten with the instance, so that a later move starts from the new addresses.
  const GraphDriverApi& api = driver();
  for (KernelPatch& k : kernels) {
    for (auto& a : k.arguments) k.pointers.push_back(a.data());
    k.params.kernelParams = k.pointers.data();
    k.params.extra = nullptr;
    auto node = reinterpret_cast<CUgraphNode>(k.node);
    TG_CHECK(api.set_params(node, &k.params) == CUDA_SUCCESS &&
                 api.exec_set_params(reinterpret_cast<CUgraphExec>(exec), node, &k.params) == CUDA_SUCCESS,
             "[cudagraphs] updating a kernel node's arguments failed");
  }
  for (const CopyPatch& c : copies) {
    TG_CUDA_CHECK(cudaGraphMemcpyNodeSetParams(c.node, &c.params));
    TG_CUDA_CHECK(cudaGraphExecMemcpyNodeSetParams(exec, c.node, &c.params));
  }
  for (const SetPatch& s : sets) {
    TG_CUDA_CHECK(cudaGraphMemsetNodeSetParams(s.node, &s.params));
    TG_CUDA_CHECK(cudaGraphExecMemsetNodeSetParams(exec, s.node, &s.params));
  }
  return true;
}

#else

bool retarget_graph(CUgraph_st*, CUgraphExec_st*, const std::vector<AddressMove>&, std::string& why) {
  why = "tapegraph was built without CUDA";
  return false;
}

#endif

}  // namespace tg::graphs
