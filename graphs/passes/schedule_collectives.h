// Node order passes: where in a graph each node runs.
#pragma once

#include <cstddef>

#include "graphs/ir/graph.h"

namespace tg::graphs {

// Reorders a graph that holds collectives (kCollective) so that each collective runs as early as
// its inputs allow: nodes are listed in dependency order, those that some collective needs first
// (the earliest such collective first), the rest in their traced order. Collectives keep their
// traced order, which every process shares, and random ops theirs, so they draw what eager mode draws. An asynchronous collective then communicates while the
// nodes after it compute: a data-parallel backward computes a layer's weight gradients before its
// input gradients and reduces each bucket as soon as its gradients exist. fully_shard's gathers run at
// most one unit ahead (Note [Fully sharded data parallel]). The wait of an asynchronous collective
// runs where its result is first read, and at the latest before the collective issued two after it
// (Note [Asynchronous collectives]). No-op without collectives.
void schedule_collectives_early(Graph& graph);

// Asynchronous collectives whose waits may still be pending when the next one is issued (the
// compiled schedule above, and eager ZeRO-2's bucket reductions alike).
inline constexpr size_t kCollectivesInFlight = 2;

}  // namespace tg::graphs
