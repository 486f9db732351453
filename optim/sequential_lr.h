// SequentialLR: schedulers one after another, switching at milestones (a warm-up, then cosine).
#pragma once

#include <memory>
#include <vector>

#include "optim/lr_scheduler.h"

namespace tg::optim {

// Runs schedulers[0] until milestones[0], schedulers[1] until milestones[1], and so on, as
// torch.optim.lr_scheduler.SequentialLR does: each scheduler after the first starts at its milestone
// from its closed form at epoch 0 (its base learning rate). Every scheduler must be built on
// `optimizer` (their constructors' steps are undone here, the first one's initial step redone).
class SequentialLR final : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones, int64_t last_epoch = -1);

  void step() override;
  // "last_epoch", "_last_lr.0", "_milestones.<k>" and each scheduler's entries under "_schedulers.<k>.".
  std::map<std::string, Tensor> state_dict() const override;
  void load_state_dict(const std::map<std::string, Tensor>& dict) override;

 private:
  double get_lr() const override { return last_lr_.at(0); }
  void step_to(int64_t epoch) override;
  void undo_step() override;

  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

}  // namespace tg::optim
