#include "tensor/memory/pinned.h"

#include <cstdlib>

#include "tensor/check.h"
#include "tensor/memory/storage.h"
#include "tensor/tensor_impl.h"
#ifdef TG_WITH_CUDA
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda_runtime.h"
#endif

namespace tg::cuda {

Tensor empty_pinned(const Shape& sizes, DType dtype) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  const int64_t nbytes = numel * dtype_size(dtype);
  void* data = nullptr;
  std::shared_ptr<void> owner;
#ifdef TG_WITH_CUDA
  if (cuda_is_available()) {
    TG_CUDA_CHECK(cudaHostAlloc(&data, static_cast<size_t>(nbytes > 0 ? nbytes : 1), cudaHostAllocDefault));
    owner = std::shared_ptr<void>(data, [](void* p) { cudaFreeHost(p); });
  }
#endif
  if (!owner) {
    data = std::malloc(static_cast<size_t>(nbytes > 0 ? nbytes : 1));
    TG_CHECK(data != nullptr, "[empty_pinned] out of host memory allocating ", nbytes, " bytes");
    owner = std::shared_ptr<void>(data, [](void* p) { std::free(p); });
  }
  auto storage = std::make_shared<StorageImpl>(kCPU, data, nbytes, std::move(owner));
  Shape strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= sizes[i];
  }
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes, strides, 0, dtype));
}

void CopyEvent::synchronize() const {
#ifdef TG_WITH_CUDA
  if (event_) TG_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_.get())));
#endif
}

#ifdef TG_WITH_CUDA
namespace {

void check_copy(const Tensor& dst, const Tensor& src) {
  TG_CHECK(src.is_cpu() && dst.is_cuda() && src.is_contiguous() && dst.is_contiguous(),
           "[copy_to_device] expected a contiguous host source and a contiguous CUDA destination, got ",
           src.device().str(), " -> ", dst.device().str());
  TG_CHECK(src.numel() == dst.numel() && src.dtype() == dst.dtype(), "[copy_to_device] source and destination ",
           "differ in size or dtype: ", src.numel(), " ", dtype_name(src.dtype()), " vs ", dst.numel(), " ",
           dtype_name(dst.dtype()));
}

void copy_all(const TensorList& dst, const TensorList& src, cudaStream_t stream) {
  TG_CHECK(dst.size() == src.size(), "[copy_to_device] ", src.size(), " sources for ", dst.size(), " destinations");
  for (size_t i = 0; i < dst.size(); ++i) {
    check_copy(dst[i], src[i]);
    const auto nbytes = static_cast<size_t>(src[i].numel() * src[i].element_size());
    if (nbytes > 0)
      TG_CUDA_CHECK(cudaMemcpyAsync(dst[i].raw_data(), src[i].raw_data(), nbytes, cudaMemcpyHostToDevice, stream));
  }
}

}  // namespace

void CopyEvent::record(void* stream) {
  if (!event_) {
    cudaEvent_t e = nullptr;
    TG_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    event_ = std::shared_ptr<void>(e, [](void* p) { cudaEventDestroy(static_cast<cudaEvent_t>(p)); });
  }
  cudaStream_t s = stream != nullptr ? static_cast<cudaStream_t>(stream) : current_stream();
  TG_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_.get()), s));
}

void copy_to_device(const TensorList& dst, const TensorList& src, CopyEvent& done) {
  copy_all(dst, src, current_stream());
  done.record();
}

CopyStream::CopyStream(int device) : device_(device) {
  TG_CHECK(cuda_is_available(), "[CopyStream] no CUDA device is available");
  cudaStream_t s = nullptr;
  TG_CUDA_CHECK(cudaSetDevice(device));
  TG_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = s;
}

CopyStream::~CopyStream() {
  if (stream_ != nullptr) {
    cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  }
}

void CopyStream::copy_to_device(const TensorList& dst, const TensorList& src, CopyEvent& done) {
  auto side = static_cast<cudaStream_t>(stream_);
  compute_ready_.record();
  TG_CUDA_CHECK(cudaStreamWaitEvent(side, static_cast<cudaEvent_t>(compute_ready_.handle()), 0));
  copy_all(dst, src, side);
  done.record(side);
  TG_CUDA_CHECK(cudaStreamWaitEvent(current_stream(), static_cast<cudaEvent_t>(done.handle()), 0));
}
#else
void CopyEvent::record(void*) { TG_FAIL("[CopyEvent] this build has no CUDA backend"); }
void copy_to_device(const TensorList&, const TensorList&, CopyEvent&) {
  TG_FAIL("[copy_to_device] this build has no CUDA backend");
}
CopyStream::CopyStream(int device) : device_(device) {
  TG_FAIL("[CopyStream] this build has no CUDA backend (device cuda:", device, " asked for)");
}
CopyStream::~CopyStream() = default;
void CopyStream::copy_to_device(const TensorList&, const TensorList&, CopyEvent&) {
  TG_FAIL("[CopyStream] this build has no CUDA backend");
}
#endif

}  // namespace tg::cuda
