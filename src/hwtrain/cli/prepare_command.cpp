// `hwtrain prepare`: text files, directories, JSONL or standard input -> a sharded dataset
// directory (manifest.json + token shards) or a single token file (.hwt), with a train/validation split.
#include <iostream>

#include "hwtrain/cli/commands.h"
#include "hwtrain/data/prepare.h"
#include "hwtrain/obs/log.h"

namespace hwt::cli {

namespace {
struct PrepareArgs {
  std::vector<std::string> inputs;
  std::string output;
  std::string format = "auto";
  bool no_progress = false;
  PrepareOptions options;
};
}  // namespace

Command add_prepare(CLI::App& app) {
  auto a = std::make_shared<PrepareArgs>();
  PrepareOptions& o = a->options;
  CLI::App* cmd = app.add_subcommand("prepare", "tokenize text into a sharded dataset (a directory) or a token file (.hwt)");
  cmd->add_option("inputs", a->inputs, "text files, directories (searched recursively), JSONL files, - for standard input")
      ->required();
  cmd->add_option("-o,--output", a->output,
                  "dataset directory to write (shards + manifest.json), or a .hwt file for a single token file")
      ->required();
  cmd->add_option("--tokenizer", o.tokenizer, "byte, a SentencePiece .model file, or a tokenizer directory")
      ->capture_default_str();
  cmd->add_option("--val-fraction", o.val_fraction, "share of documents held out")->capture_default_str();
  cmd->add_option("--split-seed", o.split_seed, "seed of the train/validation split")->capture_default_str();
  cmd->add_option("--separator", o.document_separator,
                  "a line that separates documents inside a text file (fortune files: %)");
  cmd->add_option("--max-document-bytes", o.max_document_bytes,
                  "cut longer documents into pieces before the split (0 = never)")
      ->capture_default_str();
  cmd->add_option("--format", a->format, "input format: auto (.jsonl/.ndjson are JSONL), text, jsonl")
      ->capture_default_str();
  cmd->add_option("--jsonl-field", o.jsonl_field, "JSONL field holding a document's text")->capture_default_str();
  cmd->add_flag("--strict", o.strict, "a JSONL line that is not an object with the field is an error, not skipped");
  cmd->add_option("--include", o.include, "glob of files to read inside directories, e.g. '*.txt' (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);  // one value each: the inputs follow
  cmd->add_option("--exclude", o.exclude, "glob of files to skip inside directories (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);  // one value each: the inputs follow
  cmd->add_option("--shard-tokens", o.shard_tokens, "tokens per shard (default 100,000,000); implies a dataset directory");
  cmd->add_option("--threads", o.num_threads, "tokenizer threads (0 = one per core)")->capture_default_str();
  cmd->add_flag("--no-progress", a->no_progress, "no progress line on stderr");
  cmd->footer(
      "Examples:\n"
      "  hwtrain prepare /usr/share/games/fortunes --separator % -o data/fortunes/\n"
      "  hwtrain prepare corpus/ --include '*.jsonl' --tokenizer tok/ -o data/corpus/\n"
      "  zcat dump.jsonl.gz | hwtrain prepare - --format jsonl -o data/dump/\n"
      "  hwtrain prepare input.txt -o data/small.hwt");
  return {cmd, [a] {
            init_logging();
            a->options.format = parse_input_format(a->format);
            a->options.progress = !a->no_progress;
            std::vector<fs::path> inputs(a->inputs.begin(), a->inputs.end());
            PrepareStats stats = prepare(inputs, a->output, a->options);
            log_info("{}", describe(stats));
            log_info("wrote {}", a->output);
            return 0;
          }};
}

}  // namespace hwt::cli
