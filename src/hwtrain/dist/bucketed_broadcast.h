// Broadcasting many tensors, each from its owning rank, without a whole copy of them: a lone
// contiguous tensor goes as it is (the owner sends it, the others receive into theirs), small ones
// (and non-contiguous ones) are packed per owner and dtype into buckets of at most `bucket_bytes`,
// with two buckets in flight in two packing buffers allocated once. ZeRO-1's parameter sync after
// each step (every owner its shard) and the start-up broadcast of the initial weights from rank 0
// (DataParallel, sharded units) both use it.
#pragma once
#include <torch/torch.h>

#include <string>
#include <vector>

#include "hwtrain/dist/process_group.h"

namespace hwt {

inline constexpr int64_t kDefaultBroadcastBucketBytes = int64_t{25} << 20;  // dist.bucket_size_mb's default

// Every rank ends with tensors[i] equal to rank owner[i]'s. Collective: all ranks call it with the
// same shapes, dtypes and owners. `what` names the broadcast in a failure ("... from rank 1 failed").
void broadcast_from_owners(const std::vector<torch::Tensor>& tensors, const std::vector<int>& owner,
                           ProcessGroup& group, int64_t bucket_bytes, const std::string& what);

}  // namespace hwt
