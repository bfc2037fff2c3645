// The per-step losses a run wrote to its metrics.jsonl, in step order: what the end-to-end tests
// compare between runs (one process against several, a resumed run against a straight one).
#pragma once
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace hwt::testing {

// The step records of a run's metrics.jsonl, in file order.
inline std::vector<nlohmann::json> step_records(const std::filesystem::path& jsonl) {
  std::vector<nlohmann::json> out;
  std::ifstream in(jsonl);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("type", "") == "step") out.push_back(std::move(j));
  }
  return out;
}

inline std::vector<double> step_losses(const std::filesystem::path& jsonl) {
  std::vector<double> out;
  for (const auto& j : step_records(jsonl)) {
    if (j["loss"].is_number()) out.push_back(j["loss"]);
  }
  return out;
}

// The steps it wrote, in file order.
inline std::vector<int64_t> logged_steps(const std::filesystem::path& jsonl) {
  std::vector<int64_t> out;
  for (const auto& j : step_records(jsonl)) out.push_back(j["step"].get<int64_t>());
  return out;
}

}  // namespace hwt::testing
