#include <iostream>

#include "hwtrain/cli/commands.h"
#include "hwtrain/run/run_config.h"

namespace hwt::cli {

void add_config_options(CLI::App* cmd, ConfigOptions& options) {
  cmd->add_option("--config", options.config_file, "TOML config file ([model], [data], [train], ...)");
  cmd->add_option("--set", options.overrides, "override a config key, e.g. --set model.n_layer=4 (repeatable)")
      ->expected(1)  // one key=value each: `eval --set k=v RUN` keeps RUN as the checkpoint
      ->allow_extra_args(false)
      ->take_all();
  cmd->add_option("--data", options.data, "text file, directory of text files, or prepared .hwt token file");
  cmd->add_flag_callback(
      "--help-config",
      [] {
        std::cout << "# Every config key with its description and default (a config file to start from;\n"
                     "# override one with --set table.key=value).\n\n"
                  << RunConfig().to_documented_toml();
        throw CLI::Success();
      },
      "list every config key with its description and default, as TOML, and exit");
}

}  // namespace hwt::cli
