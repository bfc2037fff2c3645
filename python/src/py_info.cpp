// What the Python API asks without training: the doctor, the resolved config, the plan (as
// `hwtrain plan --json`), the HardwareAwareOptimizer facade, the dataset a config reads, preparing
// text into a token file, and reading a run's metrics.jsonl back. JSON crosses into Python as
// text (the package's json.loads makes dicts of it): one format, the one the files already use.
#include <pybind11/stl.h>

#include <sstream>

#include "bindings.h"
#include "hwtrain/cli/run_setup.h"
#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/data/default_corpus.h"
#include "hwtrain/data/prepare.h"
#include "hwtrain/hw/doctor.h"
#include "hwtrain/hw/hardware_preset.h"
#include "hwtrain/obs/jsonl_sink.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/obs/metrics_json.h"
#include "hwtrain/run/hardware_aware_optimizer.h"
#include "hwtrain/run/run_bindings.h"
#include "py_config.h"

namespace py = pybind11;

namespace hwt::pymod {

namespace {

// model.vocab_size as `hwtrain plan` resolves it: from the data, without preparing anything.
RunConfig planning_config(const ConfigInput& input) {
  RunConfig config = read_config(input);
  if (config.model.vocab_size == 0) {
    config.model.vocab_size = resolve_vocab_size(config.model, data_vocab_size(config.data));
  }
  return config;
}

// `hwtrain doctor` (text) or, with as_json, {"hardware": profile, "findings": [...]}.
std::string doctor(bool as_json) {
  init_logging(-1, "warn");
  py::gil_scoped_release nogil;  // the GEMM benchmark takes a fraction of a second
  if (!as_json) {
    std::ostringstream out;
    run_doctor(false, out);
    return out.str();
  }
  const HardwareProfile profile = detect_hardware();
  nlohmann::json j;
  j["hardware"] = to_json(profile);
  j["findings"] = findings_to_json(diagnose(profile));
  return j.dump();
}

// `hwtrain plan --json [--preset NAME --gpus G --nodes N]`.
std::string plan_json(const ConfigInput& input, const std::string& preset, int64_t gpus_per_node, int64_t nodes) {
  init_logging(-1, "warn");
  RunConfig config = planning_config(input);
  py::gil_scoped_release nogil;
  HardwareProfile hw;
  PlanContext ctx;
  if (!preset.empty()) {
    auto p = hardware_preset(preset, static_cast<int>(gpus_per_node * nodes));
    if (!p) {
      throw ConfigError("preset '" + preset + "' is unknown: expected one of " + join(hardware_preset_names()) +
                        did_you_mean(preset, hardware_preset_names()));
    }
    hw = *p;
    hw.num_nodes = static_cast<int>(nodes);
    ctx.paper = true;
    ctx.world_size = std::max<int64_t>(1, static_cast<int64_t>(hw.gpus.size()));
  } else {
    hw = detect_hardware();
  }
  return make_plan(hw, config, ctx).to_json();
}

// The dataset a config trains on, prepared (or found in the cache) as `hwtrain train` does it.
std::string dataset_info(const ConfigInput& input) {
  init_logging();
  RunConfig config = read_config(input);
  py::gil_scoped_release nogil;
  auto data = cli::open_dataset(config);
  nlohmann::json j;
  j["path"] = data->path().string();
  j["train_tokens"] = data->num_train_tokens();
  j["val_tokens"] = data->num_val_tokens();
  j["vocab_size"] = data->vocab_size();
  j["tokenizer"] = data->tokenizer_name();
  return j.dump();
}

// `hwtrain prepare INPUTS -o OUTPUT` with the data.* options of a config.
std::string prepare_data(const std::vector<std::string>& inputs, const std::string& output, const ConfigInput& input) {
  init_logging();
  RunConfig config = read_config(input);
  PrepareOptions options = PrepareOptions::from_config(config.data);
  options.progress = false;
  py::gil_scoped_release nogil;
  std::vector<fs::path> paths(inputs.begin(), inputs.end());
  PrepareStats stats = prepare(paths, output, options);
  log_info("{}", describe(stats));
  nlohmann::json j;
  j["output"] = stats.output.string();
  j["files"] = stats.num_files;
  j["bytes"] = stats.num_bytes;
  j["documents"] = stats.num_documents;
  j["description"] = describe(stats);
  return j.dump();
}

// metrics.jsonl as read_metrics_jsonl() reads it (a resumed run's repeated steps replaced).
std::string read_metrics(const std::string& path) {
  MetricHistory h = read_metrics_jsonl(path);
  nlohmann::json j;
  j["steps"] = nlohmann::json::array();
  for (const auto& m : h.steps) j["steps"].push_back(to_json(m));
  j["evals"] = nlohmann::json::array();
  for (const auto& m : h.evals) j["evals"].push_back(to_json(m));
  j["monitor"] = nlohmann::json::array();
  for (const auto& m : h.monitor) j["monitor"].push_back(to_json(m));
  j["bad_lines"] = h.num_bad_lines;
  return j.dump();
}

// The HardwareAwareOptimizer of a config: hardware detected and the run planned once, on creation.
class Optimizer {
 public:
  explicit Optimizer(const ConfigInput& input) {
    init_logging(-1, "warn");
    RunConfig config = planning_config(input);
    py::gil_scoped_release nogil;
    impl_ = std::make_unique<HardwareAwareOptimizer>(std::move(config));
  }
  std::string hardware_summary() const { return impl_->get_hardware_summary(); }
  std::string optimization_summary() const { return impl_->get_optimization_summary(); }
  std::string optimization_metrics() const { return impl_->get_optimization_metrics().dump(); }
  std::string plan() const { return impl_->plan().to_json(); }
  std::string hardware() const { return to_json(impl_->hardware()).dump(); }

 private:
  std::unique_ptr<HardwareAwareOptimizer> impl_;
};

ConfigInput input_of(const std::string& file, const py::sequence& items, const std::string& source) {
  return config_input(file, items, source);
}

}  // namespace

void register_info(py::module_& m) {
  m.def("doctor", &doctor, py::arg("as_json") = false,
        "The hardware summary and the findings that slow training (hwtrain doctor); JSON text with as_json.");
  m.def(
      "resolved_config",
      [](const std::string& file, const py::sequence& items, const std::string& source, bool validate) {
        return read_config(input_of(file, items, source), validate).to_json();
      },
      py::arg("file"), py::arg("items"), py::arg("source"), py::arg("validate") = true,
      "The resolved RunConfig as JSON text (defaults, the TOML file, then the items).");
  m.def(
      "plan",
      [](const std::string& file, const py::sequence& items, const std::string& source, const std::string& preset,
         int64_t gpus, int64_t nodes) { return plan_json(input_of(file, items, source), preset, gpus, nodes); },
      py::arg("file"), py::arg("items"), py::arg("source"), py::arg("preset") = "", py::arg("gpus_per_node") = 1,
      py::arg("nodes") = 1, "plan.json for this machine or a named accelerator preset, as JSON text.");
  m.def("hardware_presets", &hardware_preset_names, "Names `plan(preset=...)` accepts.");
  m.def(
      "dataset_info",
      [](const std::string& file, const py::sequence& items, const std::string& source) {
        return dataset_info(input_of(file, items, source));
      },
      py::arg("file"), py::arg("items"), py::arg("source"),
      "Prepares (or finds cached) the config's dataset; its path and token counts as JSON text.");
  m.def(
      "prepare",
      [](const std::vector<std::string>& inputs, const std::string& output, const std::string& file,
         const py::sequence& items, const std::string& source) {
        return prepare_data(inputs, output, input_of(file, items, source));
      },
      py::arg("inputs"), py::arg("output"), py::arg("file"), py::arg("items"), py::arg("source"),
      "hwtrain prepare: text files or directories into a token file (.hwt) or dataset directory.");
  m.def("read_metrics", &read_metrics, py::arg("path"), "A metrics.jsonl read back, as JSON text.");
  py::class_<Optimizer>(m, "Optimizer", "hwt::HardwareAwareOptimizer for a config (detects and plans on creation)")
      .def(py::init([](const std::string& file, const py::sequence& items, const std::string& source) {
             return std::make_unique<Optimizer>(input_of(file, items, source));
           }),
           py::arg("file"), py::arg("items"), py::arg("source"))
      .def("hardware_summary", &Optimizer::hardware_summary)
      .def("optimization_summary", &Optimizer::optimization_summary)
      .def("optimization_metrics", &Optimizer::optimization_metrics)
      .def("plan", &Optimizer::plan)
      .def("hardware", &Optimizer::hardware);
}

}  // namespace hwt::pymod
