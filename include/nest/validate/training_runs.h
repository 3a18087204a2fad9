#pragma once
/// \file
/// Measured training runs (tests/validation/reference/measured/training-runs.tsv: Megatron-LM
/// GPT runs on NVIDIA Selene, Narayanan et al. 2021 Table 1 and Korthikanti et al. 2022 Table 5)
/// priced by NEST with every dimension of the published configuration fixed through the library
/// options, and replayed on the network simulator.
///
/// A row becomes, with no hand-written plan:
/// - a GPT model (`gpt_model`): learned positions, GeLU, LayerNorm, tied embeddings, biases,
///   dropout, the row's layers, hidden size, heads, vocabulary and sequence;
/// - one variant (`workload::ParallelConfig`): tensor parallel t, sequence parallelism as the
///   row says, its micro-batch;
/// - a search with everything fixed (`placer::SearchOptions`): S stages, d replicas, v virtual
///   stages, the row's recomputation, ZeRO-0 (neither paper shards the optimizer), Megatron's
///   rank order tp-dp-pp and Megatron's uniform split (`uniform_partition`);
/// - the software the paper ran (`software_of`), which the configuration does not say: the 2021
///   code (Narayanan) predates the asynchronous tensor-parallel communication and reduced
///   gradients with PyTorch DDP (25 MB buckets beside the backward) when p = 1 and Megatron's
///   local DDP (after the backward) otherwise (examples/sc21/run_table_1.sh), adding each
///   microbatch's gradients to fp32 main_grad in a separate pass (PyTorch DDP: to the fp16
///   .grad); the 2022 code (Korthikanti) overlaps the tensor-parallel communication, uses the
///   local DDP and fuses the gradient accumulation into the weight-gradient GEMMs.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "nest/placer/comm_cost.h"
#include "nest/placer/plan.h"
#include "nest/topo/topology.h"
#include "nest/validate/validation.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/layer_profile.h"
#include "nest/workload/model.h"

namespace nest::validate {

/// One row of training-runs.tsv.
struct TrainingRun {
  std::string id;
  std::string source;
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t vocabulary = 0;
  std::int64_t sequence = 0;
  std::int64_t gpus = 0;
  int tensor = 1;
  int pipeline = 1;
  int data = 1;
  int micro_batch = 1;
  std::int64_t global_batch = 0;
  int virtual_stages = 1;
  workload::Recompute recompute = workload::Recompute::kNone;
  bool sequence_parallel = false;
  std::string precision;
  double published = 0;
  std::string unit;  ///< "s per iteration" or "TFLOP/s per GPU ..."
  /// The measured seconds per iteration: `published` itself, or for a TFLOP/s figure
  /// F / (GPUs · TFLOP/s) with Narayanan et al.'s F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)).
  double measured_seconds = 0;
  /// "narayanan" or "korthikanti": the table (and the software) of the row.
  std::string table;
};

/// Reads training-runs.tsv. Throws `Error` (input) naming file, line and column on a bad row.
[[nodiscard]] std::vector<TrainingRun> load_training_runs(const std::filesystem::path& path);

/// The software a run used that its configuration does not say (see the file comment).
struct Software {
  bool tp_comm_overlap = true;         ///< `workload::BuildOptions::tp_comm_overlap`
  bool overlap_gradient_sync = false;  ///< `placer::CostOptions::overlap_gradient_sync`
  /// `placer::CostOptions::overlap_boundary_transfers`: false for both tables, whose
  /// Megatron-LM (2021, 2022) waits for each stage-boundary send and receive before the next
  /// compute (megatron/p2p_communication.py `_communicate`: `batch_isend_irecv`, `req.wait()`,
  /// `torch.cuda.synchronize()`; the overlap came with Megatron-Core's `overlap_p2p_comm`).
  bool overlap_boundary_transfers = false;
  Bytes gradient_bucket = Bytes(0);  ///< DDP bucket size; 0: one bucket per stage
  /// `workload::BuildOptions::gradient_accumulation_bytes`
  std::int64_t gradient_accumulation_bytes = 0;
};

/// The software of `run`'s table.
[[nodiscard]] Software software_of(const TrainingRun& run);

/// The row's GPT model (see the file comment).
[[nodiscard]] workload::Model gpt_model(const TrainingRun& run);

/// One row priced and replayed.
struct TrainingPrediction {
  TrainingRun run;
  std::optional<placer::Plan> plan;  ///< empty when the configuration does not fit (see note)
  std::string note;                  ///< why there is no plan
  double predicted_seconds = 0;      ///< the cost model's iteration time
  double replayed_seconds = 0;       ///< the replay's, 0 when not replayed
  /// (predicted − measured) / measured.
  [[nodiscard]] double error() const noexcept;
  /// (replayed − predicted) / predicted.
  [[nodiscard]] double replay_error() const noexcept;
};

/// How to price the rows.
struct TrainingValidationOptions {
  bool replay = true;  ///< also replay each plan on the topology's simulator
  /// Price plans whose stages exceed the device memory instead of reporting them.
  bool ignore_memory = false;
  std::uint64_t seed = 0;  ///< ECMP seed of the oracle and the replay
};

/// Prices (and replays) every run on `topology` with `accelerator`, the network priced by the
/// collective oracle. Throws `Error` (input) when a row cannot be expressed (a configuration the
/// model or the topology cannot hold).
[[nodiscard]] std::vector<TrainingPrediction> predict_training_runs(
    const std::vector<TrainingRun>& runs, const workload::Accelerator& accelerator,
    const topo::Topology& topology, const TrainingValidationOptions& options = {});

/// The same with the network priced by `network` (a collective oracle on `topology`, kept warm
/// between calls: its prices do not depend on the accelerator).
[[nodiscard]] std::vector<TrainingPrediction> predict_training_runs(
    const std::vector<TrainingRun>& runs, const workload::Accelerator& accelerator,
    const topo::Topology& topology, placer::CommCost& network,
    const TrainingValidationOptions& options = {});

/// The `training` group of `nest validate`: per row, the predicted iteration against the
/// measured one (tolerance 8%) and the replay against the prediction (5%); per table and over
/// all rows, the mean |error| (expected 0, tolerance 3%).
[[nodiscard]] std::vector<ValidationCase> training_cases(
    const std::vector<TrainingPrediction>& predictions, const std::string& source);

/// The `layer` group: one 22B layer (h 6144, 64 heads, s 2048, micro-batch 4, t 8) against
/// Korthikanti et al. 2022 Table 4 (forward and backward ms: baseline 7.7 / 11.9, sequence
/// parallel 7.2 / 11.8, full recomputation backward 19.5, selective 13.2, selective with
/// sequence parallelism 13.1), its collectives priced by `network` on `topology`'s first
/// node (tolerance 10%: one layer, published to 0.1 ms, its forward's two tensor-parallel
/// all-reduces a fifth of it). Not fitted: the fit uses the iteration times only.
[[nodiscard]] std::vector<ValidationCase> layer_cases(const workload::Accelerator& accelerator,
                                                      placer::CommCost& network);

}  // namespace nest::validate
