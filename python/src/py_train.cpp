// train(): the job `hwtrain train` runs (cli::run_train: config, run directory, data, plan,
// trainer, sinks, checkpoints, sample), in this process with the GIL released, and what it did
// as JSON: every step's metrics (the records of metrics.jsonl), the evaluations, the checkpoint.
//
// Ctrl-C. Python's SIGINT handler only sets a flag that Python acts on once it runs again, which
// would be after the whole run. So while the job runs, SIGINT goes to a handler of ours: during
// the steps run_train's InterruptScope takes it (stop at the end of the step, final evaluation
// and checkpoint, as in the binary); before the steps (data preparation, planning) ours records it
// and RunRecorder hands it to the trainer when training begins, which then stops after its first
// step. A second SIGINT ends the process at once, as in the binary. Afterwards Python's handlers
// are back and the result names the signal; the package then raises KeyboardInterrupt.
#include <pybind11/stl.h>
#include <signal.h>

#include <atomic>

#include "bindings.h"
#include "hwtrain/cli/train_run.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/signal_latch.h"
#include "hwtrain/obs/metrics_json.h"
#include "hwtrain/run/run_config.h"
#include "hwtrain/train/interrupt.h"
#include "py_config.h"

namespace py = pybind11;

namespace hwt::pymod {

namespace {

std::atomic<int> g_early_signal{0};  // SIGINT outside the InterruptScope of run_train

// Our SIGINT latch for the duration of the call (core/signal_latch.h); Python's handler is
// restored by its destructor, and run_train's InterruptScope nests inside it.
SignalLatchOptions early_sigint() {
  g_early_signal.store(0);
  SignalLatchOptions o;
  o.flag = &g_early_signal;
  o.message = "\nhwtrain: interrupted; the run stops after its first step (checkpoint follows). "
              "Press Ctrl-C again to exit now.\n";
  o.signals = {SIGINT};
  return o;
}

// Records what the trainer reports (every step, not only metrics.jsonl's log_interval-th) and
// passes an early Ctrl-C on to the trainer's interrupt flag when training begins.
class RunRecorder : public Callback {
 public:
  std::string name() const override { return "python_result"; }
  void on_train_begin(TrainerControl& t) override {
    run_dir = t.run_dir().string();
    if (int sig = g_early_signal.load(); sig != 0 && interrupt_signal() == 0) set_interrupt_signal(sig);
  }
  void on_step_end(TrainerControl&, const StepMetrics& m) override { steps.push_back(hwt::to_json(m)); }
  void on_evaluation_end(TrainerControl&, const EvalMetrics& m) override { evals.push_back(hwt::to_json(m)); }
  void on_checkpoint(TrainerControl&, const std::filesystem::path& p) override { checkpoint = p.string(); }
  void on_train_end(TrainerControl& t) override {
    num_steps = t.step();
    elapsed_seconds = t.elapsed_seconds();
  }

  std::string run_dir, checkpoint;
  nlohmann::json steps = nlohmann::json::array(), evals = nlohmann::json::array();
  int64_t num_steps = 0;
  double elapsed_seconds = 0;
};

const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : nullptr; }

std::string train(const ConfigInput& input, const std::string& out, const std::string& resume,
                  const std::string& init_from, bool overwrite) {
  // Keys and types checked here, so that messages name the Python source; run_train checks
  // ranges (on resume against the checkpoint's config, which it reads first).
  read_config(input, /*validate=*/false);
  cli::TrainArgs args;
  args.config.config_file = input.file;
  args.config.overrides = override_assignments(input);
  args.out = out;
  args.resume = resume;
  args.init_from = init_from;
  args.overwrite = overwrite;
  auto recorder = std::make_shared<RunRecorder>();
  args.extra_callbacks.push_back(recorder);
  int signal = 0;
  {
    py::gil_scoped_release nogil;
    SignalLatch guard(early_sigint());
    cli::run_train(args);
    signal = g_early_signal.load();
    if (signal == 0) signal = interrupt_signal();  // run_train's scope began by clearing it
  }
  nlohmann::json j;
  j["run_dir"] = recorder->run_dir;
  j["steps"] = recorder->num_steps;
  j["elapsed_seconds"] = recorder->elapsed_seconds;
  j["history"] = std::move(recorder->steps);
  j["evals"] = std::move(recorder->evals);
  j["checkpoint"] = recorder->checkpoint.empty() ? nlohmann::json() : nlohmann::json(recorder->checkpoint);
  j["interrupted"] = signal_name(signal) ? nlohmann::json(signal_name(signal)) : nlohmann::json();
  const fs::path run_dir(recorder->run_dir);
  if (!recorder->run_dir.empty() && fs::exists(run_dir / "plan.json")) j["plan_json"] = read_file(run_dir / "plan.json");
  if (!recorder->run_dir.empty() && fs::exists(run_dir / "config.toml")) {
    RunConfig resolved;
    resolved.apply_toml(read_file(run_dir / "config.toml"), (run_dir / "config.toml").string());
    j["config_json"] = resolved.to_json();
  }
  return j.dump();
}

}  // namespace

void register_train(py::module_& m) {
  m.def(
      "train",
      [](const std::string& file, const py::sequence& items, const std::string& source, const std::string& out,
         const std::string& resume, const std::string& init_from, bool overwrite) {
        return train(config_input(file, items, source), out, resume, init_from, overwrite);
      },
      py::arg("file"), py::arg("items"), py::arg("source"), py::arg("out") = "", py::arg("resume") = "",
      py::arg("init_from") = "", py::arg("overwrite") = false,
      "Runs `hwtrain train` in this process (GIL released); the result as JSON text.");
}

}  // namespace hwt::pymod
