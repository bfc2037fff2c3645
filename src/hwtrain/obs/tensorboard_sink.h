// TensorBoardSink: a TensorBoard event file (tfrecord.h) with one scalar per known metric.
// Tags are "<group>/<metric>" from the field tables (train/loss, perf/tokens_per_second,
// memory/rss_bytes, eval/val_loss, ...) and hw/... for monitor samples. The file is
// <dir>/events.out.tfevents.<unix time>.<hostname>; a resumed run starts a new file beside the
// old ones, which TensorBoard merges.
#pragma once
#include <filesystem>
#include <memory>
#include <string>

#include "hwtrain/obs/metrics.h"
#include "hwtrain/obs/sink_file.h"

namespace hwt {

class TensorBoardSink : public MetricSink {
 public:
  // Creates `dir` and the event file and writes the file-version record; IoError otherwise.
  explicit TensorBoardSink(const std::filesystem::path& dir);
  ~TensorBoardSink() override { flush(); }

  void on_step(const StepMetrics& m) override;
  void on_eval(const EvalMetrics& m) override;
  void on_monitor(const MonitorSample& s) override;
  void flush() override { file_->flush(); }

  const std::filesystem::path& path() const { return file_->path(); }

 private:
  void write_scalars(int64_t step, const std::vector<std::pair<std::string, float>>& scalars);

  std::unique_ptr<SinkFile> file_;
};

}  // namespace hwt
