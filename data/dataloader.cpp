#include "data/dataloader.h"

#include <cstring>

#include "graphs/cudagraph_step.h"
#include "ops/factory.h"
#include "tensor/check.h"

namespace tg::data {

// One batch's pinned host buffers (one per dataset tensor) and the end of their last device copy.
struct DataLoader::Slot {
  TensorList buffers;
  cuda::CopyEvent copied;
  int64_t rows = 0;
};

DataLoader::DataLoader(TensorDataset dataset, DataLoaderOptions options, std::shared_ptr<Sampler> sampler)
    : dataset_(std::move(dataset)), options_(options), sampler_(std::move(sampler)) {
  TG_CHECK(options_.batch_size >= 1, "[DataLoader] batch_size must be at least 1, got ", options_.batch_size);
  TG_CHECK(options_.prefetch >= 1, "[DataLoader] prefetch must be at least 1, got ", options_.prefetch);
  TG_CHECK(options_.device.is_cpu() || options_.device.is_cuda(), "[DataLoader] batches can go to cpu or cuda, not ",
           options_.device.str());
  if (!sampler_) {
    if (options_.shuffle) {
      sampler_ = std::make_shared<RandomSampler>(dataset_.size(), options_.seed);
    } else {
      sampler_ = std::make_shared<SequentialSampler>(dataset_.size());
    }
  }
  if (options_.device.is_cuda()) copy_stream_ = std::make_unique<cuda::CopyStream>(options_.device.index);
  for (int s = 0; s < options_.prefetch; ++s) {
    auto slot = std::make_shared<Slot>();
    for (const Tensor& t : dataset_.tensors()) {
      Shape shape = t.sizes();
      shape[0] = options_.batch_size;
      slot->buffers.push_back(cuda::empty_pinned(shape, t.dtype()));
    }
    slots_.push_back(std::move(slot));
  }
}

DataLoader::~DataLoader() {
  stop();
  // The pinned buffers go with the slots: no copy out of them may still be queued.
  for (const auto& slot : slots_) slot->copied.synchronize();
}

int64_t DataLoader::num_batches() const {
  // The sampler decides the epoch's length (a DistributedSampler's shard is shorter).
  const auto n = static_cast<int64_t>(sampler_->indices(0).size());
  return options_.drop_last ? n / options_.batch_size : (n + options_.batch_size - 1) / options_.batch_size;
}

void DataLoader::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void DataLoader::start_epoch(int64_t epoch) {
  stop();
  std::vector<int64_t> indices = sampler_->indices(epoch);
  for (int64_t i : indices) {
    TG_CHECK(i >= 0 && i < dataset_.size(), "[DataLoader] the sampler gave index ", i, " for a data set of ",
             dataset_.size(), " samples");
  }
  const auto n = static_cast<int64_t>(indices.size());
  if (options_.drop_last) indices.resize(static_cast<size_t>(n / options_.batch_size * options_.batch_size));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = false;
    ready_.clear();
    free_.clear();
    for (int s = 0; s < static_cast<int>(slots_.size()); ++s) free_.push_back(s);
    remaining_ = (static_cast<int64_t>(indices.size()) + options_.batch_size - 1) / options_.batch_size;
  }
  worker_ = std::thread([this, idx = std::move(indices)]() mutable { produce(std::move(idx)); });
}

void DataLoader::produce(std::vector<int64_t> indices) {
  const int64_t bs = options_.batch_size;
  const auto n = static_cast<int64_t>(indices.size());
  for (int64_t start = 0; start < n; start += bs) {
    int s = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !free_.empty(); });
      if (stopping_) return;
      s = free_.front();
      free_.pop_front();
    }
    Slot& slot = *slots_[static_cast<size_t>(s)];
    // The buffers may still be the source of a device copy: wait for its end before refilling.
    slot.copied.synchronize();
    slot.rows = std::min(bs, n - start);
    for (size_t k = 0; k < slot.buffers.size(); ++k) {
      const Tensor& src = dataset_.tensors()[k];
      const int64_t row_bytes = src.numel() / std::max<int64_t>(src.size(0), 1) * src.element_size();
      auto* dst = static_cast<char*>(slot.buffers[k].raw_data());
      const auto* base = static_cast<const char*>(src.raw_data());
      for (int64_t r = 0; r < slot.rows; ++r) {
        std::memcpy(dst + r * row_bytes, base + indices[static_cast<size_t>(start + r)] * row_bytes,
                    static_cast<size_t>(row_bytes));
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.push_back(s);
    }
    cv_.notify_all();
  }
}

std::optional<TensorList> DataLoader::next() {
  int s = 0;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (remaining_ == 0) return std::nullopt;
    TG_CHECK(worker_.joinable(), "[DataLoader] call start_epoch() before next()");
    cv_.wait(lock, [&] { return !ready_.empty(); });
    s = ready_.front();
    ready_.pop_front();
    --remaining_;
  }
  Slot& slot = *slots_[static_cast<size_t>(s)];
  TensorList host, batch;
  for (size_t k = 0; k < slot.buffers.size(); ++k) {
    host.push_back(slot.buffers[k].narrow(0, 0, slot.rows));
    if (options_.static_buffers) {
      if (static_.size() <= k) {
        Tensor buffer = empty(slot.buffers[k].sizes(), {.dtype = host[k].dtype(), .device = options_.device});
        mark_static_address(buffer);
        static_.push_back(std::move(buffer));
      }
      batch.push_back(static_[k].narrow(0, 0, slot.rows));
    } else if (copy_stream_) {
      batch.push_back(empty(host[k].sizes(), {.dtype = host[k].dtype(), .device = options_.device}));
    } else {
      batch.push_back(host[k].clone());
    }
  }
  if (options_.static_buffers && options_.device.is_cuda()) {
    // The static buffers are still read by the previous step's work on the current stream, so the
    // copy is ordered after it there: a side stream would add two waits and overlap nothing.
    cuda::copy_to_device(batch, host, slot.copied);
  } else if (options_.static_buffers) {
    for (size_t k = 0; k < batch.size(); ++k) batch[k].copy_(host[k]);
  } else if (copy_stream_) {
    copy_stream_->copy_to_device(batch, host, slot.copied);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(s);
  }
  cv_.notify_all();
  return batch;
}

}  // namespace tg::data
