// The graph passes compile() runs on a partition, in order: see Note [Compile pipeline].
#pragma once

#include "graphs/capture/joint.h"
#include "graphs/partition/partition.h"

namespace tg {
struct CompileOptions;
}

namespace tg::graphs {

// Rewrites the forward and backward graphs of `partition` with the passes `options` enable:
// cuBLASLt epilogue fusion, elementwise fusion (generated kernels), then early collectives.
void optimize(Partition& partition, const JointGraph& joint, const CompileOptions& options);

}  // namespace tg::graphs
