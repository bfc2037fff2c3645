// `hwtrain generate` and `hwtrain eval`: load a checkpoint's model and use it.
#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <cmath>
#include <iostream>

#include <set>

#include "hwtrain/cli/commands.h"
#include "hwtrain/cli/run_setup.h"
#include "hwtrain/cli/split_model.h"
#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/data/tokenizer.h"
#include "hwtrain/data/tokenizer_files.h"
#include "hwtrain/data/window_sampler.h"
#include "hwtrain/interop/hf_directory.h"
#include "hwtrain/interop/hf_weights.h"
#include "hwtrain/io/checkpoint_store.h"
#include "hwtrain/io/safetensors.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/train/autocast.h"
#include "hwtrain/run/hardware_aware_optimizer.h"
#include "hwtrain/train/sharded_checkpoint.h"
#include "hwtrain/train/training_checkpoint.h"

namespace hwt::cli {

namespace fs = std::filesystem;

namespace {

struct LoadedModel {
  fs::path checkpoint;
  RunConfig config;
  GPT model{nullptr};
  Plan plan;  // device, precision and micro-batch: eval and generate run as the plan says
  std::shared_ptr<GptStage> stage;  // split over pipeline stages: this rank's (generate runs through it)
};

// A Hugging Face model directory (config.json + safetensors, tokenizer.json beside them): its shape
// at its own context length (capped at 4096 for memory) unless model.block_size is set, its weights,
// planned for this machine.
LoadedModel load_hf_model(const fs::path& dir, ConfigOptions options) {
  LoadedModel m;
  m.checkpoint = dir;
  m.config = resolve_config(options, std::nullopt);
  if (!m.config.is_set("model.block_size")) {  // the user's, else its own (capped for memory)
    m.config.model.block_size = std::min<int64_t>(read_hf_context_length(dir), 4096);
  }
  m.config.model.dropout = 0;
  m.config.model = read_hf_model_config(dir, m.config.model);
  // Text given to eval is tokenized with the model's own tokenizer unless the user names another: its
  // tokenizer.json, or a tokenizer.model alone as SentencePiece encodes (data/tokenizer.h).
  if (!m.config.is_set("data.tokenizer") && holds_tokenizer(dir)) m.config.data.tokenizer = dir.string();
  HardwareAwareOptimizer planner(m.config);
  m.model = GPT(m.config.model, m.config.model.vocab_size);
  load_hf_directory_weights(m.model, dir);
  planner.apply_optimizations(m.model);
  m.plan = planner.plan();
  m.model->eval();
  log_info("loaded Hugging Face model {} ({} parameters)", dir.string(), m.model->num_parameters(false));
  return m;
}

LoadedModel load_model(const std::string& spec, const std::string& out_dir, ConfigOptions options) {
  if (is_hf_model_dir(spec)) return load_hf_model(spec, std::move(options));
  const fs::path ckpt = own_checkpoint(spec, out_dir);
  LoadedModel m;
  m.checkpoint = ckpt;
  m.config = resolve_config(options, ckpt);
  HardwareAwareOptimizer planner(m.config);
  m.model = GPT(m.config.model, m.config.model.vocab_size);
  const NamedTensors weights = read_checkpoint_weights(ckpt);  // model.safetensors or the shards joined
  {
    torch::NoGradGuard no_grad;
    auto params = m.model->named_parameters();
    std::set<const void*> filled;  // by storage: a tied head is filled with the embedding
    for (const auto& [name, value] : weights) {
      auto* p = params.find(name);
      if (!p) throw unknown_checkpoint_tensor(ckpt, name);
      check_checkpoint_weight(ckpt, name, p->sizes(), value);
      p->copy_(value);
      filled.insert(p->data_ptr());
    }
    for (const auto& p : params) {  // a parameter left at its random initialization is no model
      if (!filled.count(p.value().data_ptr())) {
        throw IoError("checkpoint " + ckpt.string() + " has no tensor '" + p.key() + "' (" +
                      std::to_string(weights.size()) + " tensors for " + std::to_string(params.size()) +
                      " parameters); it was not written by this model's configuration");
      }
    }
  }
  planner.apply_optimizations(m.model);
  m.plan = planner.plan();
  m.model->eval();
  log_info("loaded {} ({} parameters)", ckpt.string(), m.model->num_parameters(false));
  return m;
}

struct GenerateArgs {
  std::string checkpoint = "latest", out, prompt;
  int64_t tokens = 300, top_k = 40, seed = 1, pipeline = 1;
  int64_t samples = 1, micro_batches = 0;  // 0: min(samples, pipeline)
  double temperature = 0.8, top_p = 1.0;
  bool no_kv_cache = false;
};

// --samples and --micro-batches checked; the micro-batches to decode in (by default one per
// pipeline stage, as many as there are samples: enough to keep every stage busy).
int64_t generate_micro_batches(const GenerateArgs& a) {
  constexpr int64_t kMaxSamples = 1024;
  if (!(a.temperature >= 0) || !std::isfinite(a.temperature)) {  // before the checkpoint is read
    throw ConfigError("generate --temperature " + std::to_string(a.temperature) + " is out of range; valid: 0 (the "
                      "most likely token) or more");
  }
  if (!(a.top_p > 0 && a.top_p <= 1)) {
    throw ConfigError("generate --top-p " + std::to_string(a.top_p) +
                      " is out of range; valid: (0, 1], 1 = all tokens");
  }
  if (a.samples < 1 || a.samples > kMaxSamples) {
    throw ConfigError("generate --samples " + std::to_string(a.samples) + " is out of range; valid: 1 to " +
                      std::to_string(kMaxSamples));
  }
  if (a.micro_batches == 0) return std::min(a.samples, a.pipeline);
  if (a.micro_batches < 0 || a.micro_batches > a.samples) {
    throw ConfigError("generate --micro-batches " + std::to_string(a.micro_batches) + " is out of range for --samples " +
                      std::to_string(a.samples) + "; valid: 1 to " + std::to_string(a.samples) + " (0: one per pipeline stage)");
  }
  return a.micro_batches;
}

// Launched on several ranks: the checkpoint `spec` names split over all of them, in `pipeline`
// stages of tensor-parallel ranks (cli/split_model.h). `command`: "generate" or "eval".
LoadedModel load_split(const std::string& command, const std::string& spec, const std::string& out, int64_t pipeline,
                       const ConfigOptions& options, const DistEnv& env, std::shared_ptr<ProcessGroup>& group) {
  if (is_hf_model_dir(spec)) {
    throw ConfigError(command + " on " + std::to_string(env.world_size) + " ranks splits hwtrain checkpoints; use the "
                      "Hugging Face directory " + spec + " in one process");
  }
  LoadedModel m;
  m.checkpoint = own_checkpoint(spec, out);
  SplitModel s = load_split_model(m.checkpoint, env, pipeline, options);
  m.config = std::move(s.config);
  m.plan = std::move(s.plan);
  m.model = s.model;
  m.stage = s.mesh->stage;
  group = std::move(s.group);
  if (env.rank == 0) {
    log_info("loaded {} split over {} ranks ({})", m.checkpoint.string(), env.world_size, s.mesh->mesh.describe());
  }
  return m;
}

// --pipeline splits a model over the ranks of a launch: ConfigError in one process.
void check_pipeline_launched(const std::string& command, int64_t pipeline, const DistEnv& env) {
  if (pipeline == 1 || env.distributed()) return;
  throw ConfigError(command + " --pipeline " + std::to_string(pipeline) + " splits the model over the ranks of a launch "
                    "(hwtrain launch --nproc-per-node N -- " + command + " ...); one process holds it whole");
}

int run_generate(const GenerateArgs& a) {
  init_logging(-1, "warn");
  const DistEnv env = read_dist_env();
  std::shared_ptr<ProcessGroup> group;  // launched on several ranks: every rank decodes, rank 0 prints
  check_pipeline_launched("generate", a.pipeline, env);
  const int64_t micro_batches = generate_micro_batches(a);
  LoadedModel m = env.distributed() ? load_split("generate", a.checkpoint, a.out, a.pipeline, {}, env, group)
                                    : load_model(a.checkpoint, a.out, {});
  // A checkpoint carries the tokenizer it was trained with (checkpoints older than that: the config's).
  if (is_hf_model_dir(m.checkpoint) && !holds_tokenizer(m.checkpoint)) {
    throw DataError(m.checkpoint.string() + " has no tokenizer.json or tokenizer.model to turn the prompt into ids and back");
  }
  auto tokenizer =
      holds_tokenizer(m.checkpoint) ? make_tokenizer(m.checkpoint.string()) : make_tokenizer(m.config.data.tokenizer);
  std::vector<int32_t> prompt = tokenizer->encode(a.prompt);
  if (prompt.empty()) prompt.push_back(tokenizer->eot_id());
  auto idx = torch::tensor(std::vector<int64_t>(prompt.begin(), prompt.end())).unsqueeze(0).repeat({a.samples, 1});
  idx = idx.to(m.plan.device);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(a.seed));
  const auto start = std::chrono::steady_clock::now();
  const bool cache = !a.no_kv_cache;
  auto out = (m.stage ? m.stage->generate(idx, a.tokens, a.temperature, a.top_k, gen, a.top_p, cache, micro_batches)
                      : m.model->generate(idx, a.tokens, a.temperature, a.top_k, gen, a.top_p, cache, micro_batches))
                 .to(torch::kCPU)
                 .to(torch::kInt32)
                 .contiguous();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (group) group->shutdown();
  if (env.rank != 0) return 0;
  for (int64_t j = 0; j < a.samples; ++j) {
    const int32_t* row = out[j].data_ptr<int32_t>();
    if (a.samples > 1) std::cout << "=== sample " << j + 1 << " of " << a.samples << " ===\n";
    std::cout << tokenizer->decode(std::vector<int32_t>(row, row + out.size(1))) << "\n";
  }
  const double tokens = static_cast<double>(a.tokens * a.samples);
  std::cerr << "generated " << a.tokens * a.samples << " tokens in " << format_number("%.3f", seconds) << " s ("
            << format_number("%.1f", tokens / seconds) << " tokens/s, " << (a.no_kv_cache ? "no KV cache" : "KV cache")
            << ", " << m.plan.device.str() << (group ? ", split over " + std::to_string(env.world_size) + " ranks" : std::string())
            << (m.stage ? " in " + std::to_string(a.pipeline) + " pipeline stages" : std::string())
            << (micro_batches > 1 ? ", " + std::to_string(micro_batches) + " micro-batches" : std::string()) << ")\n";
  return 0;
}

struct EvalArgs {
  std::string checkpoint = "latest", out;
  ConfigOptions config;
  int64_t batches = 0, pipeline = 1;
};

int run_eval(const EvalArgs& a) {
  const DistEnv env = read_dist_env();
  init_logging(env.distributed() ? env.rank : -1);
  check_pipeline_launched("eval", a.pipeline, env);
  std::shared_ptr<ProcessGroup> group;  // launched on several ranks: the model split, every rank evaluates, rank 0 prints
  LoadedModel m = env.distributed() ? load_split("eval", a.checkpoint, a.out, a.pipeline, a.config, env, group)
                                    : load_model(a.checkpoint, a.out, a.config);
  auto data = open_run_dataset(m.config, group.get());
  if (data->vocab_size() > m.config.model.vocab_size) {
    throw DataError("dataset " + data->path().string() + " has a vocabulary of " + std::to_string(data->vocab_size()) +
                    " but the checkpoint's model has " + std::to_string(m.config.model.vocab_size));
  }
  if (has_tokenizer_files(m.checkpoint)) {
    auto trained_with = load_tokenizer(m.checkpoint);
    if (trained_with->name() != data->tokenizer_name()) {
      throw DataError("checkpoint " + m.checkpoint.string() + " was trained with tokenizer '" + trained_with->name() +
                      "' but dataset " + data->path().string() + " uses '" + data->tokenizer_name() +
                      "'; prepare the data with the checkpoint's tokenizer (hwtrain prepare --tokenizer " +
                      m.checkpoint.string() + ")");
    }
  }
  const int64_t batches = a.batches > 0 ? a.batches : m.config.train.eval_batches;
  WindowSampler sampler(*data, Split::kVal, m.config.model.block_size, static_cast<uint64_t>(m.config.train.seed) + 1);
  torch::NoGradGuard no_grad;
  double sum = 0;
  torch::Tensor x, y;
  for (int64_t i = 0; i < batches; ++i) {
    sampler.next_batch(m.plan.micro_batch_size, x, y);
    AutocastGuard autocast(m.plan.device.type(), autocast_dtype(m.plan.precision));
    const torch::Tensor xd = x.to(m.plan.device), yd = y.to(m.plan.device);
    sum += (m.stage ? m.stage->forward_loss(xd, yd) : m.model->forward_loss(xd, yd)).item<double>();
  }
  if (group) group->shutdown();
  const double loss = sum / static_cast<double>(batches);
  if (!std::isfinite(loss)) {
    throw IoError("checkpoint " + m.checkpoint.string() + " gives a non-finite validation loss (" +
                  std::to_string(loss) + ") on " + data->path().string() +
                  ": its weights overflow in this precision or the run diverged; use an earlier checkpoint");
  }
  if (env.rank != 0) return 0;
  std::cout << "val_loss " << loss << " | val_perplexity " << std::exp(loss) << " | batches " << batches
            << (group ? " | split over " + std::to_string(env.world_size) + " ranks" : std::string()) << "\n";
  return 0;
}

}  // namespace

namespace {

// A whole number of at least `low` (CLI11's own range checks print 1.8e308 as the upper bound).
CLI::Validator at_least(long long low) {
  return CLI::Validator(
      [low](std::string& text) {
        try {
          size_t used = 0;
          const long long v = std::stoll(text, &used);
          if (used == text.size() && v >= low) return std::string();
        } catch (const std::exception&) {
        }
        return "must be a whole number >= " + std::to_string(low) + ", got " + text;
      },
      ">= " + std::to_string(low));
}

// generate's and eval's --pipeline.
void add_pipeline_option(CLI::App* cmd, int64_t& pipeline) {
  cmd->add_option("--pipeline", pipeline,
                  "launched on N ranks: cut the model into this many pipeline stages, each split over N / this "
                  "many ranks by tensor parallelism (1: tensor parallelism over all N)")
      ->check(at_least(1))
      ->capture_default_str();
}

}  // namespace

Command add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "generate text from a checkpoint");
  cmd->add_option("checkpoint", a->checkpoint,
                  "checkpoint dir, run dir, 'latest', or a Hugging Face model directory (config.json, "
                  "safetensors, tokenizer.json)")
      ->capture_default_str();
  cmd->add_option("--out", a->out, "run directory in which 'latest' is looked up (default runs/latest)");
  cmd->add_option("-p,--prompt", a->prompt, "text to continue");
  cmd->add_option("-n,--tokens", a->tokens, "tokens to generate")->check(at_least(0))->capture_default_str();
  cmd->add_option("--temperature", a->temperature, "sampling temperature")->capture_default_str();
  cmd->add_option("--top-k", a->top_k, "sample among the k most likely tokens; 0 = all")
      ->check(at_least(0))
      ->capture_default_str();
  cmd->add_option("--top-p", a->top_p, "nucleus sampling: the most likely tokens up to this probability mass; 1 = all")
      ->capture_default_str();
  cmd->add_flag("--no-kv-cache", a->no_kv_cache, "recompute the whole window for every token (the reference path)");
  cmd->add_option("--seed", a->seed, "sampling seed")->capture_default_str();
  cmd->add_option("--samples", a->samples, "continuations of the prompt to generate, decoded together")
      ->capture_default_str();
  cmd->add_option("--micro-batches", a->micro_batches,
                  "decode the samples in this many groups, each step in turn (0: one per --pipeline stage, so "
                  "that every stage works at once); the sampled text depends on it")
      ->capture_default_str();
  add_pipeline_option(cmd, a->pipeline);
  cmd->footer("Example:\n  hwtrain generate latest --prompt \"The meaning of life\" -n 200\n"
              "  hwtrain launch --nproc-per-node 2 -- generate latest  # the model split over 2 ranks\n"
              "  hwtrain launch --nproc-per-node 4 -- generate latest --pipeline 2  # 2 stages of 2 ranks\n"
              "  hwtrain launch --nproc-per-node 2 -- generate latest --pipeline 2 --samples 8  # 2 micro-batches in flight");
  return {cmd, [a] { return run_generate(*a); }};
}

Command add_eval(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand("eval", "validation loss of a checkpoint");
  cmd->add_option("checkpoint", a->checkpoint, "checkpoint dir, run dir, or 'latest'")->capture_default_str();
  cmd->add_option("--out", a->out, "run directory in which 'latest' is looked up (default runs/latest)");
  cmd->add_option("--batches", a->batches, "validation micro-batches (default: train.eval_batches)")
      ->check(at_least(1));
  add_pipeline_option(cmd, a->pipeline);
  add_config_options(cmd, a->config);
  cmd->footer("Example:\n  hwtrain eval latest\n  hwtrain eval runs/exp1 --data other-corpus/\n"
              "  hwtrain launch --nproc-per-node 4 -- eval latest --pipeline 2  # 2 stages of 2 ranks");
  return {cmd, [a] { return run_eval(*a); }};
}

}  // namespace hwt::cli
