// JSON form of the metric records, shared by metrics.jsonl (jsonl_sink.h) and the report reader.
// Each record is one object with "type": "step" | "eval" | "monitor" and one key per field;
// unknown values (NaN, negative counts) are written as null and read back as unknown.
#pragma once
#include <nlohmann/json.hpp>

#include "hwtrain/obs/metrics.h"

namespace hwt {

nlohmann::json to_json(const StepMetrics& m);
nlohmann::json to_json(const EvalMetrics& m);
nlohmann::json to_json(const MonitorSample& s);

// Fields missing from `j` stay unknown; a value of the wrong type throws DataError.
StepMetrics step_metrics_from_json(const nlohmann::json& j);
EvalMetrics eval_metrics_from_json(const nlohmann::json& j);
MonitorSample monitor_sample_from_json(const nlohmann::json& j);

}  // namespace hwt
