// The flat layout of a sharded optimizer (ZeroRedundancyOptimizer): which slice of which parameter
// each rank owns. See Note [Sharded optimizer] in docs/sharded_optimizer.md.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace tg::distributed {

// A run of the flat space reduced and gathered as one message: `size` elements from `offset`,
// padded to a multiple of the world size; rank r owns elements [r*size/W, (r+1)*size/W) of it.
struct ZeroBucket {
  int64_t offset = 0;
  int64_t size = 0;
};

// The parameters of one dtype and device, laid end to end in buckets (the flat space).
struct ZeroGroup {
  DType dtype = kFloat32;
  Device device = kCPU;
  std::vector<size_t> members;     // indices into the parameter list, in flat order
  std::vector<Shape> shapes;       // per member
  std::vector<int64_t> offsets;    // per member: where it starts in the flat space
  std::vector<ZeroBucket> buckets; // in flat order, covering the flat space
  std::vector<size_t> bucket_of;   // per member

  int64_t numel(size_t member) const;
  // The flat space's size, padding included.
  int64_t flat_size() const;
};

// The part of one member inside one rank's shard: `length` elements from `param_offset` of the
// flattened parameter, stored from `shard_offset` of the shard.
struct ZeroPiece {
  size_t member = 0;
  int64_t param_offset = 0;
  int64_t shard_offset = 0;
  int64_t length = 0;
};

// Groups and buckets for `world_size` ranks. A rank's shard of a group is its block of every bucket,
// laid end to end: with one bucket (the default of stage 1) it is one contiguous run of the flat space.
struct ZeroLayout {
  int world_size = 1;
  std::vector<ZeroGroup> groups;

  // Groups the parameters by dtype and device (in order of first appearance) and lays each group
  // out in reverse registration order, the order the backward produces gradients in; a bucket
  // closes once it holds at least `bucket_cap_mb` MiB (cap <= 0: one bucket per group).
  static ZeroLayout build(const TensorList& params, int world_size, double bucket_cap_mb);

  // Elements of group g that each rank owns.
  int64_t shard_size(size_t g) const;
  // Where bucket b's block starts in a shard of group g.
  int64_t shard_offset(size_t g, size_t b) const;
  // The members' slices inside rank `rank`'s shard of group g.
  std::vector<ZeroPiece> pieces(size_t g, int rank) const;
  // Rank `rank`'s shard of group g, from one tensor per member (its shape or any shape of its size;
  // padding is zero), as a new tensor of `like`'s dtype and device.
  Tensor shard_of(size_t g, int rank, const TensorList& member_values, const Tensor& like) const;
  // The members of group g (in their shapes) from every rank's shard (world_size of them).
  TensorList unshard(size_t g, const TensorList& shards) const;
};

}  // namespace tg::distributed
