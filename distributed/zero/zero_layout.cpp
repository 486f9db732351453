// See Note [Sharded optimizer] in docs/sharded_optimizer.md.
#include "distributed/zero/zero_layout.h"

#include <algorithm>

#include "ops/factory/factory.h"
#include "tensor/check.h"
#include "tensor/grad_mode.h"

namespace tg::distributed {

int64_t ZeroGroup::numel(size_t member) const {
  int64_t n = 1;
  for (int64_t s : shapes[member]) n *= s;
  return n;
}

int64_t ZeroGroup::flat_size() const {
  int64_t n = 0;
  for (const ZeroBucket& b : buckets) n += b.size;
  return n;
}

ZeroLayout ZeroLayout::build(const TensorList& params, int world_size, double bucket_cap_mb) {
  TG_CHECK(world_size >= 1, "[ZeroRedundancyOptimizer] world size ", world_size, ": expected at least 1");
  ZeroLayout layout;
  layout.world_size = world_size;
  // Groups in order of first appearance, as fused optimizer updates group them.
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    auto same = [&](const ZeroGroup& g) { return g.dtype == p.dtype() && g.device == p.device(); };
    if (std::none_of(layout.groups.begin(), layout.groups.end(), same)) {
      ZeroGroup& g = layout.groups.emplace_back();
      g.dtype = p.dtype();
      g.device = p.device();
    }
  }
  const double cap_bytes = bucket_cap_mb * 1024.0 * 1024.0;
  for (ZeroGroup& g : layout.groups) {
    int64_t offset = 0, bucket_start = 0;
    auto close = [&] {
      if (offset == bucket_start && !g.buckets.empty()) return;
      // Padded to a multiple of the world size, and never empty, so every rank owns a block.
      const int64_t used = offset - bucket_start;
      const int64_t padded = std::max<int64_t>(world_size, (used + world_size - 1) / world_size * world_size);
      g.buckets.push_back({bucket_start, padded});
      offset = bucket_start + padded;
      bucket_start = offset;
    };
    for (size_t k = params.size(); k-- > 0;) {
      const Tensor& p = params[k];
      if (p.dtype() != g.dtype || p.device() != g.device) continue;
      g.members.push_back(k);
      g.shapes.push_back(p.sizes());
      g.offsets.push_back(offset);
      g.bucket_of.push_back(g.buckets.size());
      offset += p.numel();
      const double bytes = static_cast<double>((offset - bucket_start) * p.element_size());
      if (bucket_cap_mb > 0 && bytes >= cap_bytes) close();
    }
    if (offset > bucket_start || g.buckets.empty()) close();
  }
  return layout;
}

int64_t ZeroLayout::shard_size(size_t g) const { return groups[g].flat_size() / world_size; }

int64_t ZeroLayout::shard_offset(size_t g, size_t b) const {
  int64_t at = 0;
  for (size_t j = 0; j < b; ++j) at += groups[g].buckets[j].size / world_size;
  return at;
}

std::vector<ZeroPiece> ZeroLayout::pieces(size_t gi, int rank) const {
  const ZeroGroup& g = groups[gi];
  std::vector<ZeroPiece> out;
  for (size_t m = 0; m < g.members.size(); ++m) {
    const size_t b = g.bucket_of[m];
    const ZeroBucket& bucket = g.buckets[b];
    const int64_t block = bucket.size / world_size;
    const int64_t lo = bucket.offset + rank * block, hi = lo + block;  // this rank's block, in flat space
    const int64_t begin = std::max(lo, g.offsets[m]), end = std::min(hi, g.offsets[m] + g.numel(m));
    if (begin >= end) continue;
    out.push_back({m, begin - g.offsets[m], shard_offset(gi, b) + begin - lo, end - begin});
  }
  return out;
}

Tensor ZeroLayout::shard_of(size_t gi, int rank, const TensorList& member_values, const Tensor& like) const {
  const ZeroGroup& g = groups[gi];
  TG_CHECK(member_values.size() == g.members.size(), "[ZeroRedundancyOptimizer] got ", member_values.size(),
           " tensors for a group of ", g.members.size(), " parameters");
  NoGradGuard no_grad;
  Tensor shard = zeros({shard_size(gi)}, {.dtype = like.dtype(), .device = like.device()});
  for (const ZeroPiece& piece : pieces(gi, rank)) {
    const Tensor& v = member_values[piece.member];
    if (!v.defined()) continue;
    TG_CHECK(v.numel() == g.numel(piece.member), "[ZeroRedundancyOptimizer] a tensor of ", v.numel(),
             " elements stands for a parameter of shape ", shape_str(g.shapes[piece.member]));
    shard.narrow(0, piece.shard_offset, piece.length)
        .copy_(v.reshape({-1}).narrow(0, piece.param_offset, piece.length));
  }
  return shard;
}

TensorList ZeroLayout::unshard(size_t gi, const TensorList& shards) const {
  const ZeroGroup& g = groups[gi];
  TG_CHECK(shards.size() == static_cast<size_t>(world_size), "[ZeroRedundancyOptimizer] got ", shards.size(),
           " shards for a world of ", world_size);
  NoGradGuard no_grad;
  TensorList flat(g.members.size());
  for (size_t m = 0; m < g.members.size(); ++m)
    flat[m] = empty({g.numel(m)}, {.dtype = shards[0].dtype(), .device = shards[0].device()});
  for (int r = 0; r < world_size; ++r) {
    const Tensor& shard = shards[static_cast<size_t>(r)];
    TG_CHECK(shard.numel() == shard_size(gi), "[ZeroRedundancyOptimizer] rank ", r, "'s shard holds ", shard.numel(),
             " elements; the layout gives each rank ", shard_size(gi));
    for (const ZeroPiece& piece : pieces(gi, r))
      flat[piece.member].narrow(0, piece.param_offset, piece.length)
          .copy_(shard.reshape({-1}).narrow(0, piece.shard_offset, piece.length));
  }
  TensorList out;
  for (size_t m = 0; m < g.members.size(); ++m) out.push_back(flat[m].view(g.shapes[m]));
  return out;
}

}  // namespace tg::distributed
