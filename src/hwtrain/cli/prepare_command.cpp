// `hwtrain prepare`: text files and directories -> a token file (.hwt) with a train/validation split.
#include <iostream>

#include "hwtrain/cli/commands.h"
#include "hwtrain/data/prepare.h"
#include "hwtrain/obs/log.h"

namespace hwt::cli {

namespace {
struct PrepareArgs {
  std::vector<std::string> inputs;
  std::string output;
  PrepareOptions options;
};
}  // namespace

Command add_prepare(CLI::App& app) {
  auto a = std::make_shared<PrepareArgs>();
  CLI::App* cmd = app.add_subcommand("prepare", "tokenize text files or directories into a token file (.hwt)");
  cmd->add_option("inputs", a->inputs, "text files or directories (searched recursively)")->required();
  cmd->add_option("-o,--output", a->output, "token file to write, e.g. data/corpus.hwt")->required();
  cmd->add_option("--tokenizer", a->options.tokenizer, "byte, or a SentencePiece .model file")->capture_default_str();
  cmd->add_option("--val-fraction", a->options.val_fraction, "share of documents held out")->capture_default_str();
  cmd->add_option("--split-seed", a->options.split_seed, "seed of the train/validation split")->capture_default_str();
  cmd->add_option("--separator", a->options.document_separator,
                  "a line that separates documents inside a file (fortune files: %)");
  cmd->footer("Example:\n  hwtrain prepare /usr/share/games/fortunes --separator % -o data/fortunes.hwt");
  return {cmd, [a] {
            init_logging();
            std::vector<fs::path> inputs(a->inputs.begin(), a->inputs.end());
            PrepareStats stats = prepare_token_file(inputs, a->output, a->options);
            log_info("{}", describe(stats));
            log_info("wrote {}", a->output);
            return 0;
          }};
}

}  // namespace hwt::cli
