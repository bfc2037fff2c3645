// Small helpers of the process group: one-line texts of c10d errors, durations and rank lists for
// its messages, and polling the rendezvous store for one key per rank.
#pragma once
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <exception>
#include <string>
#include <vector>

namespace hwt {

// The first line of a backend error, without c10's backtrace or Gloo's "[/pytorch/...:538] ".
std::string error_text(const std::exception& e);
// "2.5 s"
std::string seconds_text(std::chrono::milliseconds ms);
// "rank 1" / "ranks 1, 3"
std::string rank_list(const std::vector<int>& ranks);
// Polls until <prefix><r> exists for every rank r or the deadline passes; returns the missing ranks.
std::vector<int> wait_for_rank_keys(c10d::Store& store, const std::string& prefix, int world_size,
                                    std::chrono::milliseconds timeout);

}  // namespace hwt
