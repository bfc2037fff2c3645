// `hwtrain train`: config + hardware -> plan -> model and data -> trainer -> sample and checkpoint.
#include <iostream>

#include "hwtrain/cli/commands.h"
#include "hwtrain/cli/run_setup.h"
#include "hwtrain/core/files.h"
#include "hwtrain/data/tokenizer.h"
#include "hwtrain/dist/ddp.h"
#include "hwtrain/dist/dist_env.h"
#include "hwtrain/dist/process_group.h"
#include "hwtrain/io/checkpoint_store.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/train/hardware_aware_optimizer.h"
#include "hwtrain/train/configured_callbacks.h"
#include "hwtrain/train/interrupt.h"
#include "hwtrain/train/metrics_logger.h"
#include "hwtrain/train/model_checkpoint.h"
#include "hwtrain/train/trainer.h"

namespace hwt::cli {

namespace fs = std::filesystem;

namespace {

struct TrainArgs {
  ConfigOptions config;
  std::string out;
  std::string resume;
};

std::string sample_text(GPT& model, const RunConfig& config, const Tokenizer& tokenizer, torch::Device device) {
  std::vector<int32_t> prompt = tokenizer.encode(config.train.sample_prompt);
  if (prompt.empty()) prompt.push_back(tokenizer.eot_id());
  auto idx = torch::tensor(std::vector<int64_t>(prompt.begin(), prompt.end()), torch::kInt64).unsqueeze(0).to(device);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(config.train.seed));
  auto out = model->generate(idx, config.train.sample_tokens, config.train.sample_temperature,
                             config.train.sample_top_k, gen);
  auto ids_tensor = out[0].to(torch::kCPU).to(torch::kInt32).contiguous();
  std::vector<int32_t> ids(ids_tensor.data_ptr<int32_t>(), ids_tensor.data_ptr<int32_t>() + ids_tensor.numel());
  return tokenizer.decode(ids);
}

int run_train(const TrainArgs& a) {
  const DistEnv env = read_dist_env();
  const bool rank0 = env.rank == 0;
  init_logging(env.distributed() ? env.rank : -1);
  std::optional<fs::path> checkpoint;
  if (!a.resume.empty()) checkpoint = resolve_checkpoint(a.resume, default_checkpoint_dir(a.out));
  RunConfig config = resolve_config(a.config, checkpoint);
  std::shared_ptr<ProcessGroup> group;
  if (env.distributed()) {
    const bool cuda = config.train.device.rfind("cuda", 0) == 0 ||
                      (config.train.device == "auto" && torch::cuda::is_available());
    group = std::make_shared<ProcessGroup>(env, config.dist, rank_device(env, cuda ? torch::Device("cuda") : torch::kCPU));
  }
  // Rank 0 chooses the run directory (and prepares the data) first; the others follow it.
  fs::path run_dir;
  if (rank0) {
    run_dir = !a.out.empty() ? fs::path(a.out) : checkpoint ? run_dir_of_checkpoint(*checkpoint) : new_run_dir();
    ensure_writable_dir(run_dir);
  }
  if (group) run_dir = group->share_from_rank0("run_dir", run_dir.string());

  log_info("hwtrain {} | LibTorch {} | run directory {}", HWTRAIN_VERSION, TORCH_VERSION, run_dir.string());
  std::shared_ptr<const TokenFile> data;
  if (rank0) data = open_dataset(config);
  if (group) group->share_from_rank0("data_ready", "1", std::chrono::hours(24));
  if (!rank0) data = open_dataset(config);
  config.model.vocab_size = resolve_vocab_size(config.model, data->vocab_size());
  config.validate();
  auto configured_callbacks = make_configured_callbacks(config, env.rank);  // config errors before training
  log_info("resolved config:\n{}", config.to_toml());
  log_info("data: {} ({} train / {} validation tokens, tokenizer {})", data->path().string(),
           data->num_train_tokens(), data->num_val_tokens(), data->tokenizer_name());

  if (group) {
    group->check_consistency(config.to_toml() + "\ndataset " + std::to_string(data->fingerprint()) + "\nresume " +
                             (checkpoint ? checkpoint->string() : std::string("no")));
  }
  PlanContext context;
  context.world_size = env.world_size;
  context.local_rank = env.local_rank;
  HardwareAwareOptimizer optimizer(config, context);
  log_info("hardware:\n{}", optimizer.get_hardware_summary());
  log_info("plan:\n{}", optimizer.get_optimization_summary());
  if (rank0) {
    write_file_atomic(run_dir / "config.toml", config.to_toml());
    write_file_atomic(run_dir / "plan.json", optimizer.plan().to_json());
    write_file_atomic(run_dir / "hardware.txt", optimizer.get_hardware_summary());
    write_file_atomic(run_dir / "hardware.json", to_json(optimizer.hardware()).dump(2));
  }

  GPT model = optimizer.build_model();
  log_info("model: {} parameters ({} without position embeddings)", model->num_parameters(false),
           model->num_parameters(true));
  Trainer trainer(config, optimizer.plan(), model, data, run_dir, env.rank, env.world_size);
  trainer.add_callback(std::make_shared<MetricsLogger>(run_dir, config.log, config.train.max_steps,
                                                       config.train.log_interval, rank0, checkpoint.has_value()));
  trainer.add_callback(optimizer.metrics_probe());
  std::function<bool(bool)> agree;
  if (group) agree = [group](bool over) { return group->any_rank(over, "agreeing on the time budget"); };
  trainer.add_callback(std::make_shared<TimeBudgetStopper>(config.train.time_budget, agree));
  for (auto& c : configured_callbacks) trainer.add_callback(c);
  trainer.add_callback(std::make_shared<ModelCheckpoint>(checkpoint_options(config.checkpoint)));
  if (checkpoint) trainer.resume_from(*checkpoint);
  if (group) {
    DataParallelOptions ddp;
    ddp.bucket_size_mb = config.dist.bucket_size_mb;
    trainer.set_gradient_sync(std::make_shared<DataParallel>(group, model->parameters(), ddp));
    trainer.set_loss_reducer([group](double loss) { return group->mean_across_ranks(loss, "averaging the loss"); });
  }

  TrainResult result;
  {
    InterruptScope interrupts;  // Ctrl-C stops at the end of the step; checkpoint and sinks still run
    result = trainer.fit();
  }
  log_info("stopped after {} steps ({}): loss {:.4f}, val_loss {:.4f}, {:.0f} s", result.steps, result.stop_reason,
           result.final_loss, result.final_val_loss, result.elapsed_seconds);
  log_info("measured: {}", optimizer.get_optimization_metrics()["measured"].dump());
  if (group) group->shutdown();
  if (config.train.sample_tokens > 0 && rank0) {
    auto tokenizer = make_tokenizer(config.data.tokenizer);
    log_info("sample:\n{}\n", sample_text(model, config, *tokenizer, optimizer.device()));
  }
  if (result.last_checkpoint) log_info("checkpoint written to {}", result.last_checkpoint->string());
  return 0;
}

}  // namespace

Command add_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "train a GPT model (default: the default model on the fortunes corpus)");
  add_config_options(cmd, args->config);
  cmd->add_option("--out", args->out, "run directory (default: runs/<date-time>, linked as runs/latest)");
  cmd->add_option("--resume", args->resume, "checkpoint directory, run directory, or 'latest'");
  cmd->footer(
      "Examples:\n"
      "  hwtrain train\n"
      "  hwtrain train --data corpus/ --set model.preset=char-small --set train.max_steps=2000\n"
      "  hwtrain train --config run.toml --out runs/exp1\n"
      "  hwtrain train --resume latest --set train.max_steps=6000");
  return {cmd, [args] { return run_train(*args); }};
}

}  // namespace hwt::cli
