// ShardedParameters: ZeRO-2 and ZeRO-3 (Rajbhandari et al. 2020; FSDP's flat units) over c10d.
// The parameters come in units, in forward order (the embeddings, a transformer block each, the
// head: model/parameter_units.h). Each unit is laid out as one flat buffer, padded to a multiple of the world size, and rank
// r owns slice r of it: the fp32 master values of that slice, the averaged gradient of that slice,
// and (through the optimizer built over segments()) its AdamW moments. The module's parameters
// become views of the unit's flat buffer in the compute dtype (fp32, or bf16 as FSDP2's
// param_dtype), so the model runs unchanged.
//   gradients  a hook on each parameter's gradient accumulator notes when it is final; when a
//              unit's gradients are all final they are flattened (in the reduce dtype), divided by
//              the world size and reduce-scattered asynchronously while backward goes on, and the
//              parameters' own gradients are freed. At most two reductions are in flight: launching
//              a third waits for the oldest, whose shard is added to the unit's fp32 gradient shard
//              and whose whole-unit buffer is freed (FSDP bounds them the same way), so backward
//              never holds more than a few units' whole gradients. Every micro-step reduces (both
//              stages keep only the shard of the gradients); the shards accumulate in fp32.
//   ZeRO-2     the flat buffers stay whole; after the optimizer step every unit is all-gathered.
//   ZeRO-3     a unit's flat buffer exists only while the unit runs: before_forward(u) gathers it
//              (and in a forward, from begin_forward() until backward starts, also starts gathering
//              unit u + 1: prefetch; a recomputation in backward prefetches nothing),
//              after_forward(u) frees it and hooks the unit's output so that its backward gathers it
//              again (and prefetches unit u - 1, unless that unit was released: its backward reads
//              no weights); it is freed once its gradients are reduced. A unit used again later in
//              the forward (the tied rest: the embeddings, then the final norm and head) is released
//              after its first use, gathered again by before_reuse() and freed by
//              release_after_backward() once the backward of its second use is done (its first
//              use's backward reads only token ids). Freeing releases the buffer's storage (as FSDP
//              does), so the views autograd saved see the data again once it is re-gathered.
// The model calls before_forward/after_forward through its UnitHooks seam (model/parameter_units.h;
// train/sharded_training.h connects the two). Every rank must construct this with the same units.
#pragma once
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hwtrain/dist/gradient_hook.h"
#include "hwtrain/dist/gradient_sync.h"
#include "hwtrain/dist/process_group.h"
#include "hwtrain/model/deferred_init.h"
#include "hwtrain/model/parameter_units.h"

namespace hwt {

enum class ShardStage { Zero2, Zero3 };
const char* shard_stage_name(ShardStage s);  // "zero2" | "zero3"

struct ShardedUnitParams {
  std::string name;                                          // "embed", "h.3", "head"
  std::vector<std::pair<std::string, torch::Tensor>> params;  // leaves that require grad
  // For placeholder parameters (a deferred model's, model/deferred_init.h): writes their initial
  // values; the unit is filled, cut to this rank's shard and freed before the next one is made.
  InitialValue initial_value;
};

struct ShardingOptions {
  ShardStage stage = ShardStage::Zero3;
  c10::ScalarType compute_dtype = c10::kFloat;  // the parameters' dtype in forward and backward
  c10::ScalarType reduce_dtype = c10::kFloat;   // the dtype gradients are reduce-scattered in
  bool prefetch = true;                         // ZeRO-3: gather the next unit while this one runs
  bool broadcast_parameters = true;             // start every rank from rank 0's weights
};

// One parameter's elements that this rank owns: `master` is a view of the unit's fp32 master shard;
// after finish() its .grad is the averaged gradient of those elements.
struct ShardSegment {
  std::string param;   // the parameter's name
  int64_t offset = 0;  // first element, in the flattened parameter
  torch::Tensor master;
  std::string name() const { return param + "@" + std::to_string(offset); }
};

struct ShardingStats {
  int64_t all_gathers = 0, gathered_bytes = 0;        // parameters gathered
  int64_t reduce_scatters = 0, reduced_bytes = 0;     // gradients reduce-scattered
  double comm_seconds = 0;  // wall time with at least one of them in flight (counted at after_step)
  double wait_seconds = 0;  // the part of it this rank spent blocked waiting: not hidden behind compute
  int64_t peak_gathered_bytes = 0;                    // compute-dtype unit buffers allocated at once
  int64_t peak_reducing_bytes = 0;  // reduce-dtype whole-unit gradient buffers (and their shards) held at once
  double hidden_share() const { return comm_seconds > 0 ? std::max(0.0, 1.0 - wait_seconds / comm_seconds) : 0.0; }
};

class ShardedParameters : public GradientSync {
 public:
  ShardedParameters(std::shared_ptr<ProcessGroup> group, std::vector<ShardedUnitParams> units,
                    ShardingOptions options);
  ~ShardedParameters() override;  // removes the hooks
  ShardedParameters(const ShardedParameters&) = delete;
  ShardedParameters& operator=(const ShardedParameters&) = delete;

  // GradientSync: before each backward the previous micro-step's reductions are collected; finish()
  // waits for the rest and sets each segment's .grad. discard() drops a failed step's gradients.
  void begin_micro_step(bool sync_after_backward) override;
  void finish() override;
  void discard() override;
  // After finish(): each segment's gradient by its parameter's name (a view: summing it in place
  // sums the optimizer's gradient). Every rank of another group whose engine has units of the same
  // shapes holds the same elements of each (a tensor-parallel rank's norms, a tied embedding's unit).
  std::optional<std::vector<std::pair<std::string, torch::Tensor>>> gradient_shards() const override;

  // The model's unit hooks (no-ops under ZeRO-2; model/parameter_units.h).
  void before_forward(size_t unit);
  torch::Tensor after_forward(size_t unit, const torch::Tensor& out);
  void release(size_t unit);  // frees the unit; its backward (and backward's prefetch) skips it
  void begin_forward() { in_backward_ = false; }  // every forward, before its first unit
  torch::Tensor gather_for_backward(size_t unit, const torch::Tensor& out);
  // ZeRO-3: the unit is used again in this forward (the tied rest as the final norm and head):
  // gathered (from the next forward on, the last unit's before_forward prefetches it), nothing
  // prefetched for it. release_after_backward frees it when the gradient of `in` (the input of that
  // second use) arrives: its backward is done then.
  void before_reuse(size_t unit);
  torch::Tensor release_after_backward(size_t unit, const torch::Tensor& in);

  // What the optimizer updates: this rank's segments (fp32), in unit order.
  const std::vector<ShardSegment>& segments() const { return segments_; }
  // After the optimizer updated the segments: ZeRO-2 gathers every unit, ZeRO-3 frees them all
  // (the next forward gathers the new values).
  void after_step();
  // ZeRO-3: gathers every unit, e.g. before sampling or exporting outside the training forward.
  void gather_all();

  // The whole fp32 master value of every parameter in host memory, on rank 0 (on every rank with
  // `everywhere`); collective, one unit at a time on the device.
  std::vector<std::pair<std::string, torch::Tensor>> full_parameters(bool everywhere = false);
  // AdamW state of whole parameters ("exp_avg.<param>", "exp_avg_sq.<param>", "step.<param>") cut
  // into this rank's segments ("exp_avg.<param>@<offset>", ...), and back: unshard_state takes
  // every rank's segment state (gather_optimizer_state) and rebuilds the whole tensors.
  std::vector<std::pair<std::string, torch::Tensor>> shard_state(
      const std::vector<std::pair<std::string, torch::Tensor>>& whole) const;
  // The same from parts of the whole tensors: slice(key, offset, count) gives elements [offset,
  // offset + count) of the flattened "exp_avg.<param>" or "exp_avg_sq.<param>", and the scalar
  // "step.<param>" (offset: the segment's, count 0), e.g. read from a sharded checkpoint's files.
  using StateSlice = std::function<torch::Tensor(const std::string& key, int64_t offset, int64_t count)>;
  std::vector<std::pair<std::string, torch::Tensor>> shard_state(const StateSlice& slice) const;
  std::vector<std::pair<std::string, torch::Tensor>> unshard_state(
      const std::vector<std::pair<std::string, torch::Tensor>>& segments) const;
  // The global L2 norm from this rank's norm of its segments' gradients (collective).
  torch::Tensor global_norm(const torch::Tensor& local_norm);
  // `t` summed over the ranks in place (collective), e.g. fp16's inf/NaN verdict.
  void sum_across_ranks(torch::Tensor& t);

  ShardStage stage() const { return options_.stage; }
  const ShardingStats& stats() const { return stats_; }
  int64_t master_bytes() const;    // fp32 master shards this rank holds
  int64_t gathered_bytes() const;  // compute-dtype unit buffers allocated now
  std::string describe() const;    // "zero3: 13 units, 2 ranks, master shard 12.3 MiB per rank, ..."

 private:
  struct Unit;
  struct Flight;
  struct Reduction;
  void track(const ProcessGroup::WorkPtr& work);
  void count_flights();  // adds the finished collectives' in-flight wall time to the stats
  static torch::Tensor whole_values(const Unit& u, const InitialValue& initial_value, int64_t padded);
  void launch_gather(Unit& u);
  void ensure_gathered(size_t unit);
  void reshard(Unit& u);
  void on_gradient_ready(size_t unit);
  void launch_reduce(Unit& u);
  void start_reduction(Unit& u, torch::Tensor input);
  void start_all_reduce(Unit& u);
  void add_reduction(Reduction r, int64_t sent_bytes);
  void reap(size_t keep);  // folds finished reductions, and the oldest until at most `keep` are in flight
  int64_t reducing_bytes() const;
  void collect_reductions();
  void wait(const ProcessGroup::WorkPtr& work, const std::string& what);

  std::shared_ptr<ProcessGroup> group_;
  ShardingOptions options_;
  std::vector<std::unique_ptr<Unit>> units_;
  std::vector<ShardSegment> segments_;
  std::vector<GradientHook> hooks_;
  std::vector<Flight> flights_;
  std::vector<Reduction> reductions_;  // in flight, in launch order
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // what a backward hook checks first
  ShardingStats stats_;
  bool in_backward_ = false;  // between the first block's backward hook and the next forward
  size_t reused_ = SIZE_MAX;  // the unit passed to before_reuse (the tied rest), prefetched by the last unit
};

}  // namespace hwt
