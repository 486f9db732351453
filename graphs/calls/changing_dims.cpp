// See Note [Shape buckets] in docs/shape_buckets.md.
#include "graphs/calls/changing_dims.h"

#include <algorithm>
#include <sstream>

namespace tg::graphs {

std::optional<std::string> ChangingDims::observe(const CallArgs& call, const Skip& skip) {
  if (told_) return std::nullopt;
  for (size_t i = 0; i < call.tensors.size() && i < call.names.size(); ++i) {
    const Tensor& t = call.tensors[i];
    if (!t.defined()) continue;
    Seen& s = seen_[call.names[i]];
    if (s.rank != t.dim()) s = Seen{t.dim(), std::vector<std::vector<int64_t>>(static_cast<size_t>(t.dim()))};
    for (int64_t d = 0; d < t.dim(); ++d) {
      std::vector<int64_t>& sizes = s.sizes[static_cast<size_t>(d)];
      if (std::find(sizes.begin(), sizes.end(), t.size(d)) == sizes.end()) sizes.push_back(t.size(d));
      if (sizes.size() < kChangingDimSizes || (skip && skip(call.names[i], d, t.dim()))) continue;
      std::ostringstream os;
      os << call.names[i] << " dim " << d << " took " << sizes.size() << " sizes (";
      for (size_t k = 0; k < sizes.size(); ++k) os << (k ? ", " : "") << sizes[k];
      os << "), each compiled as a variant of its own; for a dim that keeps changing, CompileOptions::shape_buckets "
            "pads it up to a few sizes that share compiled variants (docs/shape_buckets.md)";
      told_ = true;
      return os.str();
    }
  }
  return std::nullopt;
}

}  // namespace tg::graphs
