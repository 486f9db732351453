#include "ops/core/precision.h"

#include <atomic>

namespace tg {
namespace {
std::atomic<bool> g_allow_tf32{false};
}  // namespace

void set_allow_tf32(bool allowed) { g_allow_tf32.store(allowed); }
bool allow_tf32() { return g_allow_tf32.load(); }

}  // namespace tg
