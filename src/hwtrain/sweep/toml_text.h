// TOML text parsed with the one error message every config reader gives: a ConfigError
// "<source>:<line>:<column>: TOML syntax error: <what>" (train configs, sweep files, the base config
// a study records, the best config a sweep writes).
#pragma once
#include <string>
#include <toml++/toml.h>

namespace hwt::sweep {

toml::table parse_toml_text(const std::string& text, const std::string& source);

}  // namespace hwt::sweep
