// hwtrain: the command-line entry point. Each subcommand lives in its own file and registers
// itself here; this file turns exceptions into one-line errors and exit codes (the only place
// that does).
#include <CLI/CLI.hpp>

#include <iostream>

#include "hwtrain/cli/commands.h"
#include "hwtrain/core/error.h"
#include "hwtrain/obs/log.h"

int main(int argc, char** argv) {
  CLI::App app{"hwtrain: trains GPT language models as fast as this hardware allows"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("hwtrain ") + HWTRAIN_VERSION);
  std::vector<hwt::cli::Command> commands = hwt::cli::all_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return hwt::cli::report_parse_error(app, e, argc, argv);
  }
  try {
    for (auto& c : commands) {
      if (c.app->parsed()) return c.run();
    }
    return 2;
  } catch (const hwt::Error& e) {
    std::cerr << "hwtrain: " << e.kind() << ": " << e.what() << "\n";
    return 1;
  } catch (const c10::Error& e) {
    std::cerr << "hwtrain: LibTorch error: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "hwtrain: error: " << e.what() << "\n";
    return 1;
  }
}
