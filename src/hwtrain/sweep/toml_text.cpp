#include "hwtrain/sweep/toml_text.h"

#include "hwtrain/core/error.h"

namespace hwt::sweep {

toml::table parse_toml_text(const std::string& text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    throw ConfigError(source + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                      ": TOML syntax error: " + std::string(e.description()));
  }
}

}  // namespace hwt::sweep
