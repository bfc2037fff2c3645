#include "hwtrain/sweep/pruner.h"

namespace hwt::sweep {

Pruner::~Pruner() = default;

}  // namespace hwt::sweep
