// The settings the model-parallel launch tests share (model_parallel_test.cpp,
// split_decoding_test.cpp): the small corpus, fp32, 2 accumulated micro-batches, a loss every step,
// one thread a rank, no sample, evaluation, time budget or sinks beyond metrics.jsonl.
#pragma once
#include <string>

namespace hwt::testing {

inline const std::string kModelParallelRun =
    "--data corpus --set data.document_separator=% --set data.cache_dir=cache "
    "--set train.eval_interval=0 --set train.sample_tokens=0 --set train.log_interval=1 "
    "--set train.time_budget=0 --set optimization.mixed_precision_dtype=fp32 --set train.grad_accum_steps=2 "
    "--set log.tensorboard=false --set log.gpu_log_interval=0 --set log.report=false "
    "--set optimization.intra_op_threads=1 --set train.device=cpu --set dist.sharding=none ";

}  // namespace hwt::testing
