// See autograd/checkpoint.h. Eager checkpointing follows PyTorch's non-reentrant design: fn's
// forward records its graph as usual, but every tensor a node saves while it runs becomes a place in
// the call's frame instead of a reference to the data. The first unpack of a place runs fn again on
// detached copies of the inputs, with gradient recording on and the generator and autocast state of
// the forward, and keeps what that run saves, in order: the n-th save of the recomputation fills the
// n-th place. The backward then runs through the graph the forward recorded, so gradients reach the
// inputs and every tensor fn captured by the same edges as without checkpointing.
#include "autograd/checkpoint.h"

#include <optional>
#include <vector>

#include "autograd/checkpoint_frame.h"
#include "autograd/saved_tensor.h"
#include "ops/core/autocast.h"
#include "ops/random/random.h"
#include "tensor/grad_mode.h"

namespace tg {

// One checkpointed call: how to run it again, and the tensors its recomputation saved.
class CheckpointFrame : public std::enable_shared_from_this<CheckpointFrame> {
 public:
  std::function<TensorList(const TensorList&)> fn;
  std::vector<SavedTensor> inputs;  // saved like any tensor: an enclosing checkpoint keeps only places
  std::vector<bool> input_requires_grad;
  PhiloxState generator;            // where the forward's random draws started
  AutocastDtypes autocast;          // the autocast state the forward ran under
  size_t places = 0;                // tensors the forward saved
  std::vector<SavedTensor> saved;   // what the recomputation saved, by place
  bool recomputed = false;
  bool recomputing = false;
};

namespace {

// What SavedTensor does on this thread: put saves into the top frame as places (a forward running)
// or record them for it (its recomputation running).
struct HookEntry {
  CheckpointFrame* frame;
  bool recording;
};
thread_local std::vector<HookEntry> t_hooks;

// Graph tracing: whether checkpoint marks regions, the region open now, and the next region's id.
thread_local bool t_tracing = false;
thread_local int32_t t_region = -1;
thread_local int32_t t_next_region = 0;

class HookScope {
 public:
  HookScope(CheckpointFrame* frame, bool recording) { t_hooks.push_back({frame, recording}); }
  ~HookScope() { t_hooks.pop_back(); }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;
};

// Puts the generator back where the backward had it once the recomputation has drawn its numbers.
class GeneratorRestore {
 public:
  explicit GeneratorRestore(PhiloxState replay) : now_(Generator::global().state()) {
    Generator::global().set_state(replay);
  }
  ~GeneratorRestore() { Generator::global().set_state(now_); }
  GeneratorRestore(const GeneratorRestore&) = delete;
  GeneratorRestore& operator=(const GeneratorRestore&) = delete;

 private:
  PhiloxState now_;
};

void recompute(CheckpointFrame& f) {
  TG_CHECK(!is_grad_enabled(),
           "[checkpoint] backward with create_graph=true through a checkpointed function is not supported: "
           "its saved tensors are recomputed without a graph for higher-order gradients");
  TG_CHECK(!f.recomputing, "[checkpoint] a checkpointed function's recomputation read its own saved tensors");
  TensorList args;
  args.reserve(f.inputs.size());
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    Tensor t = f.inputs[i].unpack(nullptr, "an input of a checkpointed function");
    if (t.defined()) {
      t = t.detach();
      if (f.input_requires_grad[i]) t.requires_grad_(true);
    }
    args.push_back(std::move(t));
  }
  f.recomputing = true;
  f.saved.clear();
  try {
    GeneratorRestore generator(f.generator);
    GradModeGuard grad_on(true);
    AutocastOffGuard autocast_off;  // the backward's autocast state comes back afterwards
    std::optional<AutocastGuard> cpu, cuda;
    if (f.autocast.cpu) cpu.emplace(kCPU, *f.autocast.cpu);
    if (f.autocast.cuda) cuda.emplace(cuda_device(0), *f.autocast.cuda);
    HookScope record(&f, /*recording=*/true);
    f.fn(args);  // the outputs and the graph of this run are dropped: only the saved tensors count
  } catch (...) {
    f.recomputing = false;
    f.saved.clear();
    throw;
  }
  f.recomputing = false;
  TG_CHECK(f.saved.size() == f.places, "[checkpoint] the recomputation saved ", f.saved.size(),
           " tensors for backward but the forward saved ", f.places,
           "; a checkpointed function must run the same ops each time it is called");
  f.recomputed = true;
}

}  // namespace

namespace checkpoint_hooks {

std::shared_ptr<CheckpointFrame> packing_frame() {
  if (t_hooks.empty() || t_hooks.back().recording) return nullptr;
  return t_hooks.back().frame->shared_from_this();
}

size_t reserve(CheckpointFrame& frame) { return frame.places++; }

void record(const SavedTensor& saved) {
  if (!t_hooks.empty() && t_hooks.back().recording) t_hooks.back().frame->saved.push_back(saved);
}

const SavedTensor& recomputed(CheckpointFrame& frame, size_t place) {
  if (!frame.recomputed) recompute(frame);
  TG_CHECK(place < frame.saved.size() && frame.saved[place].defined(),
           "[checkpoint] a saved tensor of a checkpointed function was read after the backward freed it; "
           "pass retain_graph=true to backward through the graph a second time");
  return frame.saved[place];
}

void release(CheckpointFrame& frame, size_t place) {
  if (frame.recomputed && place < frame.saved.size()) frame.saved[place] = SavedTensor();
}

}  // namespace checkpoint_hooks

int32_t current_checkpoint_region() { return t_region; }

CheckpointTracingGuard::CheckpointTracingGuard() : previous_(t_tracing), previous_region_(t_region) {
  t_tracing = true;
  t_region = -1;
}

CheckpointTracingGuard::~CheckpointTracingGuard() {
  t_tracing = previous_;
  t_region = previous_region_;
}

TensorList checkpoint_tensors(std::function<TensorList(const TensorList&)> fn, const TensorList& inputs) {
  if (!is_grad_enabled()) return fn(inputs);  // nothing is saved, so there is nothing to drop
  if (t_tracing) {
    // Graph tracing: the partitioner does the dropping (a nested call joins the outer region).
    if (t_region >= 0) return fn(inputs);
    struct RegionScope {
      RegionScope() { t_region = t_next_region++; }
      ~RegionScope() { t_region = -1; }
    } region;
    return fn(inputs);
  }
  auto frame = std::make_shared<CheckpointFrame>();
  frame->fn = std::move(fn);
  frame->inputs.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    frame->inputs.emplace_back(t, false);  // under an enclosing checkpoint, a place of its frame
    frame->input_requires_grad.push_back(t.defined() && t.requires_grad());
  }
  frame->generator = Generator::global().state();
  frame->autocast = autocast_dtypes();
  HookScope pack(frame.get(), /*recording=*/false);
  return frame->fn(inputs);
}

}  // namespace tg
