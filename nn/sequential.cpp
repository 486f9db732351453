#include "nn/sequential.h"

namespace tg::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) { add_child(std::to_string(size()), std::move(module)); }

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& [_, m] : named_children()) x = (*m)(x);  // through operator(), so the children's forward hooks run
  return x;
}

Module& Sequential::operator[](int64_t i) const {
  const auto n = static_cast<int64_t>(size());
  TG_CHECK(i >= -n && i < n, "[Sequential] index ", i, " is out of range for a Sequential of ", n, " modules");
  return *named_children()[static_cast<size_t>(i < 0 ? i + n : i)].second;
}

}  // namespace tg::nn
