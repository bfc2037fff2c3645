// The Trainer's checkpoints: what a step's state is made of, written through CheckpointStore and
// read back for an exact resume (see training_checkpoint.h for the directory's contents).
#include <nlohmann/json.hpp>

#include <map>
#include <set>

#include "hwtrain/core/error.h"
#include "hwtrain/data/tokenizer_files.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/io/checkpoint_branch.h"
#include "hwtrain/io/checkpoint_store.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/model/deferred_init.h"
#include "hwtrain/model/rng_state.h"
#include "hwtrain/train/sharded_checkpoint.h"
#include "hwtrain/train/sharded_checkpoint_reader.h"
#include "hwtrain/train/trainer.h"
#include "hwtrain/train/trainer_state_file.h"
#include "hwtrain/train/training_checkpoint.h"

namespace hwt {

namespace fs = std::filesystem;

namespace {

// The checkpoint tensors a model split over ranks reads: those of the parameters it holds (a
// pipeline stage's; a tensor rank's whole, to cut). Every one for a whole model, whose weights
// must match the checkpoint's exactly (restore_weights).
ParameterFilter held_by(TrainableModel& model) {
  if (!model.model_parallel()) return {};
  auto names = std::make_shared<std::set<std::string>>();
  for (const auto& item : model.module().named_parameters()) names->insert(item.key());
  return [names](const std::string& name) { return names->count(name) > 0; };
}

// A ZeRO-2/3 snapshot names this rank's fp32 master shards by their place in the engine's order.
const std::string kShardPrefix = "master-shard.";

}  // namespace

// ZeRO-2/3: this rank's fp32 master shards (the weights it updates; ZeRO-3 holds no whole copy),
// local and cheap: 4 bytes per parameter / N. Otherwise the module's weights.
NamedTensors Trainer::snapshot_weights() const {
  NamedTensors out;
  if (parts_.sharding.optimizer) {
    const std::vector<torch::Tensor> shards = parts_.sharding.parameters();
    for (size_t i = 0; i < shards.size(); ++i) out.emplace_back(kShardPrefix + std::to_string(i), shards[i].detach().clone());
  } else {
    for (const auto& item : model_->module().named_parameters()) out.emplace_back(item.key(), item.value().detach().clone());
  }
  for (const auto& item : model_->module().named_buffers()) out.emplace_back(item.key(), item.value().detach().clone());
  return out;
}

// A snapshot_weights of this sharded run back into its master shards; the engine then refreshes
// (ZeRO-2) or frees (ZeRO-3) the compute copies as after a step. Whole weights cannot go there.
void Trainer::restore_master_shards(const NamedTensors& weights) {
  const std::vector<torch::Tensor> shards = parts_.sharding.parameters();
  std::map<std::string, size_t> index;  // the names snapshot_weights gives them
  for (size_t i = 0; i < shards.size(); ++i) index.emplace(kShardPrefix + std::to_string(i), i);
  std::vector<const torch::Tensor*> values(shards.size(), nullptr);
  for (const auto& [name, value] : weights) {
    if (name.rfind(kShardPrefix, 0) != 0) continue;  // a buffer: checked below
    const auto it = index.find(name);
    if (it == index.end() || !value.sizes().equals(shards[it->second].sizes())) {
      throw ConfigError("'" + name + "' is not a master shard of this rank (" + std::to_string(shards.size()) +
                        " shards): only this run's own snapshot_weights restore under dist.sharding = zero2/zero3");
    }
    values[it->second] = &value;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i]) {
      throw ConfigError("the weights to restore lack master shard " + std::to_string(i) +
                        " (dist.sharding = zero2/zero3 restores this run's own snapshot_weights)");
    }
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < shards.size(); ++i) shards[i].copy_(*values[i]);
  auto tensors = model_->module().named_buffers();
  for (const auto& [name, value] : weights) {
    if (name.rfind(kShardPrefix, 0) == 0) continue;
    torch::Tensor* b = tensors.find(name);
    if (!b || !b->sizes().equals(value.sizes())) throw ConfigError("the weights' '" + name + "' is not a buffer of this model");
    b->copy_(value);
  }
  parts_.sharding.after_step();
}

// ZeRO-2/3 of a split model: the fp32 master weights, not the compute copies (which ZeRO-3 has freed),
// on the data group's rank 0; its other ranks, which write nothing, join only the buffers over their
// model's groups. Collective.
NamedTensors Trainer::master_weights() const {
  std::map<std::string, torch::Tensor> masters;
  for (auto& [name, t] : parts_.sharding.master_weights()) masters[name] = std::move(t);
  NamedTensors out;
  for (const auto& item : model_->module().named_parameters()) {
    auto it = masters.find(item.key());
    if (it != masters.end()) out.emplace_back(item.key(), it->second.to(item.value().device()));
  }
  for (const auto& item : model_->module().named_buffers()) out.emplace_back(item.key(), item.value().detach().clone());
  return out;
}

// Every parameter and buffer by name, shapes equal, none left out (copy_ would broadcast a wrong
// shape); IoError naming the first that is not, before anything is copied.
void Trainer::check_weights_match_model(const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes) const {
  auto tensors = model_->module().named_parameters();
  for (const auto& item : model_->module().named_buffers()) tensors.insert(item.key(), item.value());
  std::set<std::string> given;
  for (const auto& [name, shape] : shapes) {
    const torch::Tensor* p = tensors.find(name);
    if (!p) throw IoError("the weights hold '" + name + "', which this model does not have");
    if (p->sizes() != c10::IntArrayRef(shape)) {
      throw IoError("the weights' '" + name + "' has shape " + c10::str(shape) + ", the model's " + c10::str(p->sizes()));
    }
    given.insert(name);
  }
  for (const auto& item : tensors) {
    if (!given.count(item.key())) throw IoError("the weights lack the model's '" + item.key() + "'");
  }
}

void Trainer::restore_weights(const NamedTensors& weights) {
  ++weight_restores_;
  if (parts_.sharding.optimizer) {
    restore_master_shards(weights);
    return;
  }
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  for (const auto& [name, value] : weights) shapes.emplace_back(name, value.sizes().vec());
  check_weights_match_model(shapes);
  torch::NoGradGuard no_grad;
  auto tensors = model_->module().named_parameters();
  for (const auto& item : model_->module().named_buffers()) tensors.insert(item.key(), item.value());
  for (const auto& [name, value] : weights) assign_parameter(tensors[name], value);  // a placeholder takes it
}

void Trainer::load_untaken_resumed_state() {
  ResumedState r = take_resumed_state();
  NamedTensors state = std::move(r.optimizer);
  if (r.shards) {
    restore_weights(model_->local_tensors(read_sharded_weights(*r.shards, held_by(*model_))));
    state = read_sharded_optimizer_state(*r.shards, held_by(*model_), !model_->model_parallel());
  }
  if (!state.empty()) optimizer_->load_state(model_->local_tensors(std::move(state)));
}

// Everything a checkpoint holds besides the weights and the optimizer's moments (rank 0).
TrainingCheckpoint Trainer::checkpoint_contents(NamedTensors optimizer_state) const {
  TrainingCheckpoint ckpt;
  ckpt.optimizer = std::move(optimizer_state);
  for (auto& t : precision_->scaler().state()) ckpt.optimizer.push_back(t);
  const RngState rng = rng_state(device_);
  ckpt.optimizer.emplace_back("rng.cpu", rng.cpu);
  if (rng.cuda.defined()) ckpt.optimizer.emplace_back("rng.cuda", rng.cuda);
  const DataIdentity data = data_->identity();
  ckpt.state = {{"format_version", 1},
                {"step", step_},
                {"tokens_seen", tokens_seen_},
                {"elapsed_seconds", elapsed_seconds()},
                {"loader", batches_->state().to_json()},
                {"lr_scale", lr_scale_},
                {"precision", precision_->status().to_json()},
                {"micro_batch_size", micro_batch_size_},
                {"grad_accum_steps", grad_accum_steps_},
                {"world_size", world_size_},
                {"dataset", {{"tokenizer", data.tokenizer}, {"vocab_size", data.vocab_size}, {"fingerprint", data.fingerprint}}}};
  nlohmann::json callbacks = nlohmann::json::object();
  for (const auto& [name, values] : callbacks_.states()) callbacks[name] = values;
  ckpt.state["callbacks"] = std::move(callbacks);
  if (!run_dir_.empty()) ckpt.state["run_dir"] = fs::absolute(run_dir_).lexically_normal().string();  // resume finds it
  ckpt.model_format = model_->checkpoint_format();
  ckpt.config_toml = options_.config_toml;
  ckpt.plan_json = plan_.to_json();
  return ckpt;
}

// Writes `ckpt` (and `also`, into the staging directory) as the checkpoint of this step (rank 0).
fs::path Trainer::checkpoint_dir() const {
  return options_.checkpoint.dir.empty() ? run_dir_ / "checkpoints" : fs::path(options_.checkpoint.dir);
}

// A checkpoint of this run's own directory resumed: the ones saved after it are another history's,
// set aside when this run saves its first (so that a run failing before then leaves them as they were).
void Trainer::set_aside_later_checkpoints() {
  if (!branched_at_) return;
  const int64_t step = *std::exchange(branched_at_, std::nullopt);
  if (const auto aside = set_aside_checkpoints_after(checkpoint_dir(), step)) {
    std::vector<std::string> names;
    for (const fs::path& p : aside->moved) names.push_back(p.string());
    log_warn("resuming from step {}: the checkpoints saved after it ({}) belong to the history this run replaces; "
             "moved to {} so that 'latest' and pruning see this run's",
             step, join(names), aside->folder.string());
  }
}

fs::path Trainer::store_checkpoint(const TrainingCheckpoint& ckpt, const std::function<void(const fs::path&)>& also) {
  set_aside_later_checkpoints();
  CheckpointStore store(checkpoint_dir(), options_.checkpoint.keep_last);
  fs::path written = store.save(step_, [&](const fs::path& staging) {
    write_training_checkpoint(staging, ckpt);
    if (tokenizer_) save_tokenizer(*tokenizer_, staging);  // tokenizer.json (+ tokenizer.model)
    if (also) also(staging);
  });
  last_checkpoint_ = written;
  callbacks_.checkpoint(*this, written);
  return written;
}

fs::path Trainer::save_checkpoint() {
  const fs::path written = parts_.sharding.local_weights ? save_sharded_checkpoint() : save_whole_checkpoint();
  if (saved_everywhere_) saved_everywhere_();
  return written;
}

fs::path Trainer::save_whole_checkpoint() {
  // A split model's checkpoint joins whole tensors: 8-bit moments as their fp32 values (the cuts
  // quantize other blocks than the whole tensor would), quantized again when a run loads them.
  NamedTensors optimizer_state = optimizer_->state(/*fp32_moments=*/model_->model_parallel());
  if (parts_.sharding.gather) optimizer_state = parts_.sharding.gather(optimizer_state);  // collective: every rank
  // Tensor parallel: whole tensors from the shards, collective over the model's group.
  optimizer_state = model_->whole_tensors(std::move(optimizer_state));
  NamedTensors weights = parts_.sharding.master_weights ? master_weights() : snapshot_weights();
  weights = model_->whole_tensors(std::move(weights));
  if (rank_ != 0 || !model_->checkpoint_writer()) return {};
  TrainingCheckpoint ckpt = checkpoint_contents(std::move(optimizer_state));
  ckpt.model = std::move(weights);
  return store_checkpoint(ckpt, {});
}

// ZeRO-2/3: every rank writes its shard into rank 0's staging directory (train/sharded_checkpoint.h);
// rank 0 returns once all are written and the checkpoint is complete, the others after the barrier.
fs::path Trainer::save_sharded_checkpoint() {
  const OptimizerSharding& s = parts_.sharding;
  const NamedTensors weights = s.local_weights(), state = optimizer_->state();
  const std::string key = "checkpoint-" + std::to_string(++sharded_saves_);  // the same sequence on every rank
  if (rank_ != 0) {
    const fs::path staging = s.share_from_rank0(key, "");
    write_checkpoint_shard(staging, rank_, world_size_, weights, state);
    s.barrier("writing the checkpoint's shards");
    return {};
  }
  TrainingCheckpoint ckpt = checkpoint_contents({});
  ckpt.shard_world_size = world_size_;
  for (const auto& item : model_->module().named_parameters()) ckpt.shard_shapes.emplace_back(item.key(), item.value().sizes().vec());
  return store_checkpoint(ckpt, [&](const fs::path& staging) {
    s.share_from_rank0(key, staging.string());
    write_checkpoint_shard(staging, 0, world_size_, weights, state);
    s.barrier("writing the checkpoint's shards");
    for (int r = 0; r < world_size_; ++r) {  // every rank's shard, before COMPLETE seals the checkpoint
      if (!fs::is_regular_file(staging / shard_file_name(r, world_size_))) {
        throw IoError("checkpoint " + staging.string() + ": rank " + std::to_string(r) + "'s shard " +
                      shard_file_name(r, world_size_) + " is missing after every rank reported it written (the "
                      "checkpoint directory must be on a file system every rank shares)");
      }
    }
  });
}

void Trainer::resume_from(const fs::path& checkpoint) { resume_from(read_training_checkpoint(checkpoint), checkpoint); }

// The checkpoint's split of its rows per step and rank (an OOM retry halves the micro-batch and
// doubles the accumulation); the loader draws this plan's rows, which must be as many.
void Trainer::restore_batch_split(const TrainerStateFile& s, const fs::path& checkpoint) {
  if (s.micro_batch_size * s.grad_accum_steps != micro_batch_size_ * grad_accum_steps_) {
    throw ConfigError("checkpoint " + checkpoint.string() + " trains " + std::to_string(s.micro_batch_size) + " x " +
                      std::to_string(s.grad_accum_steps) + " rows per step and rank (train.micro_batch_size x " +
                      "train.grad_accum_steps), this run plans " + std::to_string(micro_batch_size_) + " x " +
                      std::to_string(grad_accum_steps_) + "; set train.micro_batch_size = " +
                      std::to_string(s.micro_batch_size) + " and train.grad_accum_steps = " +
                      std::to_string(s.grad_accum_steps) + " to continue it");
  }
  micro_batch_size_ = s.micro_batch_size;
  grad_accum_steps_ = s.grad_accum_steps;
}

void Trainer::resume_from(const TrainingCheckpoint& ckpt, const fs::path& checkpoint) {
  const TrainerStateFile s = parse_trainer_state(ckpt.state, checkpoint / "trainer_state.json");
  if (ckpt.model_format != model_->checkpoint_format()) {
    throw IoError("checkpoint " + checkpoint.string() + " holds a '" + ckpt.model_format + "' model, this run trains a '" +
                  model_->checkpoint_format() + "' one; resume it with the model it was trained with");
  }
  const DataIdentity data = data_->identity();
  if (s.dataset_tokenizer != data.tokenizer || s.dataset_vocab_size != data.vocab_size) {
    throw DataError("checkpoint " + checkpoint.string() + " was trained with tokenizer '" + s.dataset_tokenizer +
                    "' (vocabulary " + std::to_string(s.dataset_vocab_size) + ") but the dataset uses '" +
                    data.tokenizer + "' (vocabulary " + std::to_string(data.vocab_size) +
                    "); prepare the data with the checkpoint's tokenizer");
  }
  if (s.dataset_fingerprint != data.fingerprint) {
    warn_once("resume-dataset", "resuming on a dataset other than the checkpoint's (fingerprint differs)");
  }
  const bool sharded_plan = plan_.sharding == Sharding::Zero2 || plan_.sharding == Sharding::Zero3;
  // Each rank reads its own segments (shard_training) when its tensors are the checkpoint's: not
  // those of a model split over ranks, which cuts the whole tensors to its own.
  const bool own_segments = ckpt.shards && sharded_plan && !model_->model_parallel();
  if (own_segments) {
    check_weights_match_model(ckpt.shards->parameters());  // the weights come with the state: shard_training
  } else {
    // A split model reads its own tensors only, whole, and cuts them (tensor parallel).
    NamedTensors weights = ckpt.shards ? read_sharded_weights(*ckpt.shards, held_by(*model_)) : ckpt.model;
    if (ckpt.shards && model_->model_parallel()) {
      logger().info("read the weights of {} of the checkpoint's {} parameters (this rank's)", weights.size(),
                    ckpt.shards->parameters().size());  // every rank says what it read
    }
    restore_weights(model_->local_tensors(std::move(weights)));
  }
  NamedTensors opt, scaler;
  RngState rng;  // a CUDA run's "rng.cuda" applies only when this run trains on CUDA too
  for (const auto& [name, t] : ckpt.optimizer) {
    if (name.rfind("scaler.", 0) == 0) scaler.emplace_back(name, t);
    else if (name == "rng.cpu") rng.cpu = t;
    else if (name == "rng.cuda") rng.cuda = t;
    else opt.emplace_back(name, t);
  }
  if (own_segments) {
    resumed_ = ResumedState{{}, ckpt.shards};  // read from the shard files by shard_training
    opt.clear();
  } else if (ckpt.shards) {
    // A split model cuts whole tensors: 8-bit moments dequantized; whole tensors load them as stored.
    for (auto& entry : read_sharded_optimizer_state(*ckpt.shards, held_by(*model_), !model_->model_parallel())) {
      opt.push_back(std::move(entry));
    }
  }
  if (!own_segments && sharded_plan) {  // cut to the shards by shard_training
    resumed_ = ResumedState{model_->local_tensors(std::move(opt)), nullptr};
  } else if (!own_segments) {
    optimizer_->load_state(model_->local_tensors(std::move(opt)));
  }
  if (!s.precision_fallback_reason.empty()) precision_->fall_back("as before the checkpoint: " + s.precision_fallback_reason);
  precision_->scaler().load_state(scaler);
  set_rng_state(rng, device_);
  step_ = s.step;
  tokens_seen_ = s.tokens_seen;
  elapsed_before_ = s.elapsed_seconds;
  if (s.loader) {
    batches_->restore(*s.loader);
  } else {  // checkpoints of the WindowSampler era: a count of windows drawn, same random stream
    batches_->restore({static_cast<uint64_t>(options_.train.seed), 0, s.sampler_position});
  }
  lr_scale_ = s.lr_scale;
  resumed_callbacks_ = s.callbacks;  // handed to the callbacks once fit() has begun them
  if (s.world_size == world_size_) restore_batch_split(s, checkpoint);
  if (optimizer_in_backward() && grad_accum_steps_ != 1) {  // e.g. a run that recovered from an OOM by accumulating
    throw ConfigError("checkpoint " + checkpoint.string() + " trains " + std::to_string(grad_accum_steps_) +
                      " micro-batches of " + std::to_string(micro_batch_size_) +
                      " per step, but optimization.optimizer_in_backward = true takes one; resume with it false");
  }
  std::error_code ec;  // a checkpoint of this run's own directory: a new history starts at it
  const fs::path resumed_dir = fs::absolute(checkpoint, ec).lexically_normal().parent_path();
  if (fs::equivalent(resumed_dir, checkpoint_dir(), ec)) branched_at_ = step_;
  log_info("resumed from {} at step {}", checkpoint.string(), step_);
}

}  // namespace hwt
