// Tells once when a dim of a compiled function's input keeps changing size, each size compiling a
// variant of its own, and advises shape buckets. See Note [Shape buckets] in docs/shape_buckets.md.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graphs/compile_options.h"

namespace tg::graphs {

// Distinct sizes of one input dim, among the calls compiled for, that make it "changing".
inline constexpr size_t kChangingDimSizes = 3;

// Watches the shapes of the calls a compiled function compiles (or falls back) for.
class ChangingDims {
 public:
  // Skips a dim: (tensor name, dim, rank) -> true when it needs no advice (a bucketed dim).
  using Skip = std::function<bool(const std::string& name, int64_t dim, int64_t rank)>;
  // Records the call's shapes; the first time some dim has taken kChangingDimSizes distinct sizes
  // it returns the advice ("input 'x' dim 0 took 3 sizes (64, 17, 33) ..."), never again after.
  std::optional<std::string> observe(const CallArgs& call, const Skip& skip);

 private:
  struct Seen {
    int64_t rank = -1;
    std::vector<std::vector<int64_t>> sizes;  // per dim, distinct sizes in the order seen
  };
  std::map<std::string, Seen> seen_;
  bool told_ = false;
};

}  // namespace tg::graphs
