// `nest validate`: the table of checks against outside numbers (nest/validate/validation.h).
// Exit status 0 when every case is within its tolerance, 1 when one is not, 2 on bad input.

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
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

validate::ValidationInputs resolve_inputs(const std::string& reference, const std::string& root) {
  validate::ValidationInputs in;
  const std::vector<std::string> roots =
      root.empty() ? search_roots() : std::vector<std::string>{root};
  for (const fs::path r : roots) {
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
    if (!is_file(in.nest_table)) {
      throw Error::input("no nest-artifact/expected-nest.tsv in the reference folder",
                         {.key = "--reference",
                          .value = reference,
                          .expected = "a folder laid out as tests/validation/reference/"});
    }
    return in;
  }
  // The copies shipped in the repository (tests/validation/reference/README.md).
  in.nest_table = in.workloads_root / "tests" / "validation" / "reference" / "nest-artifact" /
                  "expected-nest.tsv";
  in.nest_profiles = in.workloads_root / "workloads" / "profiles";
  return in;
}

}  // namespace

int run_validate(std::span<char* const> args) {
  po::options_description options("options");
  options.add_options()("reference", po::value<std::string>()->default_value(""),
                        "a reference folder laid out as tests/validation/reference/ (default: the "
                        "copies shipped there)")(
      "source", po::value<std::string>()->default_value(""),
      "the source tree, holding workloads/ (default: found from $NEST_HOME, the working "
      "directory or the executable)")("failures-only", po::bool_switch(),
                                      "print only the cases out of tolerance");
  po::variables_map vm;
  if (!parse_options(args, "nest validate [--reference DIR] [--source DIR]", options, {}, vm)) {
    return 0;
  }
  const validate::ValidationInputs inputs =
      resolve_inputs(vm["reference"].as<std::string>(), vm["source"].as<std::string>());
  const std::vector<validate::ValidationCase> cases = validate::run_validation(inputs);

  std::size_t width = 4;
  for (const auto& c : cases) width = std::max(width, c.group.size() + 2 + c.name.size());
  std::cout << fmt::format("{:<{}}  {:>17}  {:>17}  {:>9}  {:>9}  {:<4}  {}\n", "case", width,
                           "expected", "got", "error", "tolerance", "", "source");
  std::size_t failed = 0;
  for (const auto& c : cases) {
    if (!c.passed()) ++failed;
    if (vm["failures-only"].as<bool>() && c.passed()) continue;
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
