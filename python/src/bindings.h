// The parts of the _hwtrain module, each registered by its own file (module.cpp calls them).
#pragma once
#include <pybind11/pybind11.h>

namespace hwt::pymod {

void register_info(pybind11::module_& m);   // doctor, resolved config, plan, optimizer, data (py_info.cpp)
void register_train(pybind11::module_& m);  // train (py_train.cpp)

}  // namespace hwt::pymod
