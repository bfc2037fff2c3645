// CsvSink: metrics.csv (one row per logged step, columns = step_fields()) and eval.csv (one row
// per evaluation, columns = eval_fields()) in the run directory. Two files rather than one with
// a type column, so each stays rectangular and loads directly into a spreadsheet or pandas.
// Unknown values are empty cells; numbers use the shortest text that reads back exactly.
// Monitor samples are not written here (they are in metrics.jsonl and TensorBoard).
#pragma once
#include <filesystem>

#include "hwtrain/obs/metrics.h"
#include "hwtrain/obs/sink_file.h"

namespace hwt {

class CsvSink : public MetricSink {
 public:
  static constexpr const char* kStepFileName = "metrics.csv";
  static constexpr const char* kEvalFileName = "eval.csv";
  // Opens both files (headers written unless appending to a non-empty file); IoError otherwise.
  explicit CsvSink(const std::filesystem::path& run_dir, bool append = false);
  ~CsvSink() override { flush(); }

  void on_step(const StepMetrics& m) override;
  void on_eval(const EvalMetrics& m) override;
  void flush() override;

 private:
  SinkFile steps_;
  SinkFile evals_;
};

// The CSV cell for a value: "" when unknown, else the shortest round-trip decimal form.
std::string csv_number(std::optional<double> v);

}  // namespace hwt
