// ModuleList: registration and indexing of a list of submodules.
#include "nn/container.h"

namespace tg::nn {

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

void ModuleList::push_back(std::shared_ptr<Module> module) { add_child(std::to_string(size()), std::move(module)); }

Tensor ModuleList::forward(const Tensor&) {
  TG_FAIL("[ModuleList] a ModuleList has no forward: index it (list[i]) and call its modules");
}

std::shared_ptr<Module> ModuleList::at(int64_t i) const {
  const auto n = static_cast<int64_t>(size());
  TG_CHECK(i >= -n && i < n, "[ModuleList] index ", i, " is out of range for a ModuleList of ", n, " modules");
  return named_children()[static_cast<size_t>(i < 0 ? i + n : i)].second;
}

Module& ModuleList::operator[](int64_t i) const { return *at(i); }

}  // namespace tg::nn
