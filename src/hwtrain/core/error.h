// Typed exceptions for the boundaries of hwtrain (config, data, I/O, hardware, resources).
// Each message names the key or file, the value found, what would be valid, and a hint where one
// helps. Library code throws; only the CLI turns exceptions into exit codes.
#pragma once
#include <stdexcept>
#include <string>

namespace hwt {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  virtual const char* kind() const { return "error"; }
};

// A config key, value or combination of values is invalid.
class ConfigError : public Error {
 public:
  using Error::Error;
  const char* kind() const override { return "config error"; }
};

// Input data (corpus, token file, shard, manifest) is missing, empty or corrupt.
class DataError : public Error {
 public:
  using Error::Error;
  const char* kind() const override { return "data error"; }
};

// A file or directory cannot be read or written, or a checkpoint is malformed.
class IoError : public Error {
 public:
  using Error::Error;
  const char* kind() const override { return "I/O error"; }
};

// The hardware cannot do what was asked (a model that does not fit, an unsupported dtype).
class HardwareError : public Error {
 public:
  using Error::Error;
  const char* kind() const override { return "hardware error"; }
};

// A training step ran out of memory (real, predicted above the threshold, or injected by a test).
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
  const char* kind() const override { return "out of memory"; }
};

}  // namespace hwt
