#include "hwtrain/train/model_checkpoint.h"

#include <cmath>
#include <utility>

#include <unistd.h>

#include "hwtrain/core/error.h"
#include "hwtrain/core/option_checks.h"
#include "hwtrain/core/files.h"
#include "hwtrain/io/checkpoint_store.h"
#include "hwtrain/obs/log.h"

namespace hwt {

namespace fs = std::filesystem;

ModelCheckpointOptions checkpoint_options(const CheckpointConfig& config) {
  ModelCheckpointOptions o;
  o.every_steps = config.interval;
  o.every_minutes = config.every_minutes;
  o.save_final = config.save_final;
  o.monitor = config.monitor;
  o.mode = config.mode;
  return o;
}

ModelCheckpoint::ModelCheckpoint(ModelCheckpointOptions options, std::function<bool(bool)> agree)
    : options_(std::move(options)), agree_(std::move(agree)) {
  const MetricGoal mode = options_.mode;
  if (options_.every_steps < 0) {
    throw ConfigError("config: checkpoint.interval = " + std::to_string(options_.every_steps) + " must be >= 0");
  }
  if (!(options_.every_minutes >= 0)) {
    throw ConfigError("config: checkpoint.every_minutes = " + option_text(options_.every_minutes) +
                      " must be >= 0 (0 = off)");
  }
  if (!options_.monitor.empty()) watch_.emplace(options_.monitor, mode, 0.0, "checkpoint.monitor");
}

void ModelCheckpoint::on_train_begin(TrainerControl& t) { last_save_time_ = t.elapsed_seconds(); }

CallbackState ModelCheckpoint::state() const {
  CallbackState s;
  if (watch_) watch_->save_state(s);
  return s;
}

void ModelCheckpoint::load_state(const CallbackState& s) {
  if (watch_) watch_->load_state(s);
}

fs::path ModelCheckpoint::save(TrainerControl& t) {
  if (last_saved_step_ == t.step()) return last_saved_path_;
  last_saved_path_ = t.save_checkpoint();
  last_saved_step_ = t.step();
  if (!std::exchange(best_copy_checked_, true)) restore_best_copy(last_saved_path_);
  last_save_time_ = t.elapsed_seconds();
  if (!last_saved_path_.empty()) log_info("checkpoint: {}", last_saved_path_.string());
  return last_saved_path_;
}

void ModelCheckpoint::keep_as_best(const fs::path& checkpoint) {
  if (checkpoint.empty()) return;  // ranks other than 0 write no checkpoints
  try {
    best_path_ = link_checkpoint_as(checkpoint, "best_" + options_.monitor);
    log_info("checkpoint: best {} = {:.6g} at step {} -> {}", options_.monitor, watch_->best().value_or(kUnknown),
             watch_->best_step(), best_path_.string());
  } catch (const std::exception& e) {
    log_warn("checkpoint: could not keep {} as the best checkpoint: {}", checkpoint.string(), e.what());
  }
}

// A resume from an earlier checkpoint sets the later history aside with its best_<metric> copy
// (io/checkpoint_branch.h) while the best restored with the state is older: its step's checkpoint,
// if the store still keeps it, becomes the copy again (else the next improvement makes one).
void ModelCheckpoint::restore_best_copy(const fs::path& saved) {
  if (saved.empty() || !watch_ || !watch_->best() || watch_->best_step() < 0) return;
  if (watch_->best_step() == last_saved_step_) return;  // this save's own improvement: keep_as_best links it
  std::error_code ec;
  const fs::path dir = saved.parent_path();
  if (fs::exists(dir / ("best_" + options_.monitor), ec)) return;
  const fs::path kept = dir / checkpoint_name_of_step(watch_->best_step());
  if (!fs::is_regular_file(kept / kCheckpointMarker, ec)) {
    log_info("checkpoint: no best_{} copy: step {} (its {} = {:.6g}) is no longer kept; the next improvement "
             "makes one", options_.monitor, watch_->best_step(), options_.monitor, *watch_->best());
    return;
  }
  keep_as_best(kept);
}

void ModelCheckpoint::on_step_end(TrainerControl& t, const StepMetrics& m) {
  // The same on every rank (the loss is shared). A step whose update the loss scaler skipped kept
  // the weights it had, so its non-finite loss does not make them suspect.
  const bool update_skipped = m.skipped_steps > skipped_so_far_;
  if (m.skipped_steps >= 0) skipped_so_far_ = m.skipped_steps;
  last_loss_finite_ = std::isfinite(m.loss) || update_skipped;
  bool due = options_.every_steps > 0 && t.step() % options_.every_steps == 0;
  if (options_.every_minutes > 0) {
    bool time_due = t.elapsed_seconds() - last_save_time_ >= 60.0 * options_.every_minutes;
    if (agree_) time_due = agree_(time_due);  // every rank calls it every step
    due = due || time_due;
  }
  if (!due) return;
  bool improved = false;  // compared before the save, so that the checkpoint's state holds this step
  if (watch_ && !watch_->watches_evaluations() && last_loss_finite_) {
    const auto v = watch_->value_in(m);
    improved = v && watch_->update(*v, m.step);
  }
  if (t.evaluates_at(t.step())) {  // the evaluation that follows (its bests, an LR cut) is in this step's checkpoint
    pending_ = Pending{true, improved};
    return;
  }
  save_now(t, improved);
}

void ModelCheckpoint::on_evaluation_end(TrainerControl& t, const EvalMetrics& m) {
  const Pending pending = std::exchange(pending_, {});
  bool improved = pending.improved;
  if (watch_ && watch_->watches_evaluations()) {
    const auto v = watch_->value_in(m);
    improved = v && watch_->update(*v, m.step);
  }
  if (pending.save || improved) save_now(t, improved);
}

void ModelCheckpoint::save_now(TrainerControl& t, bool keep_best) {
  if (!last_loss_finite_) {  // its weights may be NaN: the checkpoints saved before stay, none rotated out
    log_warn("checkpoint: step {} not saved: its loss is not finite", t.step());
    return;
  }
  const fs::path path = save(t);
  if (keep_best) keep_as_best(path);
}

void ModelCheckpoint::on_train_end(TrainerControl& t) {
  if (!options_.save_final) return;
  if (!last_loss_finite_) {
    log_warn("checkpoint: the final step {} not saved: its loss is not finite", t.step());
    return;
  }
  save(t);
}

fs::path link_checkpoint_as(const fs::path& checkpoint, const std::string& name) {
  const fs::path dir = checkpoint.parent_path();
  const fs::path target = dir / name;
  // The prefixes and pid suffix of CheckpointStore's leftovers, so its cleanup handles a crash here.
  const std::string suffix = "-" + std::to_string(::getpid());
  const fs::path staging = dir / (".tmp-" + name + suffix);
  std::error_code ec;
  fs::remove_all(staging, ec);
  try {
    fs::create_directory(staging);
    for (const auto& entry : fs::recursive_directory_iterator(checkpoint)) {
      const fs::path to = staging / entry.path().lexically_relative(checkpoint);
      if (entry.is_directory()) {
        fs::create_directories(to);
        continue;
      }
      // Checkpoint files are never modified in place (each save writes new files), so sharing
      // their inodes is safe; a copy is the fallback on filesystems without hard links.
      fs::create_hard_link(entry.path(), to, ec);
      if (ec) fs::copy_file(entry.path(), to);
    }
    fsync_path(staging);
    if (fs::exists(target)) {
      const fs::path aside = dir / (".old-" + name + suffix);
      fs::remove_all(aside, ec);
      rename_durable(target, aside);
      rename_durable(staging, target);
      fs::remove_all(aside, ec);
    } else {
      rename_durable(staging, target);
    }
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(staging, ec);
    throw IoError("cannot keep checkpoint " + checkpoint.string() + " as " + target.string() + ": " + e.what());
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
  return target;
}

void TimeBudgetStopper::on_step_end(TrainerControl& t, const StepMetrics&) {
  if (seconds_ <= 0) return;
  bool over = t.elapsed_seconds() >= seconds_;
  if (agree_) over = agree_(over);
  if (over) {
    t.request_stop("time budget of " + option_text(seconds_) + " s reached");  // 0.5 s, not "0 s"
  }
}

}  // namespace hwt
