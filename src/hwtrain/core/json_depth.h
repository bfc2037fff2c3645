// Nesting bounds for JSON read from disk. nlohmann builds nested values recursively: a crafted
// "[[[[..." of 8 MB took 1 GB of memory before it failed, and a safetensors header may hold 100 MB.
// Every file hwtrain reads nests a few levels; the bound is far above that.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace hwt {

inline constexpr int kMaxJsonDepth = 64;

// A parse callback that fails, as nlohmann's own parse errors do (json::parse_error, caught where
// those are), at the first value nested deeper than kMaxJsonDepth levels.
inline nlohmann::json::parser_callback_t json_depth_limit() {
  return [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth) {
      throw nlohmann::json::parse_error::create(
          101, 0, "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels", nullptr);
    }
    return true;
  };
}

// nlohmann::json::parse(text) within the nesting bound.
inline nlohmann::json parse_json_bounded(const std::string& text) {
  return nlohmann::json::parse(text, json_depth_limit());
}

// The same, or a discarded value (is_discarded()) where the text is not JSON or nests too deeply,
// as nlohmann::json::parse(text, nullptr, false) gives.
inline nlohmann::json parse_json_bounded_or_discarded(const std::string& text) {
  try {
    return parse_json_bounded(text);
  } catch (const nlohmann::json::exception&) {
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
}

}  // namespace hwt
