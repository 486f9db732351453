// Where a forward graph's writes into its inputs land (the caller's tensors, parameters, buffers).
#pragma once

#include <vector>

#include "graphs/capture/joint.h"
#include "graphs/ir/graph.h"

namespace tg::graphs {

// Lowers the functionalized writes into fw's inputs. `read_in_place[i]` says whether the executor
// reads graph input i from the caller's memory (rather than a copy). Writes into such inputs run
// in place where that is unobservable (reinplace); with `write_back`, the remaining ones get a
// write-back node at the end of the graph. Returns, per entry of joint.mutated, whether the graph
// itself leaves the final value in the caller's tensor (otherwise compile()'s epilogue copies it).
std::vector<bool> lower_input_writes(Graph& fw, const JointGraph& joint, const std::vector<bool>& read_in_place,
                                     bool write_back);

}  // namespace tg::graphs
