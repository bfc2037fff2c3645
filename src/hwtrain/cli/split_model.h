// A checkpoint's model split over the ranks of a launch for decoding (`hwtrain launch
// --nproc-per-node n -- generate ... [--pipeline p]`): p pipeline stages (the blocks balanced as
// training cuts them, plan/stage_split.h), each split over n / p ranks by tensor parallelism, each
// rank building the model with placeholders (model/deferred_init.h) and keeping only its stage's
// shard of each weight, read from the checkpoint one whole tensor at a time. No rank holds the whole
// model, so a model too large for one rank decodes on several (GPT::generate or
// GptStage::generate, collectively).
#pragma once
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "hwtrain/cli/parallel_setup.h"
#include "hwtrain/core/error.h"
#include "hwtrain/dist/dist_env.h"
#include "hwtrain/dist/process_group.h"
#include "hwtrain/model/gpt.h"
#include "hwtrain/plan/plan.h"
#include "hwtrain/run/run_config.h"

namespace hwt::cli {

// What eval and generate load, whole or split: the checkpoint `spec` names (resolved as --resume
// resolves it, `out_dir` for 'latest'), verified against its COMPLETE marker, holding hwtrain's own model.
std::filesystem::path own_checkpoint(const std::string& spec, const std::string& out_dir);
// IoError naming the checkpoint and the tensor unless `value` has `shape` and only finite values.
void check_checkpoint_weight(const std::filesystem::path& ckpt, const std::string& name, c10::IntArrayRef shape,
                             const torch::Tensor& value);
// IoError naming the checkpoint and the tensor unless `value` holds only finite values (eval,
// generate and export refuse a diverged checkpoint alike).
void check_finite_weight(const std::filesystem::path& ckpt, const std::string& name, const torch::Tensor& value);
// The IoError for a tensor `name` in checkpoint `ckpt` that the model has no parameter for.
IoError unknown_checkpoint_tensor(const std::filesystem::path& ckpt, const std::string& name);

struct SplitModel {
  RunConfig config;
  Plan plan;
  GPT model{nullptr};                   // this rank's cut (of its stage's blocks, with stages)
  std::shared_ptr<ProcessGroup> group;  // every rank of the launch
  std::optional<RunMesh> mesh;          // the tensor and pipeline groups; mesh->stage: this rank's stage
};

// `ckpt`: a verified checkpoint of hwtrain's own model; `pipeline`: the stages (--pipeline).
// ConfigError naming --pipeline when it does not divide the ranks or exceeds the blocks, or when a
// stage's ranks cannot cut the model (naming the heads or vocabulary); IoError naming a tensor the
// checkpoint lacks, has in another shape, or holds non-finite values in.
// `options`: eval's --data and --set (the model's shape and the layout stay the checkpoint's and --pipeline's).
SplitModel load_split_model(const std::filesystem::path& ckpt, const DistEnv& env, int64_t pipeline = 1,
                            const ConfigOptions& options = {});

}  // namespace hwt::cli
