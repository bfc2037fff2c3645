// CLI11's parse errors as hwtrain's one-line errors (see commands.h's report_parse_error).
#include <algorithm>
#include <cctype>
#include <iostream>

#include "hwtrain/cli/commands.h"
#include "hwtrain/core/strings.h"

namespace hwt::cli {

namespace {

std::vector<CLI::App*> all_subcommands(CLI::App& app) { return app.get_subcommands(std::function<bool(CLI::App*)>{}); }

// The innermost command the parser entered: `hwtrain tokenizer train ...` gives "train".
CLI::App* innermost_command(CLI::App& app) {
  CLI::App* cmd = &app;
  for (bool deeper = true; deeper;) {
    deeper = false;
    for (CLI::App* sub : all_subcommands(*cmd)) {
      if (sub->parsed()) {
        cmd = sub;
        deeper = true;
        break;
      }
    }
  }
  return cmd;
}

// "hwtrain tokenizer train" for the innermost command.
std::string command_path(const CLI::App* cmd) {
  std::string path;
  for (const CLI::App* c = cmd; c != nullptr; c = c->get_parent()) {
    path = (c->get_parent() == nullptr ? std::string("hwtrain") : c->get_name()) + (path.empty() ? "" : " " + path);
  }
  return path;
}

std::vector<std::string> option_names(const CLI::App* cmd) {
  std::vector<std::string> names;
  for (const CLI::App* c = cmd; c != nullptr; c = c->get_parent()) {  // a parent's flags (--help) apply too
    for (const CLI::Option* o : c->get_options()) {
      for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
      for (const std::string& s : o->get_snames()) names.push_back("-" + s);
    }
  }
  return names;
}

// The arguments after the innermost command's name, up to a "--" (what follows it is passed on).
std::vector<std::string> arguments_of(const CLI::App* cmd, int argc, char** argv) {
  std::vector<std::string> chain;
  for (const CLI::App* c = cmd; c->get_parent() != nullptr; c = c->get_parent())
    chain.insert(chain.begin(), c->get_name());
  std::vector<std::string> out;
  size_t matched = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (matched < chain.size()) {
      if (a == chain[matched]) ++matched;
      continue;
    }
    out.push_back(a);
  }
  return out;
}

bool looks_like_option(const std::string& a) {
  return a.size() > 1 && a[0] == '-' && !std::isdigit(static_cast<unsigned char>(a[1])) && a[1] != '.';
}

// What went wrong, in words that name the command or option and the closest valid one; "" when
// CLI11's own message says it better (a value of the wrong type, a missing option, ...).
std::string explain(CLI::App* cmd, const CLI::ParseError& e, int argc, char** argv) {
  const bool missing = dynamic_cast<const CLI::RequiredError*>(&e) != nullptr;
  const bool extra = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr;
  const std::vector<CLI::App*> subs = all_subcommands(*cmd);
  const std::vector<std::string> args = arguments_of(cmd, argc, argv);
  if ((missing || extra) && !subs.empty() && cmd->get_subcommands().empty()) {  // a command was expected here
    std::vector<std::string> names;
    for (const CLI::App* s : subs) names.push_back(s->get_name());
    for (const std::string& a : args) {
      if (looks_like_option(a)) continue;
      return "unknown command '" + a + "'" + did_you_mean(a, names) + "; commands: " + join(names);
    }
    return "a command is required: " + join(names);
  }
  if (!extra) return "";
  const std::vector<std::string> known = option_names(cmd);
  for (const std::string& a : args) {  // one that CLI11 found unexpected
    if (!looks_like_option(a) || std::string(e.what()).find(a) == std::string::npos) continue;
    const std::string name = a.substr(0, a.find('='));
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    return "unknown option '" + name + "'" + did_you_mean(name, known) + "; see " + command_path(cmd) + " --help";
  }
  return "";
}

}  // namespace

int report_parse_error(CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help, --version
  CLI::App* cmd = innermost_command(app);
  std::string what = explain(cmd, e, argc, argv);
  if (what.empty()) what = std::string(e.what()) + " (see " + command_path(cmd) + " --help)";
  const std::string where = cmd == &app ? "" : command_path(cmd).substr(std::string("hwtrain ").size()) + ": ";
  std::cerr << "hwtrain: " << where << what << "\n";
  return e.get_exit_code();
}

}  // namespace hwt::cli
