// `hwtrain export`: a checkpoint's model as a Hugging Face model directory (interop/hf_export.h).
#include <iostream>

#include "hwtrain/cli/commands.h"
#include "hwtrain/cli/run_setup.h"
#include "hwtrain/cli/split_model.h"
#include "hwtrain/core/error.h"
#include "hwtrain/data/hf_bpe_tokenizer.h"
#include "hwtrain/data/sentencepiece_tokenizer.h"
#include "hwtrain/data/tokenizer_files.h"
#include "hwtrain/dist/dist_env.h"
#include "hwtrain/interop/hf_export.h"
#include "hwtrain/io/checkpoint_store.h"
#include "hwtrain/io/safetensors.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/train/sharded_checkpoint.h"

namespace hwt::cli {
namespace {

struct ExportArgs {
  std::string checkpoint = "latest", run_out, format = "hf", out, dtype = "fp32";
  int64_t max_shard_bytes = 5'000'000'000;
};

int run_export(const ExportArgs& a) {
  init_logging(-1, "info");
  // One process writes the directory; under `hwtrain launch` the other ranks have nothing to do
  // (each writing it too failed on the directory rank 0 had filled).
  if (const DistEnv env = read_dist_env(); env.rank != 0) {
    log_info("export: rank {} of a launch leaves the export to rank 0", env.rank);
    return 0;
  }
  if (a.format != "hf") throw ConfigError("export: --format " + a.format + " is unknown: expected hf");
  const fs::path ckpt = own_checkpoint(a.checkpoint, a.run_out);  // verified; hwtrain's own model, not a library one
  const RunConfig config = resolve_config({}, ckpt);
  HfExportOptions options;
  options.max_shard_bytes = a.max_shard_bytes;
  if (a.dtype == "bf16") {
    options.dtype = torch::kBFloat16;
  } else if (a.dtype == "fp16") {
    options.dtype = torch::kFloat16;
  } else if (a.dtype != "fp32") {
    throw ConfigError("export: --dtype " + a.dtype + " is unknown: expected fp32, bf16 or fp16");
  }
  const NamedTensors weights = read_checkpoint_weights(ckpt);  // model.safetensors or the shards joined
  for (const auto& [name, t] : weights) check_finite_weight(ckpt, name, t);  // as generate and eval do
  if (has_tokenizer_files(ckpt)) {  // the run's tokenizer goes along when Hugging Face can read it
    const auto tok = load_tokenizer(ckpt);
    options.eos_token_id = tok->eot_id();
    if (const auto* hf = dynamic_cast<const HfBpeTokenizer*>(tok.get())) options.tokenizer_json = hf->json_text();
    const auto* sp = dynamic_cast<const SentencePieceTokenizer*>(tok.get());
    if (sp && !sp->hf_json_text().empty()) {  // Llama 2 / Mistral: both files, as the run read them
      options.tokenizer_json = sp->hf_json_text();
      options.tokenizer_model = sp->model_bytes();
    }
  }
  export_hf(config.model, weights, a.out, options);
  std::cout << "exported " << ckpt.string() << " (" << weights.size() << " tensors, " << a.dtype
            << (options.tokenizer_json.empty() ? ", no tokenizer files: the run's tokenizer has no Hugging Face form"
                                               : options.tokenizer_model.empty() ? ", tokenizer.json"
                                                                                 : ", tokenizer.json and tokenizer.model")
            << ") to " << a.out << "\n";
  return 0;
}

}  // namespace

Command add_export(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand("export", "write a checkpoint's model as a Hugging Face model directory");
  cmd->add_option("checkpoint", a->checkpoint, "checkpoint dir, run dir, or 'latest'")->capture_default_str();
  cmd->add_option("--out-run", a->run_out, "run directory in which 'latest' is looked up (default runs/latest)");
  cmd->add_option("--format", a->format, "output format: hf (config.json + safetensors)")->capture_default_str();
  cmd->add_option("-o,--output", a->out, "directory to write (new, or empty)")->required();
  cmd->add_option("--dtype", a->dtype, "weights as fp32, bf16 or fp16")->capture_default_str();
  cmd->add_option("--max-shard-size", a->max_shard_bytes, "bytes per safetensors shard")->capture_default_str();
  cmd->footer("Example:\n  hwtrain export runs/exp1 --format hf -o exported/ --dtype bf16\n"
              "  python -c \"import transformers; transformers.AutoModelForCausalLM.from_pretrained('exported')\"\n"
              "gpt2 and the llama family are exported, with tokenizer.json when the run used a Hugging Face one.");
  return {cmd, [a] { return run_export(*a); }};
}

}  // namespace hwt::cli
