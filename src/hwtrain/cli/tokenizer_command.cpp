// `hwtrain tokenizer train`: trains a SentencePiece BPE or unigram tokenizer on text files,
// directories, JSONL or standard input, and writes DIR/tokenizer.model + DIR/tokenizer.json.
#include "hwtrain/cli/commands.h"
#include "hwtrain/data/prepare.h"
#include "hwtrain/data/tokenizer_trainer.h"
#include "hwtrain/obs/log.h"

namespace hwt::cli {

namespace {
struct TokenizerTrainArgs {
  std::vector<std::string> inputs;
  std::string output;
  std::string format = "auto";
  TokenizerTrainOptions options;
};
}  // namespace

Command add_tokenizer(CLI::App& app) {
  auto a = std::make_shared<TokenizerTrainArgs>();
  CLI::App* cmd = app.add_subcommand("tokenizer", "train SentencePiece tokenizers");
  cmd->require_subcommand(1);
  CLI::App* train = cmd->add_subcommand("train", "train a BPE or unigram tokenizer on a corpus");
  TokenizerTrainOptions& o = a->options;
  train->add_option("-i,--input", a->inputs, "text files, directories, JSONL files, or - for standard input")
      ->required();
  train->add_option("--vocab-size", o.vocab_size, "pieces in the vocabulary, end-of-text included")
      ->capture_default_str();
  train->add_option("--model-type", o.model_type, "bpe or unigram")->capture_default_str();
  train->add_option("-o,--output", a->output, "directory to write tokenizer.model and tokenizer.json into")
      ->required();
  train->add_option("--format", a->format, "input format: auto (.jsonl/.ndjson are JSONL), text, jsonl")
      ->capture_default_str();
  train->add_option("--jsonl-field", o.read.jsonl_field, "JSONL field holding the text")->capture_default_str();
  train->add_flag("--strict", o.read.strict, "a JSONL line that is not an object with the field is an error");
  train->add_option("--include", o.read.include, "glob of files to read inside directories (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);  // one value each: the inputs follow
  train->add_option("--exclude", o.read.exclude, "glob of files to skip inside directories (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);  // one value each: the inputs follow
  train->add_option("--separator", o.read.document_separator, "a line that separates documents inside a file");
  train->add_option("--character-coverage", o.character_coverage, "share of characters covered by pieces")
      ->capture_default_str();
  train->add_option("--byte-fallback", o.byte_fallback, "unknown characters as byte pieces (needs vocab >= 512)")
      ->capture_default_str();
  train->add_option("--max-sentences", o.max_sentences, "sentences sampled for training")->capture_default_str();
  train->add_option("--threads", o.num_threads, "training threads (0 = one per core)")->capture_default_str();
  cmd->footer(
      "Example:\n  hwtrain tokenizer train --input corpus/ --vocab-size 16000 --model-type bpe --output tok/\n"
      "  hwtrain prepare corpus/ --tokenizer tok/ -o data/corpus/");
  return {cmd, [a, train] {
            init_logging();
            if (!train->parsed()) return 2;
            a->options.read.format = parse_input_format(a->format);
            std::vector<fs::path> inputs(a->inputs.begin(), a->inputs.end());
            TokenizerTrainStats stats = train_tokenizer(inputs, a->output, a->options);
            log_info("tokenizer: {}", describe(stats));
            log_info("wrote {} and {}/tokenizer.json", stats.model.string(), a->output);
            return 0;
          }};
}

}  // namespace hwt::cli
