// broadcast_from_owners (dist/bucketed_broadcast.h): the transfers planned alike on every rank,
// packed into two reused buffers, two in flight.
#include "hwtrain/dist/bucketed_broadcast.h"

#include <algorithm>
#include <map>

namespace hwt {
namespace {

// One broadcast: a lone contiguous tensor itself (the owner sends it, the others receive into
// theirs: no copy), or several packed into a flat buffer.
struct Transfer {
  int root = 0;
  std::vector<torch::Tensor> tensors;
  torch::Tensor flat;
  ProcessGroup::WorkPtr work;
};

// Per owner and dtype, the owner's tensors in order, in runs of at most `bucket_bytes` (a larger
// one goes alone). Every rank computes the same list.
std::vector<Transfer> plan_transfers(const std::vector<torch::Tensor>& tensors, const std::vector<int>& owner,
                                     int world_size, int64_t bucket_bytes) {
  std::vector<Transfer> out;
  for (int r = 0; r < world_size; ++r) {
    std::map<c10::ScalarType, std::vector<torch::Tensor>> by_dtype;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (owner[i] == r) by_dtype[tensors[i].scalar_type()].push_back(tensors[i].detach());
    }
    for (auto& [dtype, mine] : by_dtype) {
      Transfer t;
      t.root = r;
      int64_t bytes = 0;
      for (auto& x : mine) {
        const int64_t b = x.numel() * static_cast<int64_t>(x.element_size());
        if (!t.tensors.empty() && bytes + b > bucket_bytes) {
          out.push_back(std::move(t));
          t = Transfer();
          t.root = r;
          bytes = 0;
        }
        t.tensors.push_back(x);
        bytes += b;
      }
      if (!t.tensors.empty()) out.push_back(std::move(t));
    }
  }
  return out;
}

bool packs(const Transfer& t) { return t.tensors.size() > 1 || !t.tensors.front().is_contiguous(); }

int64_t transfer_bytes(const Transfer& t) {
  int64_t bytes = 0;
  for (const auto& x : t.tensors) bytes += x.numel() * static_cast<int64_t>(x.element_size());
  return bytes;
}

// `slot` is one of the two packing buffers, as bytes: a transfer reuses the one its predecessor but
// one has finished with (waited for), so at most two buckets exist however late the backend drops
// its own reference to a finished work's tensors (Gloo's worker thread does so after the wait).
void start_transfer(Transfer& t, const torch::Tensor& slot, ProcessGroup& group) {
  if (!packs(t)) {
    t.flat = t.tensors.front().view(-1);
  } else {
    t.flat = slot.narrow(0, 0, transfer_bytes(t)).view(t.tensors.front().scalar_type());
    if (group.rank() == t.root) {  // each copied into its place: no temporary (a non-contiguous one's reshape)
      int64_t offset = 0;
      for (const auto& x : t.tensors) {
        t.flat.narrow(0, offset, x.numel()).view(x.sizes()).copy_(x);
        offset += x.numel();
      }
    }
  }
  t.work = group.broadcast(t.flat, t.root);
}

void finish_transfer(Transfer& t, ProcessGroup& group, const std::string& what) {
  group.wait(t.work, what + " from rank " + std::to_string(group.world_rank(t.root)));
  if (packs(t) && group.rank() != t.root) {
    int64_t offset = 0;
    for (auto& x : t.tensors) {
      x.copy_(t.flat.narrow(0, offset, x.numel()).view(x.sizes()));
      offset += x.numel();
    }
  }
  t.flat = torch::Tensor();
  t.work.reset();
}

}  // namespace

void broadcast_from_owners(const std::vector<torch::Tensor>& tensors, const std::vector<int>& owner,
                           ProcessGroup& group, int64_t bucket_bytes, const std::string& what) {
  TORCH_CHECK(owner.size() == tensors.size(), "broadcast_from_owners: ", owner.size(), " owners for ",
              tensors.size(), " tensors");
  torch::NoGradGuard no_grad;
  constexpr size_t kInFlight = 2;  // launching a third waits for the oldest: at most two buckets packed
  std::vector<Transfer> transfers =
      plan_transfers(tensors, owner, group.world_size(), std::max<int64_t>(1, bucket_bytes));
  int64_t largest = 0;
  size_t packed = 0;
  torch::TensorOptions bytes = torch::TensorOptions().dtype(torch::kUInt8);
  for (const auto& t : transfers) {
    if (!packs(t)) continue;
    largest = std::max(largest, transfer_bytes(t));
    bytes = bytes.device(t.tensors.front().device());
    ++packed;
  }
  std::vector<torch::Tensor> slots;  // packed transfer k uses slot k % 2
  for (size_t k = 0; k < std::min(kInFlight, packed); ++k) slots.push_back(torch::empty({largest}, bytes));
  size_t packed_seen = 0;
  size_t oldest = 0;
  for (size_t i = 0; i < transfers.size(); ++i) {
    if (i - oldest == kInFlight) finish_transfer(transfers[oldest++], group, what);
    start_transfer(transfers[i], packs(transfers[i]) ? slots[packed_seen++ % slots.size()] : torch::Tensor(), group);
  }
  while (oldest < transfers.size()) finish_transfer(transfers[oldest++], group, what);
}

}  // namespace hwt
