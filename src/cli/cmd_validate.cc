// `nest validate`: the table of checks against outside numbers (nest/validate/validation.h).
// Exit status 0 when every case is within its tolerance, 1 when one is not, 2 on bad input.

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "nest/core/error.h"
#include "nest/validate/validation.h"

namespace nest::cli {
namespace {

namespace fs = std::filesystem;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// The measured training runs of `reference` (when it has them), on the bundled Selene-like
// topology and A100 accelerator.
void set_training(validate::ValidationInputs& in, const fs::path& reference) {
  const fs::path runs = reference / "measured" / "training-runs.tsv";
  const fs::path topology = in.workloads_root / "topologies" / "selene_4480.yaml";
  const fs::path accelerator = in.workloads_root / "workloads" / "accelerators" / "a100-80gb.yaml";
  if (!is_file(runs) || !is_file(topology) || !is_file(accelerator)) return;
  in.training_runs = runs;
  in.training_topology = topology;
  in.training_accelerator = accelerator;
}

validate::ValidationInputs resolve_inputs(const std::string& reference, const std::string& root) {
  validate::ValidationInputs in;
  const std::vector<fs::path> roots =
      root.empty() ? catalog().roots() : std::vector<fs::path>{root};
  for (const fs::path& r : roots) {
    if (is_file(r / "workloads" / "models" / "gpt3-175b.yaml")) {
      in.workloads_root = r;
      break;
    }
  }
  if (in.workloads_root.empty()) {
    throw Error::input("cannot find the workloads folder",
                       {.key = "--source",
                        .value = root,
                        .expected = "a folder holding workloads/models/ (the source tree)"});
  }
  if (!reference.empty()) {
    in.nest_table = fs::path(reference) / "nest-artifact" / "expected-nest.tsv";
    in.nest_profiles = fs::path(reference) / "nest-artifact";
    in.measured = fs::path(reference) / "measured";
    set_training(in, fs::path(reference));
    if (!is_file(in.nest_table)) {
      throw Error::input("no nest-artifact/expected-nest.tsv in the reference folder",
                         {.key = "--reference",
                          .value = reference,
                          .expected = "a folder laid out as tests/validation/reference/"});
    }
    return in;
  }
  // The copies shipped in the repository (tests/validation/reference/README.md), or installed
  // beside the bundled workloads (share/nest/validation/reference).
  fs::path reference_dir = in.workloads_root / "tests" / "validation" / "reference";
  if (!is_file(reference_dir / "nest-artifact" / "expected-nest.tsv")) {
    reference_dir = in.workloads_root / "validation" / "reference";
  }
  in.nest_table = reference_dir / "nest-artifact" / "expected-nest.tsv";
  in.nest_profiles = in.workloads_root / "workloads" / "profiles";
  in.measured = reference_dir / "measured";
  set_training(in, reference_dir);
  return in;
}

}  // namespace

int run_validate(std::span<char* const> args, const Context&) {
  std::string reference;
  std::string source;
  bool failures_only = false;
  bool json = false;
  Options o("nest validate [--reference DIR] [--source DIR] [--failures-only] [--json]");
  o.add("reference", &reference,
        "a reference folder laid out as tests/validation/reference/ (default: the copies "
        "shipped there)")
      .add("source", &source,
           "the source tree, holding workloads/ (default: found from $NEST_HOME, the working "
           "directory or the executable)")
      .add("failures-only", &failures_only, "print only the cases out of tolerance")
      .add("json", &json, "print the cases as JSON");
  if (!o.parse(args)) return 0;
  const validate::ValidationInputs inputs = resolve_inputs(reference, source);
  const std::vector<validate::ValidationCase> cases = validate::run_validation(inputs);

  std::size_t failed = 0;
  for (const auto& c : cases) failed += c.passed() ? 0 : 1;
  if (json) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const auto& c : cases) {
      if (failures_only && c.passed()) continue;
      rows.push_back({{"group", c.group},
                      {"name", c.name},
                      {"expected", c.expected},
                      {"got", c.got},
                      {"error", c.error()},
                      {"tolerance", c.tolerance},
                      {"passed", c.passed()},
                      {"source", c.source}});
    }
    std::cout << nlohmann::ordered_json{{"cases", rows},
                                        {"total", cases.size()},
                                        {"passed", cases.size() - failed},
                                        {"failed", failed},
                                        {"nest_table", inputs.nest_table.string()}}
                     .dump(2)
              << "\n";
    return failed == 0 ? 0 : 1;
  }
  std::size_t width = 4;
  for (const auto& c : cases) width = std::max(width, c.group.size() + 2 + c.name.size());
  std::cout << fmt::format("{:<{}}  {:>17}  {:>17}  {:>9}  {:>9}  {:<4}  {}\n", "case", width,
                           "expected", "got", "error", "tolerance", "", "source");
  for (const auto& c : cases) {
    if (failures_only && c.passed()) continue;
    std::cout << fmt::format("{:<{}}  {:>17.12g}  {:>17.12g}  {:>9.2e}  {:>9.2e}  {:<4}  {}\n",
                             c.group + ": " + c.name, width, c.expected, c.got, c.error(),
                             c.tolerance, c.passed() ? "ok" : "FAIL", c.source);
  }
  std::cout << fmt::format("\n{} cases, {} within tolerance, {} out of tolerance\n", cases.size(),
                           cases.size() - failed, failed);
  std::cout << "NEST table: " << inputs.nest_table.string() << "\n";
  return failed == 0 ? 0 : 1;
}

}  // namespace nest::cli
