// `hwtrain train`: config + hardware -> plan -> model and data -> trainer -> sample and checkpoint.
#include <iostream>

#include "hwtrain/cli/commands.h"
#include "hwtrain/cli/parallel_setup.h"
#include "hwtrain/cli/run_dir.h"
#include "hwtrain/cli/run_setup.h"
#include "hwtrain/cli/train_run.h"
#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/data/tokenizer.h"
#include "hwtrain/data/tokenizer_files.h"
#include "hwtrain/dist/ddp.h"
#include "hwtrain/dist/sharded_parameters.h"
#include "hwtrain/dist/dist_env.h"
#include "hwtrain/dist/process_group.h"
#include "hwtrain/hw/hardware_profile.h"
#include "hwtrain/interop/hf_directory.h"
#include "hwtrain/interop/hf_weights.h"
#include "hwtrain/model/gpt_model.h"
#include "hwtrain/train/training_data.h"
#include "hwtrain/run/run_bindings.h"
#include "hwtrain/io/checkpoint_store.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/obs/memory_meter.h"
#include "hwtrain/obs/profile_report.h"
#include "hwtrain/run/hardware_aware_optimizer.h"
#include "hwtrain/run/configured_callbacks.h"
#include "hwtrain/train/interrupt.h"
#include "hwtrain/train/metrics_logger.h"
#include "hwtrain/train/model_checkpoint.h"
#include "hwtrain/train/sharded_training.h"
#include "hwtrain/train/trainer.h"

namespace hwt::cli {

namespace fs = std::filesystem;

namespace {

// The run's sample (train.sample_tokens) from the trained model, with the tokenizer it trained with:
// GPT::generate, or GptStage::generate on a pipeline stage (every rank of the model-parallel group
// calls it: the model decodes split).
std::string sample_text(GPT& model, GptStage* stage, const RunConfig& config, const Trainer& trainer,
                        const ShardedDataset& data, torch::Device device) {
  std::unique_ptr<Tokenizer> loaded;  // the trainer has it already unless its files were unreadable
  const Tokenizer* tokenizer = trainer.tokenizer();
  if (!tokenizer) tokenizer = (loaded = dataset_tokenizer(data, config.data.tokenizer)).get();
  std::vector<int32_t> prompt = tokenizer->encode(config.train.sample_prompt);
  if (prompt.empty()) prompt.push_back(tokenizer->eot_id());
  auto idx = torch::tensor(std::vector<int64_t>(prompt.begin(), prompt.end()), torch::kInt64).unsqueeze(0).to(device);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(config.train.seed));
  const TrainConfig& t = config.train;
  auto out = stage ? stage->generate(idx, t.sample_tokens, t.sample_temperature, t.sample_top_k, gen)
                   : model->generate(idx, t.sample_tokens, t.sample_temperature, t.sample_top_k, gen);
  auto ids_tensor = out[0].to(torch::kCPU).to(torch::kInt32).contiguous();
  std::vector<int32_t> ids(ids_tensor.data_ptr<int32_t>(), ids_tensor.data_ptr<int32_t>() + ids_tensor.numel());
  return tokenizer->decode(ids);
}

// The sample before the group shuts down: ZeRO-3 gathers its units first (collective). A tensor- or
// pipeline-parallel model decodes split, every rank of every replica at once, so that no rank holds
// the whole model. Empty for a whole model: rank 0 decodes it alone, once the others have left.
std::string split_sample(GPT& model, const RunMesh& mesh, const DataParallelParts& parallel, const RunConfig& config,
                         const Trainer& trainer, const ShardedDataset& data, torch::Device device) {
  if (parallel.sharded) parallel.sharded->gather_all();
  if (!mesh.model_parallel()) return "";
  std::string text = sample_text(model, mesh.stage.get(), config, trainer, data, device);
  int64_t held = 0;
  for (const auto& p : (mesh.stage ? mesh.stage->module() : *model).parameters()) held += p.numel();
  log_info("sample: decoded with the model split ({}), this rank holding {} of its {} parameters", mesh.mesh.describe(),
           held, GPTImpl::count_parameters(config.model, config.model.vocab_size, false));
  return text;
}

// What observing the run cost it: the callbacks' time on the training thread (metric sinks,
// progress, report, checkpoints) and the monitor thread's CPU time, as a share of the run.
std::string describe_callback_cost(const CallbackList& callbacks, double monitor_cpu_seconds, double run_seconds) {
  double total = 0;
  std::string parts;
  for (size_t i = 0; i < callbacks.all().size(); ++i) {
    total += callbacks.seconds()[i];
    parts += (parts.empty() ? "" : ", ") + callbacks.all()[i]->name() + " " + fmt::format("{:.3f} s", callbacks.seconds()[i]);
  }
  const double share = run_seconds > 0 ? 100.0 * (total + monitor_cpu_seconds) / run_seconds : 0.0;
  return fmt::format("callbacks: {:.3f} s on the training thread ({}); monitor thread {:.3f} s CPU; "
                     "together {:.2f}% of the {:.0f} s run",
                     total, parts, monitor_cpu_seconds, share, run_seconds);
}

// Joins the run's process group on the device the planner chooses (NCCL for CUDA, Gloo otherwise).
std::shared_ptr<ProcessGroup> join_group(const DistEnv& env, const RunConfig& config, const PlanContext& context) {
  DetectOptions quick;
  quick.run_gemm_benchmark = false;
  const torch::Device device = plan_device(detect_hardware(quick), config, context);
  return std::make_shared<ProcessGroup>(env, config.dist, rank_device(env, device));
}

// The hardware every rank plans from. Distributed, rank 0 alone probes it and the others take its
// profile: ranks probing at once on shared cores measured each other and planned differently
// (issue 19, defect 6). The plans are then compared like the config (plan_fingerprint).
HardwareProfile run_hardware(ProcessGroup* group) {
  if (!group) return detect_hardware();
  std::string json;
  if (group->rank() == 0) json = to_json(detect_hardware()).dump();
  json = group->share_from_rank0("hardware", json);
  return hardware_from_json(nlohmann::json::parse(json), "rank 0's hardware profile");
}

// The plan as every rank must have it: all of plan.json but the device index (each rank its GPU).
std::string plan_fingerprint(const Plan& plan) {
  nlohmann::json j = nlohmann::json::parse(plan.to_json());
  j["device"] = c10::DeviceTypeName(plan.device.type(), /*lower_case=*/true);
  return j.dump(1);  // a line per value: a mismatch names the first differing one
}

// Every rank runs the same config, dataset, resume point and plan (ProcessGroup::check_consistency).
void check_ranks_agree(ProcessGroup& group, const RunConfig& config, const ShardedDataset& data,
                       const std::optional<fs::path>& checkpoint, const Plan& plan) {
  group.check_consistency(config.to_toml() + "\ndataset " + std::to_string(data.fingerprint()) + "\nresume " +
                          (checkpoint ? checkpoint->string() : std::string("no")) + "\nplan " + plan_fingerprint(plan));
}

// ConfigError unless train.max_steps goes past the resumed checkpoint's step (nothing to train).
void check_steps_left(const TrainingCheckpoint& resumed, const fs::path& checkpoint, int64_t max_steps) {
  if (!resumed.state.contains("step") || !resumed.state["step"].is_number_integer()) return;
  const int64_t done = resumed.state["step"].get<int64_t>();  // read and bounded with the checkpoint
  if (max_steps > done) return;
  throw ConfigError("train.max_steps = " + std::to_string(max_steps) + " is not past step " + std::to_string(done) +
                    " of the checkpoint " + checkpoint.string() + ": nothing to train; valid: more than " +
                    std::to_string(done));
}

// config.toml, plan.json and the hardware files of the run directory (rank 0), replacing an old
// run's outputs first under --overwrite: as late as possible, so a config or data error keeps it.
void write_run_files(const fs::path& run_dir, const RunConfig& config, const HardwareAwareOptimizer& optimizer,
                     bool overwrite) {
  if (overwrite) {
    const auto removed = clear_run_outputs(run_dir);
    if (!removed.empty()) log_warn("--overwrite: removed the old run's {} from {}", join(removed), run_dir.string());
  }
  write_file_atomic(run_dir / "config.toml", config.to_toml());
  write_file_atomic(run_dir / "plan.json", optimizer.plan().to_json());
  write_file_atomic(run_dir / "hardware.txt", optimizer.get_hardware_summary());
  write_file_atomic(run_dir / "hardware.json", to_json(optimizer.hardware()).dump(2));
}

// The time budget, the configured callbacks (early stopping, LR on plateau...) and checkpoints;
// distributed, the ranks agree on when the budget is spent and when to checkpoint.
void add_stopping_and_checkpoints(Trainer& trainer, const RunConfig& config, const std::shared_ptr<ProcessGroup>& group,
                                  const std::vector<std::shared_ptr<Callback>>& configured_callbacks) {
  std::function<bool(bool)> agree;
  if (group) agree = [group](bool over) { return group->any_rank(over, "agreeing on the time budget"); };
  trainer.add_callback(std::make_shared<TimeBudgetStopper>(config.train.time_budget, agree));
  for (auto& c : configured_callbacks) trainer.add_callback(c);
  trainer.add_callback(std::make_shared<ModelCheckpoint>(checkpoint_options(config.checkpoint), agree));
}

void log_run_end(const TrainResult& result, const HardwareAwareOptimizer& optimizer, Trainer& trainer,
                 const MetricsLogger& metrics_logger, const DataParallel* data_parallel,
                 const ShardedParameters* sharded) {
  log_info("stopped after {} steps ({}): loss {:.4f}, val_loss {:.4f}, {:.0f} s", result.steps, result.stop_reason,
           result.final_loss, result.final_val_loss, result.elapsed_seconds);
  log_info("measured: {}", optimizer.get_optimization_metrics()["measured"].dump());
  log_info("{}", describe_callback_cost(trainer.callbacks(), metrics_logger.monitor_cpu_seconds(),
                                        result.elapsed_seconds));
  if (data_parallel) {
    const CommStats& c = data_parallel->total_stats();
    log_info("all-reduce: {} buckets, {} in {} syncs; {:.2f} s in flight, {:.0f}% of it hidden behind backward",
             c.buckets, format_bytes(static_cast<double>(c.bytes)), c.syncs, c.comm_seconds, 100.0 * c.hidden_share());
  }
  if (sharded) {
    const ShardingStats& s = sharded->stats();
    log_info("{}: {} all-gathers ({}), {} reduce-scatters ({}); {:.2f} s in flight, {:.0f}% of it hidden behind "
             "compute; this rank holds master shards {}, optimizer state {}, at most {} of gathered parameters",
             shard_stage_name(sharded->stage()), s.all_gathers, format_bytes(static_cast<double>(s.gathered_bytes)),
             s.reduce_scatters, format_bytes(static_cast<double>(s.reduced_bytes)), s.comm_seconds,
             100.0 * s.hidden_share(), format_bytes(static_cast<double>(sharded->master_bytes())),
             format_bytes(static_cast<double>(trainer.optimizer().state_bytes())),
             format_bytes(static_cast<double>(s.peak_gathered_bytes)));
  }
  if (optimizer.plan().optimizer_state_device == StateDevice::Host) {
    log_info("offloaded optimizer on rank 0: {} in host memory (moments, fp32 masters, gradient staging), {} with "
             "the parameters", format_bytes(static_cast<double>(trainer.optimizer().host_state_bytes())),
             format_bytes(static_cast<double>(trainer.optimizer().device_state_bytes())));
  }
}

// --init-from DIR: the model from DIR/config.json (block_size and dropout kept; model keys set would contradict
// it), and unless data.tokenizer is set, DIR's tokenizer: its embeddings are indexed by that tokenizer's ids.
void import_model_config(const TrainArgs& a, RunConfig& config, bool resuming) {
  if (resuming) throw ConfigError("--init-from starts a run from a model directory; --resume continues one: use one");
  for (const auto& key : hf_config_model_keys()) {
    if (config.is_set(key) || config.is_set("model.preset")) {
      throw ConfigError("--init-from " + a.init_from + " takes the model's shape from its config.json; drop " +
                        (config.is_set("model.preset") ? std::string("model.preset") : key));
    }
  }
  config.model = read_hf_model_config(a.init_from, config.model);
  if (!config.is_set("data.tokenizer") && holds_tokenizer(a.init_from)) config.data.tokenizer = a.init_from;
}

// The planned model, started from a Hugging Face directory's weights when --init-from names one.
GPT build_run_model(const HardwareAwareOptimizer& optimizer, const std::string& init_from) {
  GPT model = optimizer.build_model();
  if (!init_from.empty()) {
    load_hf_directory_weights(model, init_from);
    log_info("weights: {} (Hugging Face directory)", init_from);
  }
  log_info("model: {} parameters ({} without position embeddings)", model->num_parameters(false),
           model->num_parameters(true));
  return model;
}

// The trainer made ready to fit: the checkpoint restored (its tensors released here, or kept for
// the shards), the micro-batch probed, data parallelism and the ranks' stop agreement attached.
DataParallelParts prepare_trainer(Trainer& trainer, std::optional<TrainingCheckpoint>& resumed,
                                  const std::optional<fs::path>& checkpoint, const RunMesh& mesh,
                                  const RunConfig& config, const Plan& plan, const std::shared_ptr<ProcessGroup>& group) {
  if (checkpoint) {
    trainer.resume_from(*resumed, *checkpoint);
    resumed.reset();  // the tensors are in the model and optimizer now (or the shard reader is the trainer's)
  }
  // Probe steps run before gradient sync is attached; each rank measures its own memory (ranks
  // that choose differently still issue the same collectives: one reduction per step).
  if (plan.auto_batch_size && !checkpoint) trainer.probe_micro_batch();
  DataParallelParts parallel;
  if (mesh.data) parallel = attach_data_parallel(trainer, mesh.data, config.dist, plan);
  if (group) {  // a stop (Ctrl-C, a callback) ends every rank at the same step, every replica and stage
    trainer.set_stop_agreement([group](bool stop) { return group->any_rank(stop, "agreeing on stopping"); });
    auto saves = std::make_shared<int64_t>(0);  // the same sequence on every rank
    trainer.set_save_agreement([group, saves] {
      group->share_from_rank0("checkpoint-sealed-" + std::to_string(++*saves), "1", std::chrono::hours(24));
    });
  }
  return parallel;
}

}  // namespace

int run_train(const TrainArgs& a) {
  const DistEnv env = read_dist_env();
  const bool rank0 = env.rank == 0;
  init_logging(env.distributed() ? env.rank : -1);
  std::optional<fs::path> checkpoint;
  if (!a.resume.empty()) checkpoint = resolve_run_checkpoint(a.resume, a.out);
  if (rank0 && !a.out.empty()) check_out_dir(a.out, checkpoint, a.overwrite);  // before any work
  // Verified (as eval and generate do; tensor files' checksums when first read) and range-checked.
  std::optional<TrainingCheckpoint> resumed;
  if (checkpoint) resumed = read_training_checkpoint(*checkpoint);
  ConfigOptions config_options = a.config;
  if (!a.profile_steps.empty()) config_options.overrides.push_back("log.profile_steps=" + a.profile_steps);
  RunConfig config = resolve_config(config_options, checkpoint);
  if (!a.init_from.empty()) import_model_config(a, config, checkpoint.has_value());
  if (resumed) check_steps_left(*resumed, *checkpoint, config.train.max_steps);  // before anything is written
  const std::optional<DeviceMesh> fixed_mesh = run_mesh_shape(config, env.world_size);  // empty: "auto"
  const PlanContext context = mesh_plan_context(fixed_mesh, env);
  std::shared_ptr<ProcessGroup> group;
  if (env.distributed()) group = join_group(env, config, context);
  // Rank 0 chooses the run directory (and prepares the data) first; the others follow it.
  const fs::path run_dir = choose_run_dir(a.out, checkpoint, config, group.get());

  log_info("hwtrain {} | LibTorch {} | run directory {}", HWTRAIN_VERSION, TORCH_VERSION, run_dir.string());
  std::shared_ptr<const ShardedDataset> data = open_run_dataset(config, group.get());
  config.model.vocab_size = resolve_vocab_size(config.model, data->vocab_size());
  config.validate();
  // Config errors before training.
  auto configured_callbacks = make_configured_callbacks(config, env.rank, env.world_size);
  log_info("resolved config:\n{}", config.to_toml());
  log_info("data: {} ({} train / {} validation tokens, tokenizer {})", data->path().string(),
           data->num_train_tokens(), data->num_val_tokens(), data->tokenizer_name());

  HardwareAwareOptimizer optimizer(config, run_hardware(group.get()), context);
  if (group) check_ranks_agree(*group, config, *data, checkpoint, optimizer.plan());
  const DeviceMesh mesh_shape = planned_mesh_shape(fixed_mesh, config, optimizer.plan(), env.world_size);
  const int64_t pipeline_chunks = planned_pipeline_chunks(config, optimizer.plan());
  check_plan_for_mesh(mesh_shape, optimizer.plan(), pipeline_chunks);
  check_sharding_for_mesh(mesh_shape, optimizer.plan(), config);
  log_info("hardware:\n{}", optimizer.get_hardware_summary());
  log_info("plan:\n{}", optimizer.get_optimization_summary());
  if (rank0) write_run_files(run_dir, config, optimizer, a.overwrite);

  GPT model = build_run_model(optimizer, a.init_from);
  const RunMesh mesh = join_mesh(mesh_shape, group, model, config.dist.sequence_parallel,  // TP: the layers cut to
                                 pipeline_chunks);                                       // this rank's shard
  const Sharding sharding = optimizer.plan().sharding;
  if (sharding != Sharding::Zero2 && sharding != Sharding::Zero3) model->materialize_parameters();  // no engine fills it
  const std::shared_ptr<TrainableModel> trained =  // a pipeline stage, or the whole (or TP-cut) model
      mesh.stage ? std::shared_ptr<TrainableModel>(mesh.stage) : std::make_shared<GptModel>(model);
  auto windows = std::make_shared<TokenWindows>(data, config.model.block_size, static_cast<uint64_t>(config.train.seed) + 1);
  Trainer trainer(trainer_options(config), optimizer.plan(), trained, windows, run_dir, mesh.data_rank(), mesh.data_size());
  auto metrics_logger = std::make_shared<MetricsLogger>(run_dir, config.log, config.train.max_steps,
                                                        config.train.log_interval, rank0, checkpoint.has_value());
  trainer.add_callback(metrics_logger);
  trainer.add_callback(optimizer.metrics_probe());
  add_stopping_and_checkpoints(trainer, config, group, configured_callbacks);
  for (auto& c : a.extra_callbacks) trainer.add_callback(c);
  const DataParallelParts parallel = prepare_trainer(trainer, resumed, checkpoint, mesh, config, optimizer.plan(), group);
  log_info("optimizer state on rank 0: {} ({}); peak resident set so far {} (model built, sharded, restored)",
           format_bytes(static_cast<double>(trainer.optimizer().state_bytes())),
           group && optimizer.plan().sharding != Sharding::None ? "its shard" : "a full copy",
           format_bytes(process_peak_rss_bytes()));
  TrainResult result;
  {
    InterruptScope interrupts;  // Ctrl-C stops at the end of the step; checkpoint and sinks still run
    result = trainer.fit();
  }
  const int status = run_exit_status(result, config.train.max_steps, group.get());  // collective
  log_run_end(result, optimizer, trainer, *metrics_logger, parallel.ddp.get(), parallel.sharded.get());
  log_model_parallel_traffic(mesh, result.elapsed_seconds);
  const bool sample = config.train.sample_tokens > 0;
  std::string text = sample ? split_sample(model, mesh, parallel, config, trainer, *data, optimizer.device()) : "";
  if (group) group->shutdown();
  if (sample && rank0 && !mesh.model_parallel()) text = sample_text(model, nullptr, config, trainer, *data, optimizer.device());
  if (sample && rank0) log_info("sample:\n{}\n", text);
  if (result.last_checkpoint) log_info("checkpoint written to {}", result.last_checkpoint->string());
  return status;
}

Command add_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "train a GPT model (default: the default model on the fortunes corpus)");
  add_config_options(cmd, args->config);
  cmd->add_option("--out", args->out,
                  "run directory (default: runs/<date-time>, linked as runs/latest); one that already holds a "
                  "run is refused unless --resume continues it or --overwrite replaces it");
  cmd->add_option("--resume", args->resume, "checkpoint directory, run directory, or 'latest'");
  cmd->add_option("--init-from", args->init_from,
                  "Hugging Face model directory (config.json, model.safetensors or its shards; gpt2, llama, mistral, "
                  "qwen2) whose shape and weights start the run; its tokenizer (tokenizer.json or tokenizer.model) "
                  "tokenizes the data unless data.tokenizer is set");
  cmd->add_flag("--overwrite", args->overwrite,
                "let --out replace the run it holds: once the new run's config and data check out, the old "
                "run's outputs (config.toml, metrics, tb/, report.html, checkpoints/, ...) are deleted; "
                "other files in the directory are left alone");
  cmd->add_option("--profile-steps", args->profile_steps,
                  "a:b writes a Chrome trace of steps a..b (trace.json, ops_trace.json) into the run directory");
  cmd->footer(
      "Examples:\n"
      "  hwtrain train\n"
      "  hwtrain train --data corpus/ --set model.preset=char-small --set train.max_steps=2000\n"
      "  hwtrain train --config run.toml --out runs/exp1\n"
      "  hwtrain train --config run.toml --out runs/exp1 --overwrite\n"
      "  hwtrain train --resume latest --set train.max_steps=6000\n"
      "  hwtrain train --profile-steps 5:10");
  return {cmd, [args] { return run_train(*args); }};
}

namespace {
struct ProfileArgs {
  TrainArgs train;
  std::string run_dir;
  int64_t steps = 12;
  size_t top = 20;
};

int run_profile(ProfileArgs& a) {
  if (a.run_dir.empty()) {
    // A short training run of the configured model and data, steps 3..steps profiled (the first
    // steps are warm-up: allocator growth, oneDNN kernel selection).
    if (a.steps < 4) throw ConfigError("hwtrain profile: --steps = " + std::to_string(a.steps) + " must be >= 4");
    TrainArgs t = a.train;
    for (const char* o : {"train.time_budget=0", "train.eval_interval=0", "train.sample_tokens=0",
                          "checkpoint.save_final=false", "log.report=false"}) {
      t.config.overrides.insert(t.config.overrides.begin(), o);  // the user's --set still win
    }
    t.config.overrides.push_back("train.max_steps=" + std::to_string(a.steps));
    t.profile_steps = "3:" + std::to_string(a.steps);
    if (t.out.empty()) t.out = new_run_dir().string();
    const int rc = run_train(t);
    if (rc != 0) return rc;
    a.run_dir = t.out;
  }
  return run_profile_report(a.run_dir, a.top, std::cout);
}
}  // namespace

Command add_profile(CLI::App& app) {
  auto a = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand("profile", "profile a short training run and print the top operators by time");
  cmd->add_option("run_dir", a->run_dir, "print the profile of this run directory instead of running one");
  add_config_options(cmd, a->train.config);
  cmd->add_option("--out", a->train.out, "run directory of the profiled run (default: runs/<date-time>)");
  cmd->add_flag("--overwrite", a->train.overwrite, "let --out replace the run it holds (as in hwtrain train)");
  cmd->add_option("--steps", a->steps, "steps to run; steps 3.. are profiled")->capture_default_str();
  cmd->add_option("--top", a->top, "operators to list")->capture_default_str();
  cmd->footer(
      "Examples:\n"
      "  hwtrain profile\n"
      "  hwtrain profile --set model.preset=char-small --steps 20\n"
      "  hwtrain profile runs/latest");
  return {cmd, [a] { return run_profile(*a); }};
}

}  // namespace hwt::cli
