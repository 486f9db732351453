// CUDA graph capture for the cudagraphs backend (the rest of the backend is device-independent).
// See Note [CUDA graph executor] in docs/cudagraph_executor.md.
#include "graphs/cudagraphs/graph_recorder.h"

#include "graphs/cudagraphs/graph_retarget.h"
#include "graphs/logs.h"

#ifdef TG_WITH_CUDA
#include <cuda_runtime.h>

#include <mutex>
#include <sstream>

#include "ops/elementwise/copy.h"
#include "ops/factory/factory.h"
#include "ops/linalg/cuda/blas.h"
#include "ops/random/random.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/device_guard.h"
#include "tensor/cuda/forked_work.h"
#include "tensor/cuda_runtime.h"
#include "tensor/memory/cuda_memory.h"
#endif

namespace tg::graphs {

#ifdef TG_WITH_CUDA
namespace {

// An instantiated CUDA graph, the pool memory it writes, and its randomness.
class CudaRecordedGraph final : public RecordedGraph {
 public:
  CudaRecordedGraph(cudaGraph_t graph, cudaGraphExec_t exec, std::vector<MemoryRange> written, Tensor replay_shift,
                    const CaptureRandomness& drawn, int64_t kernels)
      : RecordedGraph(std::move(written)),
        graph_(graph),
        exec_(exec),
        replay_shift_(std::move(replay_shift)),
        drawn_(drawn),
        kernels_(kernels) {}
  int64_t kernels() const override { return kernels_; }
  ~CudaRecordedGraph() override {
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
  }
  bool retarget(const std::vector<AddressMove>& moves, std::string& why) override {
    return retarget_graph(graph_, exec_, moves, why);
  }
  void replay() override {
    if (drawn_.any()) {
      // Fresh counters for every random kernel of the graph: reserve as many blocks as the
      // recording drew and shift all of its draws there.
      const PhiloxState fresh = Generator::global().reserve(drawn_.end_offset - drawn_.min_offset);
      replay_shift_.narrow(0, 0, 1).fill_(static_cast<int64_t>(fresh.offset - drawn_.min_offset));
      replay_shift_.narrow(0, 1, 1).fill_(static_cast<int64_t>(fresh.seed));
    }
    TG_CUDA_CHECK(cudaGraphLaunch(exec_, cuda::current_stream()));
  }

 private:
  cudaGraph_t graph_;  // the captured template, kept for updates
  cudaGraphExec_t exec_;
  Tensor replay_shift_;
  CaptureRandomness drawn_;
  int64_t kernels_;
};

// Kernel nodes of a captured graph.
int64_t kernel_nodes(cudaGraph_t graph) {
  size_t n = 0;
  TG_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0) TG_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
  int64_t kernels = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    TG_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    kernels += type == cudaGraphNodeTypeKernel;
  }
  return kernels;
}

// Installs a randomness context for its lifetime.
class RandomnessScope {
 public:
  explicit RandomnessScope(CaptureRandomness* c) { set_capture_randomness(c); }
  ~RandomnessScope() { set_capture_randomness(nullptr); }
};

class CudaRecorder final : public GraphRecorder {
 public:
  explicit CudaRecorder(Device device) : device_(device), pool_(cuda::create_mempool()) {
    cuda::set_device(device.index);
    TG_CUDA_CHECK(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking));
  }
  ~CudaRecorder() override { cudaStreamDestroy(side_stream_); }

  cuda::MempoolId pool() const { return pool_; }

  std::shared_ptr<void> reclaim(const MemoryRange& range) override {
    auto memory = cuda::mempool_claim(pool_, reinterpret_cast<void*>(range.begin), range.end - range.begin, device_.index);
    if (!memory) report_block_in_use("the output buffer", range, {});
    return memory;
  }

  void warm_up(const std::function<void()>& fn) override {
    // One-time set-up (the cuBLAS handle and its workspace) happens here, not in the recording.
    // Outside the graphs' pool: what a warm-up returns may outlive the step (a gradient held until
    // the next zero_grad), and a block of the pool held that way could be one that a recording of
    // another segment writes on every replay, forcing it to record again.
    (void)cuda::cublas_handle(device_.index);
    fn();
  }

  bool in_use(const std::vector<MemoryRange>& ranges, const std::vector<const void*>& own) override {
    for (const MemoryRange& r : ranges)
      if (report_block_in_use("the scratch memory", r, own)) return true;
    return false;
  }

  bool replays_by_address() const override { return true; }

  // True when a block of the pool overlapping `range` is in use (and not in `own`); TG_LOGS=cudagraphs
  // names the block, for finding what holds memory a replay writes.
  bool report_block_in_use(const char* what, const MemoryRange& range, const std::vector<const void*>& own) const {
    const auto [block, size] = cuda::mempool_block_in_use(pool_, reinterpret_cast<const void*>(range.begin),
                                                          range.end - range.begin, device_.index, own);
    if (block && log_enabled("cudagraphs")) {
      std::ostringstream line;
      line << what << " [" << reinterpret_cast<const void*>(range.begin) << ", +" << range.end - range.begin
           << ") of a replay overlaps a block of " << size << " bytes at " << block << " that is in use";
      log_line("cudagraphs", line.str());
    }
    return block != nullptr;
  }

  // The branch stream's cuBLAS handle and workspace (32 MiB) exist only where a recording uses it.
  void prepare_branches() override { cuda::prepare_cublas_handles(device_.index); }

  TensorList record_on_branch(const std::function<TensorList()>& work, TensorList keep_alive) override {
    cuda::DeviceGuard on_device(device_.index);  // the branch stream of the recording's device
    return cuda::run_on_branch(work, std::move(keep_alive));
  }

  void join_branches() override { cuda::join_forked_work(); }

  std::pair<std::unique_ptr<RecordedGraph>, TensorList> record(const std::function<TensorList()>& body) override {
    cudaStream_t caller = cuda::current_stream();
    // The side stream must see everything the caller queued before capture begins, work forked
    // from it included (an eager asynchronous collective): the capture joins only what it forks.
    cuda::join_forked_work();
    TG_CUDA_CHECK(cudaStreamSynchronize(caller));
    (void)cuda::cublas_handle(device_.index);  // created, with its workspace, before capture begins
    Tensor replay_shift = zeros({2}, {.dtype = kInt64, .device = device_});
    CaptureRandomness drawn;
    drawn.device_shift = replay_shift.data_ptr<int64_t>();
    TensorList outputs;
    cudaGraph_t graph = nullptr;
    std::vector<MemoryRange> written;
    // The capture's draws are a template that every replay, the first included, shifts to freshly
    // reserved counters: capturing itself consumes none, so each call draws what eager mode would.
    const PhiloxState generator_before = Generator::global().state();
    {
      cuda::MempoolGuard route(pool_, device_.index);
      cuda::StreamGuard on_side(side_stream_);
      RandomnessScope randomness(&drawn);
      cuda::AllocationLog allocations;
      // Relaxed: the private pool may need a fresh segment (cudaMalloc) while the capture is open.
      TG_CUDA_CHECK(cudaStreamBeginCapture(side_stream_, cudaStreamCaptureModeRelaxed));
      try {
        outputs = body();
        cuda::join_forked_work();  // work forked to other streams (collectives) rejoins the capture
      } catch (...) {
        try {
          cuda::join_forked_work();  // so that nothing waits later on events of the broken capture
        } catch (...) {
        }
        cudaGraph_t broken = nullptr;
        cudaStreamEndCapture(side_stream_, &broken);
        if (broken) cudaGraphDestroy(broken);
        // Ending an invalidated capture leaves cudaErrorStreamCaptureInvalidated as the thread's
        // last error; cleared here, or the next launch check anywhere would report it as its own.
        (void)cudaGetLastError();
        Generator::global().set_state(generator_before);
        throw;
      }
      TG_CUDA_CHECK(cudaStreamEndCapture(side_stream_, &graph));
      Generator::global().set_state(generator_before);
      for (const cuda::AllocationRecord& a : allocations.records()) written.push_back(MemoryRange::of(a.ptr, a.nbytes));
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
    if (instantiated != cudaSuccess) cudaGraphDestroy(graph);
    TG_CUDA_CHECK(instantiated);
    const int64_t kernels = kernel_nodes(graph);
    return {std::make_unique<CudaRecordedGraph>(graph, exec, merge_ranges(std::move(written)), std::move(replay_shift), drawn,
                                                kernels),
            std::move(outputs)};
  }

 private:
  Device device_;
  cuda::MempoolId pool_;
  cudaStream_t side_stream_ = nullptr;
};

// The recorder of `device`, made on first use (one per device, so one pool per device).
std::shared_ptr<CudaRecorder> recorder_of(Device device) {
  static std::mutex mutex;
  static std::shared_ptr<CudaRecorder> recorders[64];
  TG_CHECK(device.is_cuda() && device.index >= 0 && device.index < 64, "[cudagraphs] expected a CUDA device, got ",
           device.str());
  std::lock_guard<std::mutex> lock(mutex);
  auto& r = recorders[device.index];
  if (!r) r = std::make_shared<CudaRecorder>(device);
  return r;
}

}  // namespace

std::shared_ptr<GraphRecorder> cuda_graph_recorder(Device device) { return recorder_of(device); }

cuda::MempoolId cudagraph_mempool(Device device) { return recorder_of(device)->pool(); }

#else

std::shared_ptr<GraphRecorder> cuda_graph_recorder(Device device) {
  TG_FAIL("[cudagraphs] CUDA graphs on ", device.str(), " need the CUDA backend, but tapegraph was built without it");
}

cuda::MempoolId cudagraph_mempool(Device device) {
  TG_FAIL("[cudagraphs] CUDA graphs on ", device.str(), " need the CUDA backend, but tapegraph was built without it");
}

#endif

}  // namespace tg::graphs
