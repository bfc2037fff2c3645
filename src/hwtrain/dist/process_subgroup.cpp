// ProcessGroup::subgroup: a mesh's tensor-, pipeline- or data-parallel group over the world's store
// (process_group.h says what it offers).
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "hwtrain/core/error.h"
#include "hwtrain/dist/backend_factory.h"
#include "hwtrain/dist/dist_error.h"
#include "hwtrain/dist/heartbeat.h"
#include "hwtrain/dist/liveness.h"
#include "hwtrain/dist/process_group.h"
#include "hwtrain/dist/store_text.h"

namespace hwt {

std::shared_ptr<ProcessGroup> ProcessGroup::subgroup(const std::vector<int>& ranks, const std::string& name) {
  // make_shared cannot reach the private constructor.
  return std::shared_ptr<ProcessGroup>(new ProcessGroup(SubgroupTag{}, *this, ranks, name));
}

ProcessGroup::ProcessGroup(SubgroupTag, ProcessGroup& parent, std::vector<int> members, const std::string& name)
    : rank_(-1),
      world_size_(static_cast<int>(members.size())),
      device_(parent.device_),
      backend_name_(parent.backend_name_),
      master_(parent.master_),
      bind_host_(parent.bind_host_),
      parent_(&parent),
      timeout_(parent.timeout_),
      completed_(parent.completed_) {
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] < 0 || members[i] >= parent.world_size_ || (i > 0 && members[i] <= members[i - 1])) {
      throw ConfigError("process group '" + name + "': its ranks must be ascending ranks of the " +
                        std::to_string(parent.world_size_) + "-rank group");
    }
    members_.push_back(parent.world_rank(members[i]));
    if (members[i] == parent.rank_) rank_ = static_cast<int>(i);
  }
  if (rank_ < 0) throw ConfigError("process group '" + name + "': this rank is not one of its members");
  store_ = c10::make_intrusive<c10d::PrefixStore>("sub/" + name, parent.store_);
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("pg/" + backend_name_, store_);
  try {
    if (backend_name_ == "nccl") {
      backend_ = make_nccl_backend(prefixed, rank_, world_size_, timeout_, device_.index() < 0 ? 0 : device_.index());
    } else {
      backend_ = make_gloo_backend(prefixed, rank_, world_size_, timeout_, bind_host_);
    }
  } catch (const std::exception& e) {
    parent.failed_ = true;
    throw DistError("cannot create the " + backend_name_ + " process group '" + name + "' (rank " +
                    std::to_string(parent.rank_) + "): " + error_text(e) + "; " + parent.blame());
  }
}

}  // namespace hwt
