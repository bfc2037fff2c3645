#include "hwtrain/obs/metrics_json.h"

#include <limits>

#include "hwtrain/core/error.h"
#include "hwtrain/core/json_integer.h"

namespace hwt {

namespace {
using nlohmann::json;

json number_or_null(double v) { return v == v ? json(v) : json(nullptr); }
json count_or_null(int64_t v) { return v >= 0 ? json(v) : json(nullptr); }

double read_real(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return kUnknown;
  if (!it->is_number()) throw DataError(std::string("metric '") + key + "' is not a number");
  return it->get<double>();
}

int64_t read_count(const json& j, const char* key, int64_t unknown) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return unknown;
  // Integers only: get<int64_t>() of a float such as 1e300 is undefined behaviour.
  if (!is_json_integer_in(*it, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())) {
    throw DataError(std::string("metric '") + key + "' is " + it->dump() + ", not an integer");
  }
  return it->get<int64_t>();
}

template <class Record>
json record_to_json(const char* type, const std::vector<MetricField<Record>>& fields,
                    const Record& r) {
  json j = json::object();
  j["type"] = type;
  for (const auto& f : fields) {
    j[f.name] = f.real ? number_or_null(r.*(f.real)) : count_or_null(r.*(f.integer));
  }
  return j;
}

template <class Record>
Record record_from_json(const std::vector<MetricField<Record>>& fields, const json& j) {
  Record r;
  for (const auto& f : fields) {
    if (f.real) {
      r.*(f.real) = read_real(j, f.name);
    } else {
      r.*(f.integer) = read_count(j, f.name, r.*(f.integer));
    }
  }
  return r;
}
}  // namespace

json to_json(const StepMetrics& m) { return record_to_json("step", step_fields(), m); }
json to_json(const EvalMetrics& m) { return record_to_json("eval", eval_fields(), m); }

json to_json(const MonitorSample& s) {
  json j = json::object();
  j["type"] = "monitor";
  j["step"] = s.step;
  j["elapsed_seconds"] = number_or_null(s.elapsed_seconds);
  j["process_cpu_percent"] = number_or_null(s.process_cpu_percent);
  j["rss_bytes"] = number_or_null(s.rss_bytes);
  json gpus = json::array();
  for (const auto& g : s.gpus) {
    gpus.push_back({{"index", g.index},
                    {"utilization_percent", number_or_null(g.utilization_percent)},
                    {"memory_used_bytes", number_or_null(g.memory_used_bytes)},
                    {"memory_total_bytes", number_or_null(g.memory_total_bytes)},
                    {"temperature_celsius", number_or_null(g.temperature_celsius)},
                    {"power_watts", number_or_null(g.power_watts)}});
  }
  j["gpus"] = gpus;
  return j;
}

StepMetrics step_metrics_from_json(const json& j) { return record_from_json(step_fields(), j); }
EvalMetrics eval_metrics_from_json(const json& j) { return record_from_json(eval_fields(), j); }

MonitorSample monitor_sample_from_json(const json& j) {
  MonitorSample s;
  s.step = read_count(j, "step", -1);
  s.elapsed_seconds = read_real(j, "elapsed_seconds");
  s.process_cpu_percent = read_real(j, "process_cpu_percent");
  s.rss_bytes = read_real(j, "rss_bytes");
  auto it = j.find("gpus");
  if (it != j.end() && it->is_array()) {
    for (const auto& g : *it) {
      GpuSample gs;
      gs.index = static_cast<int>(read_count(g, "index", 0));
      gs.utilization_percent = read_real(g, "utilization_percent");
      gs.memory_used_bytes = read_real(g, "memory_used_bytes");
      gs.memory_total_bytes = read_real(g, "memory_total_bytes");
      gs.temperature_celsius = read_real(g, "temperature_celsius");
      gs.power_watts = read_real(g, "power_watts");
      s.gpus.push_back(gs);
    }
  }
  return s;
}

}  // namespace hwt
