#pragma once
// The options that state a job (`nest place` and `nest run`): each fills a field of
// `job::JobSpec` and answers for that field's errors.

#include <string>

#include "cli/options.h"
#include "nest/job/job.h"

namespace nest::cli {

/// What the job options are bound to before they become a spec.
struct JobArgs {
  job::JobSpec spec;
  std::string rules = "megatron";
  std::string network;  // empty: the job's default
  std::string micro_batches = "1,2,4";
  std::string orders = "tp-pp-dp,tp-dp-pp";
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

}  // namespace nest::cli
