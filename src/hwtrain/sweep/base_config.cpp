#include "hwtrain/sweep/base_config.h"

#include <map>
#include <sstream>
#include <toml++/toml.h>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/sweep/toml_text.h"

namespace hwt::sweep {
namespace {

// Every leaf of `t` as "a.b.c" -> its TOML text.
void flatten(const toml::table& t, const std::string& prefix, std::map<std::string, std::string>& out) {
  for (const auto& [key, node] : t) {
    const std::string name = prefix + std::string(key.str());
    if (const toml::table* sub = node.as_table()) {
      flatten(*sub, name + ".", out);
      continue;
    }
    std::ostringstream text;
    node.visit([&](const auto& n) { text << n; });
    out[name] = text.str();
  }
}

std::map<std::string, std::string> settings(const std::string& recorded, const std::string& source) {
  std::map<std::string, std::string> out;
  if (!recorded.empty()) flatten(parse_toml_text(recorded, source), "", out);
  return out;
}

}  // namespace

std::string recorded_base_config(const std::filesystem::path& file, const std::vector<std::string>& ignored) {
  if (file.empty()) return "";
  toml::table config = parse_toml_text(read_file(file), file.string());
  for (const std::string& key : ignored) {
    const std::size_t dot = key.rfind('.');
    toml::table* parent = dot == std::string::npos ? &config : config.at_path(key.substr(0, dot)).as_table();
    if (parent) parent->erase(key.substr(dot == std::string::npos ? 0 : dot + 1));
  }
  std::ostringstream out;
  out << toml::toml_formatter(config, toml::format_flags::none);
  return out.str();
}

std::string first_base_difference(const std::string& in_study, const std::string& now) {
  const auto a = settings(in_study, "the study's base config"), b = settings(now, "the base config");
  auto ia = a.begin(), ib = b.begin();
  while (ia != a.end() || ib != b.end()) {
    if (ib == b.end() || (ia != a.end() && ia->first < ib->first)) {
      return ia->first + " = " + ia->second + " in the study, unset now";
    }
    if (ia == a.end() || ib->first < ia->first) return ib->first + " unset in the study, " + ib->second + " now";
    if (ia->second != ib->second) {
      return ia->first + " = " + ia->second + " in the study, " + ib->second + " now";
    }
    ++ia;
    ++ib;
  }
  return "";
}

}  // namespace hwt::sweep
