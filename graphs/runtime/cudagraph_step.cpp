// See Note [Stale outputs] in docs/stale_outputs.md.
#include "graphs/runtime/cudagraph_step.h"

#include <atomic>

#include "tensor/tensor.h"
#include "tensor/tensor_impl.h"

namespace tg {
namespace {
std::atomic<uint64_t> g_step{1};
std::atomic<int64_t> g_pending_backwards{0};
}  // namespace

void mark_step_begin() { ++g_step; }

void mark_static_address(const Tensor& t) {
  TG_CHECK(t.defined(), "[mark_static_address] got an undefined tensor");
  t.impl()->storage()->mark_static_address();
}

namespace graphs {

uint64_t current_step() { return g_step.load(); }

bool is_static_address(const Tensor& t) {
  return t.defined() && t.impl()->storage()->has_static_address();
}

void begin_forward_call() {
  if (g_pending_backwards.load() == 0) ++g_step;
}

bool backward_pending() { return g_pending_backwards.load() > 0; }

std::shared_ptr<void> pending_backward_token() {
  ++g_pending_backwards;
  static int marker = 0;
  return std::shared_ptr<void>(&marker, [](void*) { --g_pending_backwards; });
}

}  // namespace graphs
}  // namespace tg
