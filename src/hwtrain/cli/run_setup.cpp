#include "hwtrain/cli/run_setup.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/json_depth.h"
#include "hwtrain/data/default_corpus.h"
#include "hwtrain/io/checkpoint_store.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/train/lr_schedule.h"
#include "hwtrain/train/training_checkpoint.h"

namespace hwt::cli {

namespace fs = std::filesystem;

namespace {

// A new train.max_steps on resume re-fits a schedule that decays until max_steps: said once, with
// the learning rate at the checkpoint's step on both curves.
void warn_if_schedule_refits(const TrainConfig& saved, const TrainConfig& asked, const fs::path& checkpoint) {
  if (asked.max_steps == saved.max_steps || asked.lr_schedule == LrSchedule::kConstant || asked.decay_steps > 0) return;
  const int64_t step = read_checkpoint_manifest(checkpoint).step;
  log_warn("train.max_steps changes from {} to {} on resume: the {} learning-rate schedule is re-fitted to decay "
           "over {} steps instead of {}, and from the checkpoint's step {} on the LR follows the new curve "
           "({:.3g} there, {:.3g} on the old one); set train.decay_steps to keep a fixed decay",
           saved.max_steps, asked.max_steps, enum_name(asked.lr_schedule), asked.max_steps, saved.max_steps, step,
           scheduled_lr(asked, step), scheduled_lr(saved, step));
}

}  // namespace

// Defaults -> file -> overrides, or on resume the checkpoint's config -> file -> overrides.
static RunConfig read_config(const ConfigOptions& options, const std::optional<fs::path>& checkpoint) {
  std::vector<std::string> overrides = options.overrides;
  if (!options.data.empty()) overrides.push_back("data.path=" + options.data);
  if (!checkpoint) return load_run_config(options.config_file, overrides);

  RunConfig saved;
  saved.apply_toml(read_checkpoint_config(*checkpoint), (*checkpoint / "config.toml").string());
  RunConfig config = saved;
  config.explicit_keys.clear();
  // The parallel layout belongs to the launch, not to the model: checkpoints hold whole tensors, so
  // a run trained at tensor_parallel = 2 resumes on one process unless this launch asks again.
  config.dist.tensor_parallel = RunConfig{}.dist.tensor_parallel;
  config.dist.pipeline_parallel = RunConfig{}.dist.pipeline_parallel;
  config.dist.pipeline_chunks = RunConfig{}.dist.pipeline_chunks;
  for (const char* key : {"dist.tensor_parallel", "dist.pipeline_parallel", "dist.pipeline_chunks"}) {
    saved.explicit_keys.erase(key);
  }
  if (!options.config_file.empty()) config.apply_toml(read_file(options.config_file), options.config_file);
  for (const auto& o : overrides) config.apply_override(o);
  // The architecture comes from the checkpoint.
  const auto saved_model = nlohmann::json::parse(saved.to_json())["model"];
  const auto asked_model = nlohmann::json::parse(config.to_json())["model"];
  for (const auto& [name, value] : asked_model.items()) {
    if (name != "preset" && value != saved_model[name]) {
      throw ConfigError("model." + name + " cannot change when resuming from " + checkpoint->string() + " (it has " +
                        saved_model[name].dump() + ", asked " + value.dump() +
                        "): the model's shape comes from the checkpoint; start a new run to change it");
    }
  }
  config.model = saved.model;  // the preset name as well
  warn_if_schedule_refits(saved.train, config.train, *checkpoint);
  // The planner may re-decide batch geometry only if the user asks; keep the saved user choices.
  for (const auto& key : saved.explicit_keys) config.explicit_keys.insert(key);
  config.validate();
  return config;
}

RunConfig resolve_config(const ConfigOptions& options, const std::optional<fs::path>& checkpoint) {
  RunConfig config = read_config(options, checkpoint);
  for (const auto& note : config.deprecations) warn_once("deprecated " + note, note);
  for (const auto& note : config.alias_notes) log_info("{}", note);
  return config;
}

namespace {

constexpr uint64_t kMaxRunFileBytes = 1 << 20;  // a run's config.toml, a checkpoint's trainer_state.json

// Where the run in `run` keeps its checkpoints: its config.toml's checkpoint.dir where that is set
// and exists, else <run>/checkpoints (also when the config cannot be read, or the directory was
// moved home from scratch space).
fs::path checkpoints_of_run(const fs::path& run) {
  std::error_code ec;
  if (fs::is_regular_file(run / "config.toml", ec)) {
    try {
      RunConfig saved;
      saved.apply_toml(read_regular_file(run / "config.toml", kMaxRunFileBytes), (run / "config.toml").string());
      if (!saved.checkpoint.dir.empty() && fs::is_directory(saved.checkpoint.dir, ec)) return saved.checkpoint.dir;
    } catch (const std::exception&) {
    }
  }
  return run / "checkpoints";
}

// Whether `dir` looks like a checkpoint (complete or not) rather than a run directory.
bool looks_like_checkpoint(const fs::path& dir) {
  std::error_code ec;
  return checkpoint_step_from_name(dir.filename().string()).has_value() || fs::exists(dir / kCheckpointMarker, ec) ||
         fs::exists(dir / "trainer_state.json", ec) || fs::exists(dir / "model.safetensors", ec);
}

// The run directory a checkpoint's trainer_state.json names (written since checkpoints could live
// elsewhere), or empty.
fs::path recorded_run_dir(const fs::path& checkpoint) {
  try {
    const auto state = parse_json_bounded(read_regular_file(checkpoint / "trainer_state.json", kMaxRunFileBytes));
    const auto it = state.find("run_dir");
    if (it != state.end() && it->is_string() && it->get<std::string>().size() < 4096) return it->get<std::string>();
  } catch (const std::exception&) {
  }
  return {};
}

}  // namespace

fs::path default_checkpoint_dir(const std::string& out) {
  return checkpoints_of_run(out.empty() ? fs::path("runs") / "latest" : fs::path(out));
}

fs::path resolve_run_checkpoint(const std::string& spec, const std::string& out) {
  std::error_code ec;
  const fs::path p = fs::path(spec).lexically_normal();
  if (spec != "latest" && fs::is_regular_file(p / "config.toml", ec) && !looks_like_checkpoint(p)) {
    return resolve_checkpoint(checkpoints_of_run(p).string(), default_checkpoint_dir(out));  // a run directory
  }
  return resolve_checkpoint(spec, default_checkpoint_dir(out));
}

fs::path new_run_dir() {
  const fs::path dir = timestamped_path("runs");
  ensure_writable_dir(dir);
  // runs/latest -> <name>: replaced atomically by renaming a fresh link over it.
  fs::path link = fs::path("runs") / "latest";
  fs::path tmp = temp_sibling(link);
  std::error_code ec;
  fs::create_directory_symlink(dir.filename(), tmp, ec);
  if (!ec) fs::rename(tmp, link, ec);
  return dir;
}

namespace {

// The run directory a checkpoint belongs to (<run>/checkpoints/step_N -> <run>; in a checkpoint.dir
// of its own, the run its trainer_state.json names when that run's config agrees, else its parent).
fs::path run_dir_of_checkpoint(const fs::path& checkpoint) {
  const fs::path parent = fs::absolute(checkpoint).lexically_normal().parent_path();
  // The run the checkpoint names, if that run's config keeps its checkpoints where this one is (a
  // checkpoint alone cannot send the run's outputs elsewhere); else <run>/checkpoints/step_N's run.
  const fs::path run = recorded_run_dir(checkpoint);
  std::error_code ec;
  if (!run.empty() && fs::equivalent(checkpoints_of_run(run), parent, ec)) return run;
  if (parent.filename() == "checkpoints") return parent.parent_path();
  return parent;
}

// The checkpoint.dir of a run in `run_dir` resuming `checkpoint`: a checkpoint resumed into another
// run than its own leaves that run the checkpoint.dir it inherited (the checkpoint config's, not
// asked anew), and this one keeps its checkpoints at home ("": <run>/checkpoints).
std::string resumed_checkpoint_dir(const fs::path& run_dir, const fs::path& checkpoint, const RunConfig& config) {
  std::error_code ec;
  const fs::path own = recorded_run_dir(checkpoint);
  if (own.empty() || config.checkpoint.dir.empty() || fs::equivalent(own, run_dir, ec)) return config.checkpoint.dir;
  RunConfig saved;
  saved.apply_toml(read_checkpoint_config(checkpoint), (checkpoint / "config.toml").string());
  if (saved.checkpoint.dir != config.checkpoint.dir) return config.checkpoint.dir;
  log_info("checkpoint.dir {} is the checkpoints of the run {}: this run keeps its own in {} (set another "
           "checkpoint.dir to choose)", config.checkpoint.dir, own.string(), (run_dir / "checkpoints").string());
  return "";
}

}  // namespace

fs::path choose_run_dir(const std::string& out, const std::optional<fs::path>& checkpoint, RunConfig& config,
                        ProcessGroup* group) {
  fs::path run_dir;
  std::string checkpoint_dir = config.checkpoint.dir;
  if (!group || group->rank() == 0) {  // rank 0 decides both: other nodes may not see its paths
    run_dir = !out.empty() ? fs::path(out) : checkpoint ? run_dir_of_checkpoint(*checkpoint) : new_run_dir();
    ensure_writable_dir(run_dir);
    if (checkpoint) checkpoint_dir = resumed_checkpoint_dir(run_dir, *checkpoint, config);
  }
  if (group) {
    run_dir = group->share_from_rank0("run_dir", run_dir.string());
    checkpoint_dir = group->share_from_rank0("checkpoint_dir", checkpoint_dir);
  }
  config.checkpoint.dir = checkpoint_dir;
  return run_dir;
}

std::shared_ptr<const ShardedDataset> open_dataset(const RunConfig& config) {
  fs::path path = resolve_dataset(config.data);
  return std::make_shared<const ShardedDataset>(path);
}

std::shared_ptr<const ShardedDataset> open_run_dataset(const RunConfig& config, ProcessGroup* group) {
  if (!group) return open_dataset(config);
  std::shared_ptr<const ShardedDataset> data;
  if (group->rank() == 0) data = open_dataset(config);
  group->share_from_rank0("data_ready", "1", std::chrono::hours(24));
  return data ? data : open_dataset(config);
}

}  // namespace hwt::cli
