// What each rank announces before a collective of the CPU backend: which collective, its sequence
// number, dtype, size, reduce op and root. Every rank compares its own with every other rank's, so
// ranks that issue different collectives fail naming both sides instead of exchanging data that
// does not match. See Note [CPU collectives] in docs/data_parallel.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "distributed/collectives/process_group.h"

namespace tg::distributed {

// The collectives of the CPU backend.
enum class CollectiveKind : uint8_t { kAllReduce = 1, kBroadcast = 2, kAllGather = 3, kReduceScatter = 4 };

// "all_reduce", "broadcast", "all_gather" or "reduce_scatter".
const char* collective_kind_name(CollectiveKind kind);

// One rank's description of the collective it is about to run.
struct CollectiveHeader {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  DType dtype = DType::Float32;
  ReduceOp op = ReduceOp::Sum;  // only meaningful for the reductions
  int32_t root = 0;             // only meaningful for broadcast
  int64_t sequence = 0;
  int64_t numel = 0;

  // A header for `kind` in which the fields the collective ignores are zero, so equal calls encode alike.
  static CollectiveHeader make(CollectiveKind kind, DType dtype, int64_t numel, ReduceOp op, int root,
                               int64_t sequence);
  // The fixed-size bytes that travel (kBytes of them).
  std::string encode() const;
  // The header in `bytes`, or nothing when they are not one (another program's data).
  static std::optional<CollectiveHeader> decode(const std::string& bytes);
  // "all_reduce #7 of 4 float32 elements, sum" (the op for reductions, the root for broadcast).
  std::string describe() const;

  static constexpr size_t kBytes = 27;  // "TGCH", kind, dtype, op, root, sequence, numel
};

}  // namespace tg::distributed
