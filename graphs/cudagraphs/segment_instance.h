// What the files of the cudagraphs executor share: one recording of a segment (Instance), where its
// outputs live (OutputSlot), and a captured segment's recordings (SegmentState). See Note [CUDA
// graph executor] in docs/cudagraph_executor.md.
#pragma once

#include <memory>
#include <vector>

#include "graphs/cudagraphs/cudagraph_executor.h"
#include "graphs/cudagraphs/memory_range.h"
#include "graphs/cudagraphs/output_buffers.h"
#include "tensor/captured_work.h"

namespace tg::graphs {

// Where one segment output of an instance lives: in one of the instance's output buffers, in a
// tensor the instance does not own (a static input passed through), or nowhere (an output of no
// bytes, made afresh at each replay).
struct CudaGraphExecutor::OutputSlot {
  int buffer = -1;     // index into Instance::buffers, or -1
  Tensor passthrough;  // the tensor itself when buffer is -1 and the output has memory
  bool no_memory = false;
  Shape sizes, strides;
  int64_t offset = 0;
  DType dtype = kFloat32;
  Device device;
};

// One recording of a segment: its graph, the buffers it reads and the memory it writes.
struct CudaGraphExecutor::Instance {
  std::unique_ptr<RecordedGraph> graph;
  TensorList input_buffers;                   // per segment input: the static tensor, or a copy buffer
  std::vector<const void*> static_addresses;  // per segment input: recorded address (nullptr: copied)
  std::vector<OutputSlot> outputs;            // per segment output
  std::vector<std::shared_ptr<OutputBuffer>> buffers;  // the memory of the outputs
  std::vector<std::shared_ptr<void>> recorded_memory;  // the recording's own output storages, until the first replay
  std::vector<MemoryRange> scratch;           // pool memory the replay writes besides its buffers
  CapturedWork watched;                       // work that sees each replay (collectives, for their watchdog)
};

// Per captured segment: how often it ran and its recorded instances.
struct CudaGraphExecutor::SegmentState {
  int calls = 0;
  bool gave_up = false;
  std::vector<std::unique_ptr<Instance>> instances;
};

// Where a static input's first element is (views of one buffer at other offsets are other addresses).
inline const void* address_of(const Tensor& t) {
  return t.defined() && !t.impl()->storage()->is_fake() ? t.impl()->data() : nullptr;
}

}  // namespace tg::graphs
