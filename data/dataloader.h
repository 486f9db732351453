// DataLoader: batches of a TensorDataset, gathered by a background thread into pinned host memory
// and copied to the device asynchronously (on a side stream into fresh tensors; in stream order
// into static buffers).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "data/sampler.h"
#include "tensor/device.h"
#include "tensor/memory/pinned.h"

namespace tg::data {

// How batches are formed and where they go.
struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;     // a RandomSampler seeded with `seed` (ignored when a sampler is given)
  uint64_t seed = 0;
  bool drop_last = false;   // drop the last, smaller batch
  Device device = kCPU;     // where batches are delivered
  int prefetch = 2;         // batches gathered ahead by the background thread
  // Deliver every batch in the same tensors (one per dataset tensor, marked as static addresses),
  // so CUDA graphs read them in place instead of re-recording for new addresses. Each batch then
  // overwrites the previous one's tensors (the copy runs on the current stream, after the work
  // already queued on them).
  bool static_buffers = false;
};

// Iterates over batches of a TensorDataset, one epoch per start_epoch() or per range-for. Each
// batch is one tensor per dataset tensor (rows picked by the sampler, stacked along dimension 0).
// Batches of equal shapes feed compiled functions without recompiling or re-recording.
//
//   DataLoader loader(dataset, {.batch_size = 64, .shuffle = true, .device = cuda_device(0)});
//   for (int64_t epoch = 0; epoch < n; ++epoch)
//     for (TensorList& batch : loader) step(batch[0], batch[1]);  // epochs 0, 1, ... in turn
//
// or, with the epoch named (a resumed run starts mid-epoch at the batch it had reached):
//
//   loader.start_epoch(epoch, first_batch);
//   while (auto batch = loader.next()) step((*batch)[0], (*batch)[1]);
class DataLoader {
 public:
  class Iterator;
  DataLoader(TensorDataset dataset, DataLoaderOptions options, std::shared_ptr<Sampler> sampler = nullptr);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Starts epoch `epoch` (the sampler's order for it) at batch `first_batch` (0: its beginning; a
  // resumed run passes the batch_index() it saved); an unfinished epoch is abandoned.
  void start_epoch(int64_t epoch, int64_t first_batch = 0);
  // The next batch of the current epoch, or nothing at its end.
  std::optional<TensorList> next();
  // Batches per epoch.
  int64_t num_batches() const;
  // The current epoch (-1 before the first), and the batches of it handed out so far (those
  // skipped by start_epoch's first_batch included): with the sampler's seed, the loader's position.
  int64_t epoch() const { return epoch_; }
  int64_t batch_index() const { return batch_index_; }

  // A range-for over the loader runs one epoch: the one under way if there is one (started by
  // start_epoch() and not yet at its end, or left by a break), else the next (0 first).
  Iterator begin();
  std::default_sentinel_t end() const { return {}; }
  const DataLoaderOptions& options() const { return options_; }

 private:
  struct Slot;
  void produce(std::vector<int64_t> indices);
  void stop();
  // One full-batch tensor per dataset tensor over `block` (laid out by offsets_), each with a storage
  // of its own over its part of the block (they never alias one another), keeping the block alive.
  TensorList carve(const Tensor& block) const;

  TensorDataset dataset_;
  DataLoaderOptions options_;
  std::shared_ptr<Sampler> sampler_;
  std::unique_ptr<cuda::CopyStream> copy_stream_;

  // A batch's tensors share one block of memory (each at an aligned byte offset), so that a full
  // batch reaches the device in one copy.
  std::vector<int64_t> offsets_;  // byte offset of each dataset tensor's rows in a block
  int64_t block_bytes_ = 0;
  Tensor static_block_;  // static_buffers: the device block every batch is written into
  TensorList static_;    // static_buffers: its tensors (marked as static addresses)
  std::vector<std::shared_ptr<Slot>> slots_;  // pinned blocks, reused round robin
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<int> ready_;     // filled slots in batch order
  std::deque<int> free_;      // slots the producer may fill
  int64_t remaining_ = 0;     // batches of this epoch not yet handed out
  int64_t epoch_ = -1;
  int64_t batch_index_ = 0;
  bool stopping_ = false;
  bool producer_waiting_ = false;  // the worker sleeps until a slot is free
  bool consumer_waiting_ = false;  // next() sleeps until a batch is ready
  std::thread worker_;
};

// An input iterator over one epoch's batches; it reaches the end when next() gives nothing.
class DataLoader::Iterator {
 public:
  using value_type = TensorList;
  using difference_type = std::ptrdiff_t;
  explicit Iterator(DataLoader* loader) : loader_(loader), batch_(loader->next()) {}
  TensorList& operator*() { return *batch_; }
  Iterator& operator++() {
    batch_ = loader_->next();
    return *this;
  }
  void operator++(int) { ++*this; }
  bool operator==(std::default_sentinel_t) const { return !batch_.has_value(); }

 private:
  DataLoader* loader_;
  std::optional<TensorList> batch_;
};

}  // namespace tg::data
