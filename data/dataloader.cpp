#include "data/dataloader.h"

#include <algorithm>
#include <cstring>

#include "graphs/runtime/cudagraph_step.h"
#include "ops/factory/factory.h"
#include "tensor/check.h"
#include "tensor/shape.h"
#include "tensor/tensor_impl.h"

namespace tg::data {
namespace {

constexpr int64_t kBlockAlignment = 256;  // bytes; any dtype's elements and vector loads line up

// Blocks are int64 tensors: every offset and size is a multiple of 8 bytes.
int64_t block_words(int64_t bytes) { return bytes / 8; }

// The sizes of `rows` rows of t.
Shape with_rows(const Tensor& t, int64_t rows) {
  Shape shape = t.sizes();
  shape[0] = rows;
  return shape;
}

// The first `rows` rows of contiguous `t`, as a tensor of its own over the same storage.
Tensor first_rows(const Tensor& t, int64_t rows) {
  const Shape shape = with_rows(t, rows);
  return Tensor(std::make_shared<TensorImpl>(t.impl()->storage(), shape, contiguous_strides(shape),
                                             t.storage_offset(), t.dtype()));
}

TensorList first_rows(const TensorList& ts, int64_t rows) {
  TensorList out;
  for (const Tensor& t : ts) out.push_back(first_rows(t, rows));
  return out;
}

}  // namespace

// One batch's pinned host block (its buffers: one view per dataset tensor) and the end of its last
// device copy.
struct DataLoader::Slot {
  Tensor block;
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
  for (const Tensor& t : dataset_.tensors()) {
    offsets_.push_back(block_bytes_);
    const int64_t bytes = shape_numel(with_rows(t, options_.batch_size)) * t.element_size();
    block_bytes_ += (bytes + kBlockAlignment - 1) / kBlockAlignment * kBlockAlignment;
  }
  for (int s = 0; s < options_.prefetch; ++s) {
    auto slot = std::make_shared<Slot>();
    slot->block = cuda::empty_pinned({block_words(block_bytes_)}, kInt64);
    std::memset(slot->block.raw_data(), 0, static_cast<size_t>(block_bytes_));  // alignment gaps travel too
    slot->buffers = carve(slot->block);
    slots_.push_back(std::move(slot));
  }
  if (options_.static_buffers) {
    static_block_ = empty({block_words(block_bytes_)}, {.dtype = kInt64, .device = options_.device});
    static_ = carve(static_block_);
    for (const Tensor& t : static_) mark_static_address(t);
  }
}

TensorList DataLoader::carve(const Tensor& block) const {
  TensorList out;
  const TensorList& ts = dataset_.tensors();
  for (size_t k = 0; k < ts.size(); ++k) {
    const Shape shape = with_rows(ts[k], options_.batch_size);
    const int64_t bytes = shape_numel(shape) * ts[k].element_size();
    auto storage = std::make_shared<StorageImpl>(block.device(), static_cast<char*>(block.raw_data()) + offsets_[k],
                                                 bytes, block.impl()->storage());
    out.push_back(Tensor(std::make_shared<TensorImpl>(std::move(storage), shape, contiguous_strides(shape), 0,
                                                      ts[k].dtype())));
  }
  return out;
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

void DataLoader::start_epoch(int64_t epoch, int64_t first_batch) {
  const int64_t batches = num_batches();
  TG_CHECK(first_batch >= 0 && first_batch <= batches, "[DataLoader] start_epoch: first_batch must be in [0, ",
           batches, "] (the batches per epoch), got ", first_batch);
  stop();
  std::vector<int64_t> indices = sampler_->indices(epoch);
  for (int64_t i : indices) {
    TG_CHECK(i >= 0 && i < dataset_.size(), "[DataLoader] the sampler gave index ", i, " for a data set of ",
             dataset_.size(), " samples");
  }
  const auto n = static_cast<int64_t>(indices.size());
  if (options_.drop_last) indices.resize(static_cast<size_t>(n / options_.batch_size * options_.batch_size));
  const auto skipped = std::min(static_cast<size_t>(first_batch * options_.batch_size), indices.size());
  indices.erase(indices.begin(), indices.begin() + static_cast<std::ptrdiff_t>(skipped));
  epoch_ = epoch;
  batch_index_ = first_batch;
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
      producer_waiting_ = true;
      cv_.wait(lock, [&] { return stopping_ || !free_.empty(); });
      producer_waiting_ = false;
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
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.push_back(s);
      wake = consumer_waiting_;
    }
    if (wake) cv_.notify_all();
  }
}

DataLoader::Iterator DataLoader::begin() {
  bool under_way = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    under_way = worker_.joinable() && remaining_ > 0;
  }
  if (!under_way) start_epoch(epoch_ + 1);
  return Iterator(this);
}

std::optional<TensorList> DataLoader::next() {
  int s = 0;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (remaining_ == 0) return std::nullopt;
    TG_CHECK(worker_.joinable(), "[DataLoader] call start_epoch() before next()");
    consumer_waiting_ = true;
    cv_.wait(lock, [&] { return !ready_.empty(); });
    consumer_waiting_ = false;
    s = ready_.front();
    ready_.pop_front();
    --remaining_;
    ++batch_index_;
  }
  Slot& slot = *slots_[static_cast<size_t>(s)];
  // A full batch travels as the whole block, in one copy; a short one tensor by tensor.
  const bool full = slot.rows == options_.batch_size;
  const TensorList host = full ? TensorList{slot.block} : first_rows(slot.buffers, slot.rows);
  Tensor device_block;
  TensorList batch, device_copy;
  if (options_.static_buffers) {
    device_block = static_block_;
    batch = first_rows(static_, slot.rows);
  } else if (copy_stream_) {
    device_block = empty({block_words(block_bytes_)}, {.dtype = kInt64, .device = options_.device});
    batch = first_rows(carve(device_block), slot.rows);
  } else {
    for (const Tensor& h : first_rows(slot.buffers, slot.rows)) batch.push_back(h.clone());
  }
  if (device_block.defined()) device_copy = full ? TensorList{device_block} : batch;
  if (options_.static_buffers && options_.device.is_cuda()) {
    // The static buffers are still read by the previous step's work on the current stream, so the
    // copy is ordered after it there: a side stream would add two waits and overlap nothing.
    cuda::copy_to_device(device_copy, host, slot.copied);
  } else if (options_.static_buffers) {
    for (size_t k = 0; k < host.size(); ++k) device_copy[k].copy_(host[k]);
  } else if (copy_stream_) {
    copy_stream_->copy_to_device(device_copy, host, slot.copied);
  }
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(s);
    // The worker is woken for two free slots at a time (fewer wake-ups), or at once when no batch is left.
    wake = producer_waiting_ && (free_.size() * 2 >= slots_.size() || ready_.empty());
  }
  if (wake) cv_.notify_all();
  return batch;
}

}  // namespace tg::data
