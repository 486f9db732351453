// CUDA graph capture for the cudagraphs backend (the rest of the backend is device-independent).
#include "graphs/graph_recorder.h"

#ifdef TG_WITH_CUDA
#include <cuda_runtime.h>

#include "ops/copy.h"
#include "ops/cuda/blas.h"
#include "ops/factory.h"
#include "ops/random.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda_memory.h"
#include "tensor/cuda_runtime.h"
#endif

namespace tg::graphs {

#ifdef TG_WITH_CUDA
namespace {

// An instantiated CUDA graph plus the private pool its memory lives in.
class CudaRecordedGraph final : public RecordedGraph {
 public:
  CudaRecordedGraph(cudaGraphExec_t exec, cuda::MempoolId pool, Tensor replay_shift, const CaptureRandomness& drawn)
      : exec_(exec), pool_(pool), replay_shift_(std::move(replay_shift)), drawn_(drawn) {}
  ~CudaRecordedGraph() override {
    cudaGraphExecDestroy(exec_);
    cuda::release_mempool(pool_);
  }
  void replay() override {
    if (drawn_.any()) {
      // Fresh counters for every random kernel of the graph: reserve as many blocks as the
      // recording drew and shift all of its draws there.
      const PhiloxState fresh = Generator::global().reserve(drawn_.end_offset - drawn_.min_offset);
      replay_shift_.fill_(static_cast<int64_t>(fresh.offset - drawn_.min_offset));
    }
    TG_CUDA_CHECK(cudaGraphLaunch(exec_, cuda::current_stream()));
  }

 private:
  cudaGraphExec_t exec_;
  cuda::MempoolId pool_;
  Tensor replay_shift_;
  CaptureRandomness drawn_;
};

// Installs a randomness context for its lifetime.
class RandomnessScope {
 public:
  explicit RandomnessScope(CaptureRandomness* c) { set_capture_randomness(c); }
  ~RandomnessScope() { set_capture_randomness(nullptr); }
};

// Makes `stream` current for its lifetime.
class StreamScope {
 public:
  explicit StreamScope(cudaStream_t s) : previous_(cuda::current_stream()) { cuda::set_current_stream(s); }
  ~StreamScope() { cuda::set_current_stream(previous_); }

 private:
  cudaStream_t previous_;
};

class CudaRecorder final : public GraphRecorder {
 public:
  explicit CudaRecorder(Device device) : device_(device) {
    cuda::set_device(device.index);
    TG_CUDA_CHECK(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking));
  }
  ~CudaRecorder() override { cudaStreamDestroy(side_stream_); }

  std::pair<std::unique_ptr<RecordedGraph>, TensorList> record(const std::function<TensorList()>& body) override {
    cudaStream_t caller = cuda::current_stream();
    // The side stream must see everything the caller queued before capture begins.
    TG_CUDA_CHECK(cudaStreamSynchronize(caller));
    (void)cuda::cublas_handle(device_.index);  // created, with its workspace, before capture begins
    Tensor replay_shift = zeros({}, {.dtype = kInt64, .device = device_});
    CaptureRandomness drawn;
    drawn.device_shift = replay_shift.data_ptr<int64_t>();
    const cuda::MempoolId pool = cuda::create_mempool();
    TensorList outputs;
    cudaGraph_t graph = nullptr;
    {
      cuda::MempoolGuard route(pool, device_.index);
      StreamScope on_side(side_stream_);
      RandomnessScope randomness(&drawn);
      // Relaxed: the private pool may need a fresh segment (cudaMalloc) while the capture is open.
    TG_CUDA_CHECK(cudaStreamBeginCapture(side_stream_, cudaStreamCaptureModeRelaxed));
      try {
        outputs = body();
      } catch (...) {
        cudaGraph_t broken = nullptr;
        cudaStreamEndCapture(side_stream_, &broken);
        if (broken) cudaGraphDestroy(broken);
        cuda::release_mempool(pool);
        throw;
      }
      TG_CUDA_CHECK(cudaStreamEndCapture(side_stream_, &graph));
    }
    cudaGraphExec_t exec = nullptr;
    TG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    TG_CUDA_CHECK(cudaGraphDestroy(graph));
    return {std::make_unique<CudaRecordedGraph>(exec, pool, std::move(replay_shift), drawn), std::move(outputs)};
  }

 private:
  Device device_;
  cudaStream_t side_stream_ = nullptr;
};

}  // namespace

std::shared_ptr<GraphRecorder> cuda_graph_recorder(Device device) {
  static std::shared_ptr<GraphRecorder> recorders[64];
  TG_CHECK(device.is_cuda() && device.index >= 0 && device.index < 64, "[cudagraphs] expected a CUDA device, got ",
           device.str());
  auto& r = recorders[device.index];
  if (!r) r = std::make_shared<CudaRecorder>(device);
  return r;
}

#else

std::shared_ptr<GraphRecorder> cuda_graph_recorder(Device device) {
  TG_FAIL("[cudagraphs] CUDA graphs on ", device.str(), " need the CUDA backend, but tapegraph was built without it");
}

#endif

}  // namespace tg::graphs
