#include "hwtrain/sweep/metrics_tail.h"

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <system_error>

namespace hwt::sweep {

MetricsTail::MetricsTail(std::filesystem::path path, std::string metric)
    : path_(std::move(path)), metric_(std::move(metric)) {}

std::vector<MetricPoint> MetricsTail::read_new() {
  std::vector<MetricPoint> out;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path_, ec);
  if (ec) return out;
  if (size < offset_) offset_ = 0;  // rewritten from the start
  if (size == offset_) return out;
  std::ifstream in(path_, std::ios::binary);
  if (!in) return out;
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string chunk(static_cast<std::size_t>(size - offset_), '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  chunk.resize(static_cast<std::size_t>(in.gcount()));
  const auto last_newline = chunk.rfind('\n');
  if (last_newline == std::string::npos) return out;  // only a partial line so far
  std::size_t start = 0;
  while (start <= last_newline) {
    const auto end = chunk.find('\n', start);
    parse_line(chunk.substr(start, end - start), out);
    start = end + 1;
  }
  offset_ += last_newline + 1;
  return out;
}

void MetricsTail::parse_line(const std::string& line, std::vector<MetricPoint>& out) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) return;
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    ++num_bad_lines_;
    return;
  }
  const std::string type = j["type"].get<std::string>();
  if (type != "step" && type != "eval") return;  // monitor records and later kinds: not ours
  if (!j.contains("step") || !j["step"].is_number_integer()) {
    ++num_bad_lines_;
    return;
  }
  const auto it = j.find(metric_);
  if (it == j.end()) return;
  MetricPoint p;
  p.step = j["step"].get<std::int64_t>();
  if (it->is_null()) {
    p.value = std::numeric_limits<double>::quiet_NaN();
  } else if (it->is_number()) {
    p.value = it->get<double>();
  } else {
    ++num_bad_lines_;
    return;
  }
  out.push_back(p);
}

}  // namespace hwt::sweep
