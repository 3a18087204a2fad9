#pragma once
/// \file
/// `nest validate`: every check of NEST against numbers from outside NEST, in one table.
///
/// | group      | what is compared                                                         |
/// |------------|--------------------------------------------------------------------------|
/// | collective | the simulator against the textbook alpha-beta formulas (ring allreduce,  |
/// |            | reduce-scatter, all-gather, recursive halving-doubling) on contention-    |
/// |            | free topologies: a non-blocking switch and a direct-link ring            |
/// | nccl       | NCCL's bus-bandwidth factors, and a simulated ring's bus bandwidth =      |
/// |            | its link bandwidth                                                       |
/// | parameters | published parameter counts of GPT-3 175B, Llama-2-7B, Llama-3-70B,        |
/// |            | Llama-3.1-405B, Mixtral-8x7B (total and active), BERT-Large               |
/// | activation | Korthikanti et al. 2022 activation bytes per layer (no parallelism, tensor |
/// |            | parallel, sequence parallel, full recomputation)                          |
/// | flops      | Narayanan et al. 2021 FLOPs per iteration with recomputation              |
/// | nest       | the published NEST iteration times (expected-nest.tsv) under the          |
/// |            | nest-artifact rules                                                       |
/// | collective-measured | the calibrated collectives (topologies/collectives/) against   |
/// |            | NCCL measurements: the DGX H100 all_reduce_perf curve (each size within   |
/// |            | 10% from 64 KiB up, 25% below; the worst size of each range reported),    |
/// |            | ring bus bandwidth of 8 A100 (~230 GB/s) and 8 H100 (~370 GB/s) within    |
/// |            | 5%, and an 8-node H100 rail cluster's allreduce bus bandwidth within 10%   |
/// |            | of 8 NDR NICs at 47.5 GB/s each                                           |
/// | layer      | a 22B layer's forward and backward against Korthikanti et al. 2022 Table 4 |
/// |            | (nest/validate/training_runs.h)                                           |
/// | training   | the 19 measured Megatron-LM iteration times of training-runs.tsv on the  |
/// |            | Selene-like topology, predicted and replayed (training_runs.h)           |
///
/// The expected value of every case is computed from the published formula or read from the
/// published table, never from NEST's own code paths.

#include <filesystem>
#include <string>
#include <vector>

namespace nest::validate {

/// One check.
struct ValidationCase {
  std::string group;  ///< "collective", "nccl", "parameters", ...
  std::string name;   ///< what is checked, e.g. "ring allreduce n=8 S=1GiB (s)"
  double expected = 0;
  double got = 0;
  double tolerance = 0;  ///< largest accepted relative error |got − expected| / |expected|
  std::string source;    ///< where the expected value comes from

  /// Relative error (absolute when expected is 0).
  [[nodiscard]] double error() const noexcept;
  /// error() <= tolerance.
  [[nodiscard]] bool passed() const noexcept;
};

/// Where the inputs are.
struct ValidationInputs {
  /// A folder holding `workloads/models/` and `workloads/accelerators/` (the source tree).
  std::filesystem::path workloads_root;
  /// The published NEST table (expected-nest.tsv) and the folder of the profiles it names.
  std::filesystem::path nest_table;
  std::filesystem::path nest_profiles;
  /// The folder of measurements (tests/validation/reference/measured/:
  /// nccl-allreduce-dgx-h100.tsv).
  std::filesystem::path measured;
  /// The measured training runs (training-runs.tsv), the topology and the accelerator they ran
  /// on; an empty `training_runs` leaves the layer and training groups out.
  std::filesystem::path training_runs;
  std::filesystem::path training_topology;
  std::filesystem::path training_accelerator;
};

/// Runs every check. Throws `Error` (input) when an input file is missing or malformed; a case
/// out of tolerance is not an error (see `ValidationCase::passed`). Takes about a second.
[[nodiscard]] std::vector<ValidationCase> run_validation(const ValidationInputs& inputs);

}  // namespace nest::validate
