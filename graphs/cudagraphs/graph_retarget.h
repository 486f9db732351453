// Updating an instantiated CUDA graph in place when memory it reads has moved (a parameter re-bound,
// a new static-buffer loader), instead of recording it again. See Note [CUDA graph executor].
#pragma once

#include <string>
#include <vector>

#include "graphs/cudagraphs/memory_range.h"

struct CUgraph_st;
struct CUgraphExec_st;

namespace tg::graphs {

// Rewrites every address inside a move's range that the nodes of `graph` (the captured template)
// and of `exec` (its instantiation) reference: kernel arguments (each 8-byte word of each argument,
// structs included), and the source and destination of copy and memset nodes. Returns false with
// the reason, changing nothing, where a node could reference memory in a way this cannot rewrite
// (host callbacks, child graphs, launches with packed argument buffers, a driver without the
// argument layout queries); the graph must then be recorded again.
bool retarget_graph(CUgraph_st* graph, CUgraphExec_st* exec, const std::vector<AddressMove>& moves, std::string& why);

}  // namespace tg::graphs
