// error_of<E>(f): the message of the E that f throws; a test failure (and "") when f throws no E.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace hwt::testing {

template <class E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception of the expected type";
  return "";
}

}  // namespace hwt::testing
