// SharedGradientSync: the GradientSync of a model split over ranks (tensor or pipeline parallel),
// after the data-parallel one if any: once that has reduced the gradients, the weights several
// ranks hold get their whole gradient (TrainableModel::sum_shared_gradients: sequence-parallel
// norms' partial sums, a tied embedding's two pipeline copies), in the parameters' own gradients or,
// under ZeRO-2/3, in the engine's gradient shards. The Trainer installs it itself.
#pragma once
#include <memory>

#include "hwtrain/dist/gradient_sync.h"
#include "hwtrain/model/trainable_model.h"

namespace hwt {

class SharedGradientSync : public GradientSync {
 public:
  SharedGradientSync(std::shared_ptr<GradientSync> inner, TrainableModel& model)
      : inner_(std::move(inner)), model_(model) {}
  void begin_micro_step(bool sync_after_backward) override {
    if (inner_) inner_->begin_micro_step(sync_after_backward);
  }
  void finish() override {
    if (inner_) inner_->finish();
    const auto shards = gradient_shards();
    model_.sum_shared_gradients(shards ? *shards : model_.own_gradients());
  }
  std::optional<std::vector<std::pair<std::string, torch::Tensor>>> gradient_shards() const override {
    return inner_ ? inner_->gradient_shards() : std::nullopt;
  }
  void discard() override {
    if (inner_) inner_->discard();
  }
  bool collective_started() const override { return inner_ && inner_->collective_started(); }

 private:
  std::shared_ptr<GradientSync> inner_;
  TrainableModel& model_;
};

}  // namespace hwt
