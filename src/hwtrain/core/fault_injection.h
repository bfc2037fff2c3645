// Fault injection for the fault suite (tests/cli/dist_faults_test.cpp, docs/reliability.md): a
// process started with HWTRAIN_FAULT="<point>:<rank>:<KILL|STOP>[:<n>]" sends itself SIGKILL or
// SIGSTOP the n-th time (default 1) the rank RANK (default 0) passes <point>. The points:
//   startup     the process group is up (dist/process_group.cpp)
//   step        a training step begins (train/trainer.cpp)
//   collective  a collective was issued and is about to be waited for (dist/process_group.cpp)
//   checkpoint  a checkpoint's files are written, its manifest not yet (io/checkpoint_store.cpp)
//   shard       a ZeRO-2/3 rank's checkpoint shard is written, the other ranks' maybe not
//               (train/sharded_checkpoint.cpp)
//   prepare     a new dataset is complete in its staging directory, not yet in place
//               (data/prepare_output.cpp)
// Unset (always, outside the tests), a point costs one load of a static. A malformed value is a
// ConfigError naming it, at the first point reached.
#pragma once

namespace hwt {

void fault_point(const char* point);

}  // namespace hwt
