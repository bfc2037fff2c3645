// The subcommands of the hwtrain binary. Each add_* function registers its options on `app`
// and returns the code that runs it.
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace hwt::cli {

struct Command {
  CLI::App* app;
  std::function<int()> run;
};

Command add_train(CLI::App& app);
Command add_prepare(CLI::App& app);
Command add_generate(CLI::App& app);
Command add_eval(CLI::App& app);
Command add_doctor(CLI::App& app);
Command add_plan(CLI::App& app);
Command add_report(CLI::App& app);
Command add_launch(CLI::App& app);
Command add_tokenizer(CLI::App& app);
Command add_profile(CLI::App& app);
Command add_export(CLI::App& app);
Command add_sweep(CLI::App& app);
Command add_lr_find(CLI::App& app);

inline std::vector<Command> all_commands(CLI::App& app) {
  return {add_train(app),  add_prepare(app), add_tokenizer(app), add_generate(app), add_eval(app),
          add_doctor(app), add_plan(app),    add_report(app),    add_profile(app), add_launch(app),
          add_export(app), add_sweep(app), add_lr_find(app)};
}

// CLI11's parse error `e` as one line on stderr, "hwtrain: [command: ]what": an unknown command or
// option named with the closest valid one ("unknown command 'trian' (did you mean 'train'?)"), else
// CLI11's message with the command's --help. Help and --version print as CLI11 prints them. Returns
// the exit code (CLI11's: 0 for help, non-zero otherwise).
int report_parse_error(CLI::App& app, const CLI::ParseError& e, int argc, char** argv);

// Options shared by commands that read a run configuration.
struct ConfigOptions {
  std::string config_file;
  std::vector<std::string> overrides;
  std::string data;
};
void add_config_options(CLI::App* cmd, ConfigOptions& options);

}  // namespace hwt::cli
