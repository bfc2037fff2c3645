#include "hwtrain/core/fault_injection.h"

#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <sstream>
#include <string>

#include "hwtrain/core/error.h"

namespace hwt {

namespace {

struct Fault {
  bool armed = false;
  std::string point;
  int signal = 0;
  long nth = 1;
};

Fault parse_fault() {
  Fault f;
  const char* spec = std::getenv("HWTRAIN_FAULT");
  if (!spec || !*spec) return f;
  std::istringstream in(spec);
  std::string point, rank, sig, nth = "1";
  if (!std::getline(in, point, ':') || !std::getline(in, rank, ':') || !std::getline(in, sig, ':')) {
    throw ConfigError(std::string("HWTRAIN_FAULT = '") + spec + "' is not <point>:<rank>:<KILL|STOP>[:<n>]");
  }
  std::getline(in, nth);
  if (point != "startup" && point != "step" && point != "collective" && point != "checkpoint" && point != "shard" &&
      point != "prepare") {
    throw ConfigError("HWTRAIN_FAULT point '" + point +
                      "' is not one of startup, step, collective, checkpoint, shard, prepare");
  }
  if (sig != "KILL" && sig != "STOP") throw ConfigError("HWTRAIN_FAULT signal '" + sig + "' is not KILL or STOP");
  const char* my_rank = std::getenv("RANK");
  char* end = nullptr;
  f.nth = std::strtol(nth.c_str(), &end, 10);
  if (nth.empty() || *end != '\0' || f.nth < 1) throw ConfigError("HWTRAIN_FAULT count '" + nth + "' is not a positive integer");
  f.armed = rank == (my_rank && *my_rank ? std::string(my_rank) : std::string("0"));
  f.point = point;
  f.signal = sig == "KILL" ? SIGKILL : SIGSTOP;
  return f;
}

}  // namespace

void fault_point(const char* point) {
  static const Fault fault = parse_fault();
  static std::atomic<long> passed{0};
  if (!fault.armed || fault.point != point) return;
  if (++passed == fault.nth) ::raise(fault.signal);
}

}  // namespace hwt
