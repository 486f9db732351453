// The CPU backend: ring collectives over TCP between the ranks' processes, on CPU tensors.
// See Note [CPU collectives] in docs/data_parallel.md.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "distributed/collectives/collective_context.h"
#include "distributed/collectives/communicator.h"
#include "distributed/collectives/ring_links.h"
#include "distributed/rendezvous/store.h"
#include "tensor/half.h"

namespace tg::distributed {
namespace {

// The dtype partial results travel and accumulate in: float32 for the 16-bit floats (rounded once
// at the end), the dtype itself otherwise.
DType wire_dtype(DType t) { return is_low_precision(t) ? DType::Float32 : t; }

template <typename T>
void combine_typed(T* acc, const T* in, int64_t n, ReduceOp op) {
  if (op == ReduceOp::Max) {
    // NaN wins, as torch.maximum; ints and floats alike.
    for (int64_t i = 0; i < n; ++i) acc[i] = (acc[i] != acc[i] || acc[i] >= in[i]) ? acc[i] : in[i];
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;  // sums wrap around like NCCL's, without undefined behaviour
    for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<T>(static_cast<U>(acc[i]) + static_cast<U>(in[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) acc[i] += in[i];
  }
}

// acc[i] = acc[i] (op) in[i] for `n` elements of the wire dtype `t`. Booleans: sum and max are "or".
void combine(DType t, ReduceOp op, void* acc, const void* in, int64_t n) {
  switch (t) {
    case DType::Float32: return combine_typed(static_cast<float*>(acc), static_cast<const float*>(in), n, op);
    case DType::Float64: return combine_typed(static_cast<double*>(acc), static_cast<const double*>(in), n, op);
    case DType::Int32: return combine_typed(static_cast<int32_t*>(acc), static_cast<const int32_t*>(in), n, op);
    case DType::Int64: return combine_typed(static_cast<int64_t*>(acc), static_cast<const int64_t*>(in), n, op);
    case DType::Bool: {
      auto* a = static_cast<uint8_t*>(acc);
      const auto* b = static_cast<const uint8_t*>(in);
      for (int64_t i = 0; i < n; ++i) a[i] = static_cast<uint8_t>(a[i] | b[i]);
      return;
    }
    default: TG_FAIL("[distributed] cannot reduce ", dtype_name(t), " data");
  }
}

// 16-bit floats to float32 and back (round to nearest even, once).
void widen(DType t, const void* src, float* dst, int64_t n) {
  const auto* bits = static_cast<const uint16_t*>(src);
  if (t == DType::Float16)
    for (int64_t i = 0; i < n; ++i) dst[i] = half_bits::half_to_float(bits[i]);
  else
    for (int64_t i = 0; i < n; ++i) dst[i] = half_bits::bfloat16_to_float(bits[i]);
}
void narrow_to(DType t, const float* src, void* dst, int64_t n) {
  auto* bits = static_cast<uint16_t*>(dst);
  if (t == DType::Float16)
    for (int64_t i = 0; i < n; ++i) bits[i] = half_bits::half_from_float(src[i]);
  else
    for (int64_t i = 0; i < n; ++i) bits[i] = half_bits::bfloat16_from_float(src[i]);
}

// Turns one fully reduced block of wire data into the result dtype at `out`: divided by the world
// size for avg, rounded once for 16-bit floats.
void finish_block(DType t, ReduceOp op, int world, void* acc, void* out, int64_t n) {
  const DType wire = wire_dtype(t);
  if (op == ReduceOp::Avg) {
    TG_CHECK(is_floating(t), "[distributed] avg needs a floating dtype, got ", dtype_name(t));
    if (wire == DType::Float64)
      for (int64_t i = 0; i < n; ++i) static_cast<double*>(acc)[i] /= world;
    else
      for (int64_t i = 0; i < n; ++i) static_cast<float*>(acc)[i] /= static_cast<float>(world);
  }
  if (wire != t) narrow_to(t, static_cast<const float*>(acc), out, n);
  else if (acc != out && n > 0) std::memcpy(out, acc, static_cast<size_t>(n * dtype_size(t)));
}

enum class Kind : uint8_t { kAllReduce = 1, kBroadcast = 2, kAllGather = 3, kReduceScatter = 4 };

const char* kind_name(uint8_t k) {
  switch (static_cast<Kind>(k)) {
    case Kind::kAllReduce: return "all_reduce";
    case Kind::kBroadcast: return "broadcast";
    case Kind::kAllGather: return "all_gather";
    case Kind::kReduceScatter: return "reduce_scatter";
  }
  return "an unknown collective";
}

// What each rank announces to its neighbours before a collective, so mismatched calls fail with
// both sides named instead of exchanging garbage.
struct Header {
  uint8_t kind = 0, dtype = 0, op = 0;
  int32_t root = 0;
  int64_t sequence = 0, numel = 0;

  std::string encode() const {
    std::string out = "TGCH";
    net::put_u8(out, kind);
    net::put_u8(out, dtype);
    net::put_u8(out, op);
    net::put_u32(out, static_cast<uint32_t>(root));
    net::put_i64(out, sequence);
    net::put_i64(out, numel);
    return out;
  }
  static Header decode(const std::string& bytes) {
    Header h;
    h.kind = static_cast<uint8_t>(bytes[4]);
    h.dtype = static_cast<uint8_t>(bytes[5]);
    h.op = static_cast<uint8_t>(bytes[6]);
    h.root = static_cast<int32_t>(net::read_u32(bytes.data() + 7));
    net::Reader r(std::string_view(bytes).substr(11));
    h.sequence = r.i64();
    h.numel = r.i64();
    return h;
  }
  std::string describe() const {
    std::string s = std::string(kind_name(kind)) + " #" + std::to_string(sequence) + " of " + std::to_string(numel) +
                    " " + std::string(dtype_name(static_cast<DType>(dtype))) + " elements";
    if (kind == static_cast<uint8_t>(Kind::kAllReduce) || kind == static_cast<uint8_t>(Kind::kReduceScatter))
      s += std::string(", ") + reduce_op_name(static_cast<ReduceOp>(op));
    if (kind == static_cast<uint8_t>(Kind::kBroadcast)) s += ", root " + std::to_string(root);
    return s;
  }
};

class TcpCommunicator final : public Communicator {
 public:
  TcpCommunicator(int rank, int world_size, TcpStore& store, std::chrono::milliseconds timeout,
                  const std::string& master_addr, int master_port)
      : links_(rank, world_size, store, timeout, master_addr, master_port) {}

  void all_reduce(const Tensor& in, const Tensor& out, ReduceOp op, bool) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const CollectiveTag tag = begin(Kind::kAllReduce, in.dtype(), in.numel(), op, 0);
    ring_all_reduce(tag, in.impl()->data(), out.impl()->data(), in.numel(), in.dtype(), op);
  }

  void all_reduce_into(const TensorList& ins, const Tensor& flat, ReduceOp op, bool) override {
    std::lock_guard<std::mutex> lock(mutex_);
    // Packs the inputs into `flat` and reduces it in place: the copies are cheap next to the network.
    auto* dst = static_cast<char*>(flat.impl()->data());
    for (const Tensor& t : ins) {
      const size_t bytes = static_cast<size_t>(t.numel() * t.element_size());
      if (bytes > 0 && t.impl()->data() != dst) std::memmove(dst, t.impl()->data(), bytes);
      dst += bytes;
    }
    const CollectiveTag tag = begin(Kind::kAllReduce, flat.dtype(), flat.numel(), op, 0);
    ring_all_reduce(tag, flat.impl()->data(), flat.impl()->data(), flat.numel(), flat.dtype(), op);
  }

  void broadcast(const Tensor& in, const Tensor& out, int root) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const CollectiveTag tag = begin(Kind::kBroadcast, in.dtype(), in.numel(), ReduceOp::Sum, root);
    const size_t bytes = static_cast<size_t>(in.numel() * in.element_size());
    auto* data = static_cast<char*>(out.impl()->data());
    const bool forwards = links_.next() != root;
    if (links_.rank() == root) {
      if (in.impl()->data() != data) std::memcpy(data, in.impl()->data(), bytes);
      if (forwards) links_.exchange(tag, data, bytes, nullptr, 0);
      return;
    }
    // Pipelined along the ring: segment i arrives while segment i - 1 moves on.
    const size_t segments = (bytes + kSegment - 1) / kSegment;
    auto seg_bytes = [&](size_t i) { return std::min(kSegment, bytes - i * kSegment); };
    for (size_t i = 0; i <= segments; ++i) {
      const bool send = forwards && i > 0, recv = i < segments;
      links_.exchange(tag, send ? data + (i - 1) * kSegment : nullptr, send ? seg_bytes(i - 1) : 0,
                      recv ? data + i * kSegment : nullptr, recv ? seg_bytes(i) : 0);
    }
  }

  void all_gather(const Tensor& in, const Tensor& out) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const CollectiveTag tag = begin(Kind::kAllGather, in.dtype(), in.numel(), ReduceOp::Sum, 0);
    const int64_t n = in.numel();
    const size_t esz = static_cast<size_t>(in.element_size());
    auto* data = static_cast<char*>(out.impl()->data());
    char* mine = data + static_cast<size_t>(links_.rank() * n) * esz;
    if (in.impl()->data() != mine) std::memmove(mine, in.impl()->data(), static_cast<size_t>(n) * esz);
    ring_all_gather(tag, data, even_blocks(n), esz);
  }

  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const CollectiveTag tag = begin(Kind::kReduceScatter, in.dtype(), out.numel(), op, 0);
    const DType wire = wire_dtype(in.dtype());
    const int64_t total = in.numel();
    // The input stays untouched: the reduction runs in a copy (widened for 16-bit floats).
    std::vector<char> acc(static_cast<size_t>(total * dtype_size(wire)));
    if (wire != in.dtype()) widen(in.dtype(), in.impl()->data(), reinterpret_cast<float*>(acc.data()), total);
    else std::memcpy(acc.data(), in.impl()->data(), acc.size());
    const std::vector<int64_t> blocks = even_blocks(out.numel());
    ring_reduce_scatter(tag, acc.data(), blocks, wire, op);
    const size_t own = static_cast<size_t>(blocks[links_.rank()] * dtype_size(wire));
    finish_block(in.dtype(), op, links_.world_size(), acc.data() + own, out.impl()->data(), out.numel());
  }

 private:
  static constexpr size_t kSegment = size_t{1} << 20;

  // Block b of a ring collective spans elements [offsets[b], offsets[b + 1]).
  std::vector<int64_t> even_blocks(int64_t per_rank) const {
    std::vector<int64_t> offsets(static_cast<size_t>(links_.world_size()) + 1);
    for (size_t b = 0; b < offsets.size(); ++b) offsets[b] = static_cast<int64_t>(b) * per_rank;
    return offsets;
  }
  int wrap(int b) const { return ((b % links_.world_size()) + links_.world_size()) % links_.world_size(); }

  // Numbers the collective and checks that the previous rank is issuing the same one.
  CollectiveTag begin(Kind kind, DType dtype, int64_t numel, ReduceOp op, int root) {
    Header mine{static_cast<uint8_t>(kind), static_cast<uint8_t>(dtype),
                static_cast<uint8_t>(kind == Kind::kAllReduce || kind == Kind::kReduceScatter ? op : ReduceOp::Sum),
                root, ++sequence_, numel};
    const CollectiveTag tag{kind_name(static_cast<uint8_t>(kind)), sequence_, current_collective_context().describe()};
    const std::string bytes = mine.encode();
    std::string theirs(bytes.size(), '\0');
    links_.exchange(tag, bytes.data(), bytes.size(), theirs.data(), theirs.size());
    if (theirs != bytes) {
      links_.mark_broken(tag);
      const std::string other = theirs.compare(0, 4, "TGCH") == 0 ? "rank " + std::to_string(links_.prev()) + " issued " + Header::decode(theirs).describe()
                                                                   : "rank " + std::to_string(links_.prev()) + " sent something else";
      TG_FAIL("[distributed] rank ", links_.rank(), " issued ", mine.describe(),
              tag.context.empty() ? "" : " (" + tag.context + ")", " but ", other,
              ": expected every rank to issue the same collectives, in the same order, on tensors of the same size "
              "and dtype");
    }
    return tag;
  }

  // After it, block r of `acc` (wire dtype) holds the reduction over all ranks on rank r. Step s
  // sends block r-s-1 and folds the arriving block r-s-2 in as its bytes come.
  void ring_reduce_scatter(const CollectiveTag& tag, char* acc, const std::vector<int64_t>& blocks, DType wire,
                           ReduceOp op) {
    const int world = links_.world_size(), r = links_.rank();
    const size_t esz = static_cast<size_t>(dtype_size(wire));
    int64_t widest = 0;
    for (int b = 0; b < world; ++b) widest = std::max(widest, blocks[b + 1] - blocks[b]);
    scratch_.resize(static_cast<size_t>(widest) * esz);
    for (int s = 0; s + 1 < world; ++s) {
      const int out_b = wrap(r - s - 1), in_b = wrap(r - s - 2);
      char* target = acc + static_cast<size_t>(blocks[in_b]) * esz;
      int64_t folded = 0;
      links_.exchange(tag, acc + static_cast<size_t>(blocks[out_b]) * esz,
                      static_cast<size_t>(blocks[out_b + 1] - blocks[out_b]) * esz, scratch_.data(),
                      static_cast<size_t>(blocks[in_b + 1] - blocks[in_b]) * esz, [&](size_t got) {
                        const auto whole = static_cast<int64_t>(got / esz);
                        combine(wire, op, target + folded * esz, scratch_.data() + folded * esz, whole - folded);
                        folded = whole;
                      });
    }
  }

  // Every rank starts with its own block r of `data` and ends with all of them. Step s passes on
  // block r-s and receives block r-s-1.
  void ring_all_gather(const CollectiveTag& tag, char* data, const std::vector<int64_t>& blocks, size_t esz) {
    const int world = links_.world_size(), r = links_.rank();
    for (int s = 0; s + 1 < world; ++s) {
      const int out_b = wrap(r - s), in_b = wrap(r - s - 1);
      links_.exchange(tag, data + static_cast<size_t>(blocks[out_b]) * esz,
                      static_cast<size_t>(blocks[out_b + 1] - blocks[out_b]) * esz,
                      data + static_cast<size_t>(blocks[in_b]) * esz,
                      static_cast<size_t>(blocks[in_b + 1] - blocks[in_b]) * esz);
    }
  }

  // Reduce-scatter in the wire dtype, finish the own block, all-gather in the result dtype: each
  // block is reduced once, by one rank, so every rank ends with the same bits.
  void ring_all_reduce(const CollectiveTag& tag, const void* in, void* out, int64_t n, DType dtype, ReduceOp op) {
    const int world = links_.world_size(), r = links_.rank();
    const DType wire = wire_dtype(dtype);
    const size_t esz = static_cast<size_t>(dtype_size(dtype)), wsz = static_cast<size_t>(dtype_size(wire));
    std::vector<int64_t> blocks(static_cast<size_t>(world) + 1);
    for (int b = 0; b <= world; ++b) blocks[b] = n * b / world;
    std::vector<char> widened;
    char* acc = static_cast<char*>(out);
    if (wire != dtype) {
      widened.resize(static_cast<size_t>(n) * wsz);
      widen(dtype, in, reinterpret_cast<float*>(widened.data()), n);
      acc = widened.data();
    } else if (in != out) {
      std::memcpy(out, in, static_cast<size_t>(n) * esz);
    }
    ring_reduce_scatter(tag, acc, blocks, wire, op);
    finish_block(dtype, op, world, acc + static_cast<size_t>(blocks[r]) * wsz,
                 static_cast<char*>(out) + static_cast<size_t>(blocks[r]) * esz, blocks[r + 1] - blocks[r]);
    ring_all_gather(tag, static_cast<char*>(out), blocks, esz);
  }

  RingLinks links_;
  int64_t sequence_ = 0;
  std::vector<char> scratch_;
  std::mutex mutex_;
};

}  // namespace

std::unique_ptr<Communicator> make_tcp_communicator(int rank, int world_size, TcpStore& store,
                                                    std::chrono::milliseconds timeout, const std::string& master_addr,
                                                    int master_port) {
  return std::make_unique<TcpCommunicator>(rank, world_size, store, timeout, master_addr, master_port);
}

}  // namespace tg::distributed
