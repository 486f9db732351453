#include "nn/init_skip_draws.h"

namespace tg::nn::init {
namespace {
thread_local bool t_skip_draws = false;
}  // namespace

SkipDrawsGuard::SkipDrawsGuard() : previous_(t_skip_draws) { t_skip_draws = true; }
SkipDrawsGuard::~SkipDrawsGuard() { t_skip_draws = previous_; }

bool skipping_draws() { return t_skip_draws; }

}  // namespace tg::nn::init
