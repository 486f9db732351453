// The CPU backend: Gloo's collectives between the ranks' processes, on CPU tensors, each preceded by
// an exchange of headers that makes ranks issuing different collectives fail naming both sides.
// See Note [CPU collectives] in docs/data_parallel.md.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "distributed/collectives/collective_context.h"
#include "distributed/collectives/communicator.h"
#include "distributed/collectives/gloo/collective_header.h"
#include "distributed/collectives/gloo/mesh.h"
#include "distributed/collectives/gloo/reductions.h"

namespace tg::distributed {
namespace {

// Gloo's option setters take the element type only for its size: an unsigned integer of that size.
template <typename Fn>
void with_element_of_size(int64_t bytes, Fn&& fn) {
  switch (bytes) {
    case 1: return fn(uint8_t{});
    case 2: return fn(uint16_t{});
    case 4: return fn(uint32_t{});
    case 8: return fn(uint64_t{});
  }
  TG_FAIL("[distributed] no Gloo element type of ", bytes, " bytes: expected 1, 2, 4 or 8");
}

char* bytes_of(const Tensor& t) { return static_cast<char*>(t.impl()->data()); }
size_t nbytes(const Tensor& t) { return static_cast<size_t>(t.numel() * t.element_size()); }

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(int rank, int world_size, TcpStore& store, std::chrono::milliseconds timeout,
                   const std::string& master_addr, int master_port)
      : mesh_(rank, world_size, store, timeout, master_addr, master_port) {}

  // Synchronous, `async` or not: the result is in place when it returns (a CPU collective holds the
  // calling thread, as the CPU kernels do).
  void all_reduce(const Tensor& in, const Tensor& out, ReduceOp op, bool) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const CollectiveTag tag = begin(CollectiveKind::kAllReduce, in.dtype(), in.numel(), op, 0);
    reduce(tag, bytes_of(in), bytes_of(out), in.numel(), in.dtype(), op);
  }

  void all_reduce_into(const TensorList& ins, const Tensor& flat, ReduceOp op, bool) override {
    std::lock_guard<std::mutex> lock(mutex_);
    // Packs the inputs into `flat` and reduces it in place: the copies are cheap next to the network.
    char* dst = bytes_of(flat);
    for (const Tensor& t : ins) {
      if (nbytes(t) > 0 && bytes_of(t) != dst) std::memmove(dst, bytes_of(t), nbytes(t));
      dst += nbytes(t);
    }
    const CollectiveTag tag = begin(CollectiveKind::kAllReduce, flat.dtype(), flat.numel(), op, 0);
    reduce(tag, bytes_of(flat), bytes_of(flat), flat.numel(), flat.dtype(), op);
  }

  void broadcast(const Tensor& in, const Tensor& out, int root) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const CollectiveTag tag = begin(CollectiveKind::kBroadcast, in.dtype(), in.numel(), ReduceOp::Sum, root);
    mesh_.run(tag, [&] {
      gloo::BroadcastOptions opts(mesh_.context());
      opts.setTag(static_cast<uint32_t>(tag.sequence));
      opts.setRoot(root);
      // Bytes: a broadcast only copies. Only the root has an input, and only when it is another buffer.
      if (mesh_.rank() == root && bytes_of(in) != bytes_of(out)) opts.setInput(bytes_of(in), nbytes(in));
      opts.setOutput(bytes_of(out), nbytes(out));
      gloo::broadcast(opts);
    });
  }

  void all_gather(const Tensor& in, const Tensor& out, bool) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const CollectiveTag tag = begin(CollectiveKind::kAllGather, in.dtype(), in.numel(), ReduceOp::Sum, 0);
    // This rank's block goes in place first (memmove: `in` may overlap `out`), then Gloo gathers in place.
    char* mine = bytes_of(out) + static_cast<size_t>(mesh_.rank()) * nbytes(in);
    if (bytes_of(in) != mine) std::memmove(mine, bytes_of(in), nbytes(in));
    mesh_.run(tag, [&] {
      gloo::AllgatherOptions opts(mesh_.context());
      opts.setTag(static_cast<uint32_t>(tag.sequence));
      opts.setOutput(bytes_of(out), nbytes(out));
      gloo::allgather(opts);
    });
  }

  // Gloo has no reduce-scatter among its current collectives: the whole input is all-reduced (in a
  // copy, in the wire dtype) and each rank keeps its block. That moves twice the bytes of a ring
  // reduce-scatter; each block is still reduced once, so every rank's block has the same bits.
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, bool) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const CollectiveTag tag = begin(CollectiveKind::kReduceScatter, in.dtype(), out.numel(), op, 0);
    const DType wire = wire_dtype(in.dtype());
    const int64_t total = in.numel(), wsz = dtype_size(wire);
    std::vector<char> acc(static_cast<size_t>(total * wsz));
    to_wire(in.dtype(), bytes_of(in), acc.data(), total);
    gloo_allreduce(tag, nullptr, acc.data(), total, wire, op);
    finish_reduction(in.dtype(), op, mesh_.world_size(), acc.data() + mesh_.rank() * out.numel() * wsz,
                     bytes_of(out), out.numel());
  }

 private:
  // Numbers the collective and checks that every rank is issuing the same one.
  CollectiveTag begin(CollectiveKind kind, DType dtype, int64_t numel, ReduceOp op, int root) {
    const CollectiveHeader mine = CollectiveHeader::make(kind, dtype, numel, op, root, ++sequence_);
    const CollectiveTag tag{collective_kind_name(kind), sequence_, current_collective_context().describe()};
    const std::string bytes = mine.encode();
    const std::vector<std::string> all = mesh_.exchange(tag, bytes);
    for (int r = 0; r < mesh_.world_size(); ++r) {
      if (all[static_cast<size_t>(r)] == bytes) continue;
      mesh_.mark_broken(tag);
      const std::optional<CollectiveHeader> theirs = CollectiveHeader::decode(all[static_cast<size_t>(r)]);
      TG_FAIL("[distributed] rank ", mesh_.rank(), " issued ", mine.describe(),
              tag.context.empty() ? "" : " (" + tag.context + ")", " but rank ", r,
              theirs ? " issued " + theirs->describe() : std::string(" sent something else"),
              ": expected every rank to issue the same collectives, in the same order, on tensors of the same size "
              "and dtype");
    }
    return tag;
  }

  // All-reduces n elements of `dtype` from `in` into `out` (which may be `in`): in the wire dtype, so
  // 16-bit floats are widened first and rounded once at the end.
  void reduce(const CollectiveTag& tag, const char* in, char* out, int64_t n, DType dtype, ReduceOp op) {
    const DType wire = wire_dtype(dtype);
    if (wire == dtype) {
      gloo_allreduce(tag, in == out ? nullptr : in, out, n, wire, op);
      finish_reduction(dtype, op, mesh_.world_size(), out, out, n);
      return;
    }
    std::vector<char> acc(static_cast<size_t>(n * dtype_size(wire)));
    to_wire(dtype, in, acc.data(), n);
    gloo_allreduce(tag, nullptr, acc.data(), n, wire, op);
    finish_reduction(dtype, op, mesh_.world_size(), acc.data(), out, n);
  }

  // Gloo's allreduce of n elements of a wire dtype into `out`, from `in` when it is another buffer.
  void gloo_allreduce(const CollectiveTag& tag, const char* in, char* out, int64_t n, DType wire, ReduceOp op) {
    const ReduceFunction fn = reduce_function(wire, op);
    mesh_.run(tag, [&] {
      gloo::AllreduceOptions opts(mesh_.context());
      opts.setTag(static_cast<uint32_t>(tag.sequence));
      opts.setReduceFunction(fn);
      with_element_of_size(dtype_size(wire), [&](auto element) {
        using T = decltype(element);
        if (in != nullptr) opts.setInput(reinterpret_cast<T*>(const_cast<char*>(in)), static_cast<size_t>(n));
        opts.setOutput(reinterpret_cast<T*>(out), static_cast<size_t>(n));
      });
      gloo::allreduce(opts);
    });
  }

  GlooMesh mesh_;
  int64_t sequence_ = 0;
  std::mutex mutex_;
};

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(int rank, int world_size, TcpStore& store,
                                                     std::chrono::milliseconds timeout, const std::string& master_addr,
                                                     int master_port) {
  return std::make_unique<GlooCommunicator>(rank, world_size, store, timeout, master_addr, master_port);
}

}  // namespace tg::distributed
