// See Note [Data-parallel internals] in docs/data_parallel.md.
#include "distributed/ddp/ddp.h"

#include "distributed/collectives/collectives.h"
#include "distributed/ddp/gradient_buckets.h"
#include "tensor/grad_mode.h"

namespace tg::nn {

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module, DistributedDataParallelOptions options)
    : module_(std::move(module)), options_(std::move(options)) {
  TG_CHECK(module_, "[DistributedDataParallel] got a null module");
  if (!options_.process_group) options_.process_group = distributed::default_group();
  TG_CHECK(options_.bucket_cap_mb > 0 && options_.first_bucket_cap_mb > 0, "[DistributedDataParallel] bucket caps ",
           options_.first_bucket_cap_mb, " and ", options_.bucket_cap_mb, " MiB: expected positive sizes");
  register_module("module", module_);
  const auto& group = options_.process_group;

  // Every replica starts from rank 0's state.
  {
    NoGradGuard no_grad;
    for (auto& [name, t] : module_->named_parameters()) {
      TG_CHECK(t.device() == group->device() || group->world_size() == 1, "[DistributedDataParallel] parameter ", name,
               " is on ", t.device().str(), ", expected the process group's device ", group->device().str(),
               " (move the module there first)");
      Tensor handle = t;
      const distributed::CollectiveContextScope context({"DDP initial broadcast of " + name, nullptr});
      distributed::broadcast_(handle, 0, group);
    }
    for (auto& [name, t] : module_->named_buffers()) {
      Tensor handle = t;
      const distributed::CollectiveContextScope context({"DDP initial broadcast of " + name, nullptr});
      distributed::broadcast_(handle, 0, group);
    }
  }

  std::vector<NamedTensor> trained;
  for (auto& [name, p] : module_->named_parameters())
    if (p.requires_grad()) trained.emplace_back("module." + name, p);
  buckets_ = std::make_shared<distributed::GradientBuckets>(
      trained, group,
      distributed::BucketOptions{.first_cap_mb = options_.first_bucket_cap_mb, .cap_mb = options_.bucket_cap_mb,
                                 .last_cap_mb = options_.last_bucket_cap_mb, .reduce_dtype = options_.reduce_dtype});
  std::weak_ptr<distributed::GradientBuckets> weak = buckets_;
  for (auto& [name, p] : trained) {
    p.impl()->autograd().grad_reducer = buckets_;
    p.register_post_accumulate_grad_hook([weak](const Tensor& leaf) {
      if (auto buckets = weak.lock()) buckets->on_accumulated(leaf);
    });
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  // The parameters may outlive the wrapper (held by an optimizer): they stop reducing.
  for (auto& [name, p] : module_->named_parameters())
    if (AutogradMeta* meta = p.impl()->autograd_if_present(); meta && meta->grad_reducer == buckets_)
      meta->grad_reducer.reset();
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  buckets_->check_finished();
  if (options_.broadcast_buffers && options_.process_group->world_size() > 1) {
    NoGradGuard no_grad;
    for (auto& [name, t] : module_->named_buffers()) {
      Tensor handle = t;
      const distributed::CollectiveContextScope context({"DDP broadcast of buffer " + name, nullptr});
      distributed::broadcast_(handle, 0, options_.process_group);
    }
  }
  return module_->forward(input);
}

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_names() const {
  return buckets_->bucket_names();
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp)
    : ddp_(ddp), previous_(ddp.buckets_->sync()) {
  ddp_.buckets_->set_sync(false);
}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() { ddp_.buckets_->set_sync(previous_); }

}  // namespace tg::nn
