// See Note [Data-parallel internals] in docs/data_parallel.md.
#include "graphs/passes/schedule_collectives.h"

#include <limits>
#include <queue>
#include <tuple>

namespace tg::graphs {
namespace {

// fully_shard's gathers of a unit's parameters (distributed/fsdp/fsdp_gather.h).
bool is_shard_gather(const Op& op) {
  return op.has(kCollective) && (op.name() == "fsdp_all_gather" || op.name() == "fsdp_regather");
}

}  // namespace

void schedule_collectives_early(Graph& graph) {
  std::vector<GraphNode>& nodes = graph.nodes;
  const size_t n = nodes.size();
  std::vector<size_t> collectives;
  for (size_t i = 0; i < n; ++i)
    if (nodes[i].op->has(kCollective)) collectives.push_back(i);
  if (collectives.empty()) return;

  auto producer_of = [&](ValueId v) -> int32_t { return v < 0 ? -1 : graph.values[static_cast<size_t>(v)].producer; };

  // What each node waits for: the producers of its inputs and, for collectives and random ops, the
  // previous node of its kind, so that both keep their traced order (every process issues the same
  // collectives in the same order; random ops draw in the order eager mode draws).
  std::vector<std::vector<size_t>> after(n);
  int32_t last_collective = -1, last_random = -1, last_gather = -1;
  for (size_t i = 0; i < n; ++i) {
    for (ValueId v : nodes[i].inputs)
      if (const int32_t p = producer_of(v); p >= 0) after[i].push_back(static_cast<size_t>(p));
    // A unit's gather reads only its shard, so it could run first of all, and every unit's full
    // parameters would be alive at once. It runs at most one unit ahead instead, as eager
    // fully_shard prefetches: after what was traced before the previous unit's gather.
    if (is_shard_gather(*nodes[i].op)) {
      if (last_gather > 0) after[i].push_back(static_cast<size_t>(last_gather - 1));
      last_gather = static_cast<int32_t>(i);
    }
    for (auto [flag, last] : {std::pair<OpFlag, int32_t*>{kCollective, &last_collective}, {kRandom, &last_random}}) {
      if (!nodes[i].op->has(flag)) continue;
      if (*last >= 0) after[i].push_back(static_cast<size_t>(*last));
      *last = static_cast<int32_t>(i);
    }
  }

  // The wait of an asynchronous collective (collective_wait, kStreamWait) runs at the latest before the
  // collective issued two after the one it waits for: otherwise nothing that a collective needs waits
  // for it, and the inputs that it keeps alive (a ZeRO bucket, a unit's gradients) would pile up to
  // the end of the graph. Two stay in flight, each overlapping what runs until the next one is issued.
  std::vector<int32_t> collective_at(n, -1);  // node -> its place among the collectives
  for (size_t c = 0; c < collectives.size(); ++c) collective_at[collectives[c]] = static_cast<int32_t>(c);
  for (size_t i = 0; i < n; ++i) {
    if (!nodes[i].op->has(kStreamWait) || nodes[i].inputs.empty()) continue;
    const int32_t p = producer_of(nodes[i].inputs[0]);
    if (p < 0 || collective_at[static_cast<size_t>(p)] < 0) continue;
    const size_t before = static_cast<size_t>(collective_at[static_cast<size_t>(p)]) + kCollectivesInFlight;
    if (before < collectives.size()) after[collectives[before]].push_back(i);
  }

  // Each node's priority: the position of the earliest collective that needs it (transitively).
  constexpr size_t kNone = std::numeric_limits<size_t>::max();
  std::vector<size_t> needed_by(n, kNone);
  for (size_t c = 0; c < collectives.size(); ++c) {
    std::vector<size_t> stack{collectives[c]};
    while (!stack.empty()) {
      const size_t i = stack.back();
      stack.pop_back();
      if (needed_by[i] != kNone) continue;  // an earlier collective needs it already (and what it waits for)
      needed_by[i] = c;
      for (size_t p : after[i])
        if (needed_by[p] == kNone) stack.push_back(p);
    }
  }

  std::vector<size_t> pending(n, 0);
  std::vector<std::vector<size_t>> readers(n);
  for (size_t i = 0; i < n; ++i)
    for (size_t p : after[i]) {
      ++pending[i];
      readers[p].push_back(i);
    }

  // List scheduling: among ready nodes, the one the earliest collective needs, then traced order.
  using Key = std::tuple<size_t, size_t>;  // (needed_by, traced index)
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> ready;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.emplace(needed_by[i], i);
  std::vector<size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    const size_t i = std::get<1>(ready.top());
    ready.pop();
    order.push_back(i);
    for (size_t r : readers[i])
      if (--pending[r] == 0) ready.emplace(needed_by[r], r);
  }
  TG_CHECK(order.size() == n, "[schedule] internal error: the graph has a cycle");

  std::vector<int32_t> new_index(n);
  std::vector<GraphNode> reordered;
  reordered.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    new_index[order[k]] = static_cast<int32_t>(k);
    reordered.push_back(std::move(nodes[order[k]]));
  }
  nodes = std::move(reordered);
  for (Value& v : graph.values)
    if (v.producer >= 0) v.producer = new_index[static_cast<size_t>(v.producer)];
}

}  // namespace tg::graphs
