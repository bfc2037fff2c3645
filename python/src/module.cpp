// _hwtrain: the compiled half of the `hwtrain` Python package (python/hwtrain/ is the other half,
// which users import). hwtrain's exceptions become Python exceptions carrying the same one-line
// message the binary prints after "hwtrain: <kind>:". All are hwtrain.Error (a RuntimeError);
// ConfigError and DataError are ValueErrors too. LibTorch's errors are RuntimeErrors, without
// their C++ backtrace.
#include <c10/util/Exception.h>

#include "bindings.h"
#include "hwtrain/core/error.h"

namespace py = pybind11;

PYBIND11_MODULE(_hwtrain, m) {
  m.doc() = "hwtrain's C++ core (use the `hwtrain` package)";
  m.attr("__version__") = HWTRAIN_VERSION;
  m.attr("torch_version") = TORCH_VERSION;
  // Base first: pybind11 tries the translators registered last first, so subclasses win.
  auto error = py::register_exception<hwt::Error>(m, "Error", PyExc_RuntimeError);
  // Both an hwtrain.Error and a ValueError (PyErr_NewException takes a tuple of bases).
  const py::tuple value_error = py::make_tuple(error, py::handle(PyExc_ValueError));
  py::register_exception<hwt::ConfigError>(m, "ConfigError", value_error);
  py::register_exception<hwt::DataError>(m, "DataError", value_error);
  py::register_exception<hwt::IoError>(m, "IoError", error.ptr());
  py::register_exception<hwt::HardwareError>(m, "HardwareError", error.ptr());
  py::register_exception<hwt::OutOfMemoryError>(m, "OutOfMemoryError", error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, (std::string("LibTorch error: ") + e.what_without_backtrace()).c_str());
    }
  });
  hwt::pymod::register_info(m);
  hwt::pymod::register_train(m);
}
