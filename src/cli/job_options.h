#pragma once
// The options that state a job (`nest place` and `nest run`): each fills a field of
// `job::JobSpec` and answers for that field's errors.

#include <optional>
#include <string>

#include "cli/options.h"
#include "nest/job/job.h"

namespace nest::cli {

/// What the job options are bound to before they become a spec.
struct JobArgs {
  job::JobSpec spec;
  std::string rules = "megatron";
  std::string network;        // empty: the job's default
  std::string micro_batches;  // empty: 1,2,4
  std::string orders;         // empty: tp-pp-dp,tp-dp-pp
  // The dimensions a configuration fixes (`--tp 8 --pp 8 ...`); the search ranges over the rest.
  std::optional<int> tensor_parallel;
  std::optional<int> pipeline;
  std::optional<int> data_parallel;
  std::optional<int> context_parallel;
  std::optional<int> expert_parallel;
  std::optional<int> virtual_stages;
  std::optional<int> micro_batch;
  std::optional<int> zero_stage;
  std::string recompute;          // empty: none, selective and full
  std::string sequence_parallel;  // empty: on whenever t > 1
  std::string order;              // empty: --orders
  std::string partition = "balanced";
  std::string tp_overlap = "on";
  std::string gradient_overlap = "on";
  std::string p2p_overlap = "on";
  std::string baselines = "all";
  std::string precision = "bf16";
  std::string algorithm;  // empty: the tuner's choice per group
  LimitArgs limits;
};

/// Binds the job options of `args` to `options`.
void add_job_options(Options& options, JobArgs& args);

/// The spec the parsed options state. Throws `Error` (input) naming the option for values
/// that are malformed as text (lists, names); the Job checks the rest.
[[nodiscard]] job::JobSpec job_spec(JobArgs& args);

/// The job's placement (`job::Job::placement`: searched, then verified by replay as the spec
/// asks, replays with `options`), its reason when nothing fits worded for the command line (the
/// library's `ignore_memory` is `--ignore-memory` here).
[[nodiscard]] job::Placement place(job::Job& job, const job::SimulateOptions& options = {});

}  // namespace nest::cli
