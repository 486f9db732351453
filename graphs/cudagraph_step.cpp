#include "graphs/cudagraph_step.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "tensor/tensor.h"

namespace tg {
namespace {
std::atomic<uint64_t> g_step{1};
std::atomic<int64_t> g_pending_backwards{0};
std::mutex g_static_mutex;
std::unordered_map<const TensorImpl*, std::weak_ptr<TensorImpl>> g_static;
}  // namespace

void mark_step_begin() { ++g_step; }

void mark_static_address(const Tensor& t) {
  TG_CHECK(t.defined(), "[mark_static_address] got an undefined tensor");
  std::lock_guard<std::mutex> lock(g_static_mutex);
  g_static[t.impl()] = t.impl_ptr();
}

namespace graphs {

uint64_t current_step() { return g_step.load(); }

bool is_static_address(const Tensor& t) {
  if (!t.defined()) return false;
  std::lock_guard<std::mutex> lock(g_static_mutex);
  auto it = g_static.find(t.impl());
  return it != g_static.end() && it->second.lock().get() == t.impl();
}

void begin_forward_call() {
  if (g_pending_backwards.load() == 0) ++g_step;
}

std::shared_ptr<void> pending_backward_token() {
  ++g_pending_backwards;
  static int marker = 0;
  return std::shared_ptr<void>(&marker, [](void*) { --g_pending_backwards; });
}

}  // namespace graphs
}  // namespace tg
