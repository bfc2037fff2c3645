// The 3D layout search (see parallel_layout.h).
#include "hwtrain/plan/parallel_layout.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "hwtrain/core/error.h"
#include "hwtrain/core/option_checks.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/dist/device_mesh.h"

namespace hwt {

namespace {

// Table rows shown before the examples of each other reason for losing.
constexpr size_t kBestShown = 5;
// Step times within this share of each other are a tie, settled by the simpler layout.
constexpr double kTie = 1e-3;
// Interleaved 1F1B is chosen over the best plain-1F1B layout only when predicted this much faster:
// the cost model does not count what it adds beyond the messages (a launch and a send per chunk and
// micro-batch, less room to overlap them), which Narayanan et al. 2021 (figure 13) show eating its
// gain as the batch grows.
constexpr double kInterleaveGain = 0.03;

struct Candidate {
  ParallelLayout layout;
  LayoutPrediction prediction;
  bool fits = false;
  std::string invalid;  // non-empty: the layout cannot run this batch ("global batch ... dp 7")
};

std::string numbers(const std::vector<int64_t>& values) {
  std::vector<std::string> parts;
  for (int64_t v : values) parts.push_back(std::to_string(v));
  return join(parts, ", ");
}

// Simpler first, for ties: fewer model-parallel ranks, less sharding, no recomputation, then the
// larger micro-batch (larger GEMMs and fewer launches, which the cost model does not count).
bool simpler(const ParallelLayout& a, const ParallelLayout& b) {
  const int64_t ma = a.tensor_parallel * a.pipeline_parallel, mb = b.tensor_parallel * b.pipeline_parallel;
  if (ma != mb) return ma < mb;
  if (a.tensor_parallel != b.tensor_parallel) return a.tensor_parallel > b.tensor_parallel;  // TP on NVLink first
  if (a.pipeline_chunks != b.pipeline_chunks) return a.pipeline_chunks < b.pipeline_chunks;
  if (a.sharding != b.sharding) return a.sharding < b.sharding;
  if (a.checkpoint_every != b.checkpoint_every) return a.checkpoint_every < b.checkpoint_every;
  return a.micro_batch_size > b.micro_batch_size;
}

bool runs(const Candidate& c) { return c.fits && c.invalid.empty(); }

// A strict order: runnable, fitting, faster, simpler; unfitting by memory.
bool ranks_before(const Candidate& a, const Candidate& b) {
  if (a.invalid.empty() != b.invalid.empty()) return a.invalid.empty();
  if (a.fits != b.fits) return a.fits;
  if (!a.fits) return a.prediction.memory.total() < b.prediction.memory.total();
  const double ta = a.prediction.time.total(), tb = b.prediction.time.total();
  if (ta != tb) return ta < tb;
  return simpler(a.layout, b.layout);
}

// Sorted by ranks_before, then the simplest layout within a tie (kTie) of the fastest moved first.
void rank(std::vector<Candidate>& cs) {
  std::stable_sort(cs.begin(), cs.end(), ranks_before);
  if (cs.empty() || !runs(cs.front())) return;
  const double fastest = cs.front().prediction.time.total();
  auto pick = cs.begin();
  for (auto it = cs.begin(); it != cs.end() && runs(*it) && it->prediction.time.total() <= fastest * (1.0 + kTie); ++it) {
    if (simpler(it->layout, pick->layout)) pick = it;
  }
  std::rotate(cs.begin(), pick, pick + 1);
}

std::vector<int64_t> pipeline_choices(const LayoutProblem& problem, int64_t tp) {
  const int64_t ranks = problem.machine.num_gpus / tp;
  if (problem.pipeline_parallel) {  // with a searched tp, only where tp x pp divides the GPUs
    if (ranks % *problem.pipeline_parallel == 0) return {*problem.pipeline_parallel};
    return {};
  }
  std::vector<int64_t> out;
  for (int64_t pp = 1; pp <= std::min(ranks, problem.base.model.n_layer); ++pp)
    if (ranks % pp == 0) out.push_back(pp);
  return out;
}

std::vector<Sharding> sharding_choices(const LayoutProblem& problem, const ParallelLayout& l) {
  if (l.data_parallel == 1) return {Sharding::None};  // one replica: nothing to shard, whatever dist.sharding says
  // Sequence parallel with a vocabulary the tensor ranks split unevenly: gradient shards of the
  // norms would lie differently on them (cli/parallel_setup.h refuses it), so ZeRO-1 at most.
  const bool uneven = l.tensor_parallel > 1 && problem.sequence_parallel &&
                      problem.base.model.vocab_size % l.tensor_parallel != 0;
  const auto runs = [&](Sharding s) { return !uneven || (s != Sharding::Zero2 && s != Sharding::Zero3); };
  if (problem.sharding && !runs(*problem.sharding)) return {};
  if (problem.sharding) return {*problem.sharding};
  if (uneven) return {Sharding::None, Sharding::Zero1};
  return {Sharding::None, Sharding::Zero1, Sharding::Zero2, Sharding::Zero3};
}

// Powers of two dividing the replica's batch, up to optimization.max_batch_size; or the user's.
std::vector<int64_t> micro_choices(const LayoutProblem& problem, int64_t per_replica) {
  if (problem.micro_batch_size) return {*problem.micro_batch_size};
  std::vector<int64_t> out;
  for (int64_t b = 1; b <= std::min(per_replica, problem.max_micro_batch); b *= 2)
    if (per_replica % b == 0) out.push_back(b);
  return out;
}

// 1, 2, 4 or 8 chunks per stage while every chunk keeps a block; or the user's.
std::vector<int64_t> chunk_choices(const LayoutProblem& problem, int64_t pp) {
  if (problem.pipeline_chunks) return {*problem.pipeline_chunks};
  std::vector<int64_t> out{1};
  for (int64_t v = 2; pp > 1 && v <= 8 && pp * v <= problem.base.model.n_layer; v *= 2) {
    out.push_back(v);
  }
  return out;
}

std::vector<int64_t> checkpoint_choices(const LayoutProblem& problem) {
  if (problem.checkpoint_every) return {*problem.checkpoint_every};
  return {0, 1};
}

Candidate evaluate(const LayoutProblem& problem, ParallelLayout l) {
  Candidate c;
  c.prediction = predict_layout(problem, l);
  l.predicted_peak_bytes = c.prediction.memory.total();
  l.predicted_step_seconds = c.prediction.time.total();
  l.predicted_mfu = c.prediction.mfu;
  c.layout = l;
  c.fits = l.predicted_peak_bytes <= problem.machine.memory_budget_bytes;
  return c;
}

// The best variants of one (tensor, pipeline) pair: with plain 1F1B (or the chunks the user set),
// and with interleaving allowed; or, in both, why the pair cannot run this batch.
struct PairBest {
  Candidate plain, interleaved;
};

PairBest best_of_pair(const LayoutProblem& problem, int64_t tp, int64_t pp) {
  ParallelLayout l;
  l.tensor_parallel = tp;
  l.pipeline_parallel = pp;
  l.data_parallel = problem.machine.num_gpus / (tp * pp);
  Candidate best;
  best.layout = l;
  if (problem.global_batch % l.data_parallel != 0) {
    best.invalid = "global batch " + std::to_string(problem.global_batch) + " is not a multiple of dp " +
                   std::to_string(l.data_parallel);
    return {best, best};
  }
  if (problem.sharding && *problem.sharding != Sharding::None && l.data_parallel == 1) {
    best.invalid = std::string("dist.sharding = ") + sharding_name(*problem.sharding) + " needs data-parallel ranks";
    return {best, best};
  }
  if (problem.sharding && sharding_choices(problem, l).empty()) {
    best.invalid = std::string("dist.sharding = ") + sharding_name(*problem.sharding) + " with sequence parallelism "
                   "needs model.vocab_size to divide by tp";
    return {best, best};
  }
  const int64_t per_replica = problem.global_batch / l.data_parallel;
  const std::vector<int64_t> micros = micro_choices(problem, per_replica);
  if (micros.empty() || per_replica % micros.front() != 0) {
    best.invalid = "train.micro_batch_size does not divide the " + std::to_string(per_replica) + " sequences per replica";
    return {best, best};
  }
  if (problem.pipeline_chunks && *problem.pipeline_chunks > 1 &&
      (pp == 1 || pp * *problem.pipeline_chunks > problem.base.model.n_layer)) {
    best.invalid = "dist.pipeline_chunks = " + std::to_string(*problem.pipeline_chunks) +
                   (pp == 1 ? std::string(" needs pp > 1") : " x pp " + std::to_string(pp) + " is more chunks than blocks");
    return {best, best};
  }
  std::vector<Candidate> variants;
  for (Sharding s : sharding_choices(problem, l)) {
    for (int64_t b : micros) {
      for (int64_t v : chunk_choices(problem, pp)) {
        if (v > 1 && (per_replica / b) % pp != 0) continue;  // interleaving runs micro-batches in groups of pp
        for (int64_t every : checkpoint_choices(problem)) {
          l.sharding = s;
          l.micro_batch_size = b;
          l.num_micro_batches = per_replica / b;
          l.pipeline_chunks = v;
          l.checkpoint_every = every;
          variants.push_back(evaluate(problem, l));
        }
      }
    }
  }
  if (variants.empty()) {  // only a fixed dist.pipeline_chunks > 1 leaves no variant
    best.invalid = "dist.pipeline_chunks = " + std::to_string(*problem.pipeline_chunks) +
                   " needs micro-batches per step (and replica) a multiple of pp " + std::to_string(pp);
    return {best, best};
  }
  std::vector<Candidate> plain;
  for (const Candidate& c : variants) {
    if (problem.pipeline_chunks || c.layout.pipeline_chunks == 1) plain.push_back(c);
  }
  rank(plain);
  rank(variants);
  return {plain.front(), variants.front()};
}

// The term that costs `c` the most over the winner, as a reason with its share of c's step
// ("bubble 18%"); more compute on the slowest stage than the winner's is uneven stages (the head on
// the last one, blocks that do not divide evenly), given as the excess ("stage imbalance +7%").
std::string dominant_loss(const Candidate& c, const Candidate& winner) {
  const LayoutTime& a = c.prediction.time;
  const LayoutTime& w = winner.prediction.time;
  struct Term {
    const char* name;
    double own, winners;
  };
  const Term terms[] = {{"bubble", a.bubble, w.bubble},
                        {"TP communication", a.tensor_comm, w.tensor_comm},
                        {"DP communication", a.data_comm, w.data_comm},
                        {"PP communication", a.pipeline_comm, w.pipeline_comm},
                        {"recomputation", a.recompute, w.recompute},
                        {"stage imbalance", a.compute, w.compute}};
  const Term* worst = std::max_element(std::begin(terms), std::end(terms), [](const Term& x, const Term& y) {
    return x.own - x.winners < y.own - y.winners;
  });
  if (worst == &terms[5]) return "stage imbalance +" + format_number("%.0f", 100.0 * (a.compute / w.compute - 1.0)) + "%";
  return std::string(worst->name) + " " + format_number("%.0f", 100.0 * worst->own / a.total()) + "%";
}

// The verdict and its reason category (one example of each is shown).
std::pair<std::string, std::string> verdict(const Candidate& c, const Candidate* winner, double budget) {
  if (!c.invalid.empty()) return {c.invalid, "batch"};
  const ParallelLayout& l = c.layout;
  if (!c.fits) {
    return {"does not fit: " + format_bytes(l.predicted_peak_bytes) + " > " + format_bytes(budget), "memory"};
  }
  if (winner == nullptr || &c == winner) {
    return {"fastest that fits: " + format_seconds(l.predicted_step_seconds) + "/step, MFU " +
                format_number("%.0f", 100.0 * l.predicted_mfu) + "%",
            "chosen"};
  }
  const std::string why = dominant_loss(c, *winner);
  const double ratio = l.predicted_step_seconds / winner->layout.predicted_step_seconds;
  const std::string slower = ratio < 1.0 + kTie ? "as fast, but less simple"
                             : ratio < 1.01   ? format_number("%.3f", ratio) + "x slower"
                                              : format_number("%.2f", ratio) + "x slower";
  return {slower + " (" + why + ")", why.substr(0, why.rfind(' '))};
}

std::string searched_text(const LayoutProblem& problem, const std::vector<int64_t>& tps) {
  const LayoutMachine& hw = problem.machine;
  std::string s = std::to_string(hw.num_gpus) + " " + problem.devices + " (" +
                  std::to_string(hw.num_gpus / hw.gpus_per_node) + " node(s) of " +
                  std::to_string(hw.gpus_per_node) + "), global batch " +
                  std::to_string(problem.global_batch) + ": tp in {" + numbers(tps) + "}, pp up to " +
                  std::to_string(problem.base.model.n_layer) + " blocks, dp = " + problem.devices + " / (tp x pp)" +
                  (problem.pipeline_chunks ? std::string()
                                           : ", interleaved 1F1B (2, 4 or 8 chunks per stage) where it is predicted " +
                                                 format_number("%.0f", 100.0 * kInterleaveGain) +
                                                 "% faster than the best plain-1F1B layout");
  std::vector<std::string> fixed;
  if (problem.tensor_parallel) fixed.push_back("dist.tensor_parallel = " + std::to_string(*problem.tensor_parallel));
  if (problem.pipeline_parallel) fixed.push_back("dist.pipeline_parallel = " + std::to_string(*problem.pipeline_parallel));
  if (problem.pipeline_chunks) fixed.push_back("dist.pipeline_chunks = " + std::to_string(*problem.pipeline_chunks));
  if (problem.sharding) fixed.push_back(std::string("dist.sharding = ") + sharding_name(*problem.sharding));
  if (problem.micro_batch_size) fixed.push_back("train.micro_batch_size = " + std::to_string(*problem.micro_batch_size));
  if (problem.checkpoint_every) fixed.push_back("optimization.checkpoint_every = " + std::to_string(*problem.checkpoint_every));
  if (!fixed.empty()) s += "; set by user, so only the rest searched: " + join(fixed);
  return s;
}

}  // namespace

std::vector<int64_t> tensor_parallel_choices(const ModelConfig& model, int64_t num_gpus, int64_t gpus_per_node) {
  std::vector<int64_t> out;
  for (int64_t tp : divisors(std::max<int64_t>(1, std::min(gpus_per_node, num_gpus)))) {
    if (num_gpus % tp == 0 && model.n_head % tp == 0 && model.kv_heads() % tp == 0 && model.mlp_width() % tp == 0)
      out.push_back(tp);
  }
  return out;
}

void check_layout_request(const ModelConfig& model, int64_t num_gpus, int64_t gpus_per_node,
                          std::optional<int64_t> tensor_parallel, std::optional<int64_t> pipeline_parallel,
                          std::optional<int64_t> pipeline_chunks) {
  const DeviceMesh mesh(static_cast<int>(num_gpus), tensor_parallel.value_or(1), pipeline_parallel.value_or(1));
  check_mesh_fits_model(mesh, model, pipeline_chunks.value_or(1));
  const int64_t tp = mesh.tensor_parallel();
  if (tp > gpus_per_node || gpus_per_node % tp != 0) {
    throw ConfigError("dist.tensor_parallel = " + std::to_string(tp) + " does not fit in one node's " +
                      std::to_string(gpus_per_node) +
                      " GPU ranks (a tensor group all-reduces every layer over NVLink); valid: " +
                      numbers(tensor_parallel_choices(model, num_gpus, gpus_per_node)));
  }
}

std::string compare_layouts(const LayoutProblem& problem, const ParallelLayout& layout, const ParallelLayout& winner) {
  if (layout.summary() == winner.summary()) return "the same layout";
  Candidate a = evaluate(problem, layout), w = evaluate(problem, winner);
  return verdict(a, &w, problem.machine.memory_budget_bytes).first;
}

LayoutSearch search_parallel_layouts(const LayoutProblem& problem) {
  const LayoutMachine& hw = problem.machine;
  check_layout_request(problem.base.model, hw.num_gpus, hw.gpus_per_node, problem.tensor_parallel,
                       problem.pipeline_parallel, problem.pipeline_chunks);
  std::vector<int64_t> tps = problem.tensor_parallel
                                 ? std::vector<int64_t>{*problem.tensor_parallel}
                                 : tensor_parallel_choices(problem.base.model, hw.num_gpus, hw.gpus_per_node);
  if (!problem.tensor_parallel && problem.sequence_parallel) {  // each tensor rank keeps 1/tp of the sequence
    const int64_t positions = problem.base.model.block_size;
    tps.erase(std::remove_if(tps.begin(), tps.end(), [&](int64_t tp) { return positions % tp != 0; }), tps.end());
  }
  std::vector<Candidate> pairs, interleaved;  // each pair's best with plain 1F1B, and interleaving allowed
  for (int64_t tp : tps) {
    for (int64_t pp : pipeline_choices(problem, tp)) {
      PairBest best = best_of_pair(problem, tp, pp);
      pairs.push_back(std::move(best.plain));
      interleaved.push_back(std::move(best.interleaved));
    }
  }
  rank(pairs);
  rank(interleaved);
  auto wins = [](const std::vector<Candidate>& ranked) { return !ranked.empty() && runs(ranked.front()); };
  LayoutSearch out;
  out.searched = searched_text(problem, tps);
  if (!problem.pipeline_chunks) {  // interleaving, if it gains enough over plain 1F1B
    const double plain = wins(pairs) ? pairs.front().prediction.time.total() : 0.0;
    const double best = wins(interleaved) ? interleaved.front().prediction.time.total() : 0.0;
    const bool chunked = wins(interleaved) && interleaved.front().layout.pipeline_chunks > 1;
    if (chunked && (!wins(pairs) || best < (1.0 - kInterleaveGain) * plain)) {
      pairs = std::move(interleaved);
    } else if (chunked) {
      out.searched += "; interleaving's best, " + interleaved.front().layout.summary() + ", is predicted " +
                      format_number("%.1f", 100.0 * (1.0 - best / plain)) + "% faster: under the " +
                      format_number("%.0f", 100.0 * kInterleaveGain) + "% it must gain";
    }
  }
  const Candidate* winner = wins(pairs) ? &pairs.front() : nullptr;
  std::map<std::string, bool> shown;
  for (const Candidate& c : pairs) {
    const auto [text, reason] = verdict(c, winner, hw.memory_budget_bytes);
    const bool best_few = c.fits && c.invalid.empty() && out.table.size() < kBestShown;
    if (!best_few && shown[reason]) continue;
    shown[reason] = true;
    out.table.push_back({c.layout, c.fits && c.invalid.empty(), text});
  }
  if (winner != nullptr) out.chosen = out.table.front();
  return out;
}

}  // namespace hwt
