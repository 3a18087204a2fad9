// `nest topology describe|validate FILE`: loads a topology file and reports its size, diameter,
// injection and bisection bandwidth, or just checks it.

#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "cli/commands.h"
#include "cli/options.h"
#include "nest/core/error.h"
#include "nest/core/unit_parse.h"
#include "nest/topo/loader.h"
#include "nest/topo/metrics.h"

namespace nest::cli {
namespace {

constexpr const char* kUsage =
    "nest topology describe FILE [--json] [--max-input-size SIZE] [--max-memory SIZE]\n"
    "       nest topology validate FILE [--max-input-size SIZE] [--max-memory SIZE]";

std::string join(const std::vector<int>& v) {
  std::string out;
  for (const int x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return out;
}

int describe(std::span<char* const> args) {
  po::options_description options("options");
  std::string file;
  options.add_options()("file", po::value(&file)->required(), "topology YAML file")(
      "json", "print one JSON object instead of text");
  add_limit_options(options);
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  if (!parse_options(args, kUsage, options, positional, vm)) return 0;

  const topo::Topology t = topo::load_topology(file, limits_of(vm));
  const topo::TopologySummary s = topo::summarize(t);
  const char* method = s.bisection_exact_form ? "closed_form" : "max_flow";
  if (vm.count("json") != 0) {
    const nlohmann::ordered_json j = {
        {"name", t.name()},
        {"kind", topo::family_name(t.family())},
        {"devices", s.devices},
        {"switches", s.switches},
        {"links", s.cables},
        {"directed_links", t.num_links()},
        {"diameter_hops", s.diameter_hops},
        {"injection_bytes_per_s", s.injection.bytes_per_s()},
        {"bisection_bytes_per_s", s.bisection.bytes_per_s()},
        {"bisection_method", method},
        {"domain_sizes", t.domain_sizes()},
    };
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "topology:  {} ({})\n"
      "devices:   {}\n"
      "switches:  {}\n"
      "links:     {} cables ({} directed)\n"
      "diameter:  {} hops\n"
      "injection: {} per device\n"
      "bisection: {} ({})\n"
      "domains:   {}\n",
      t.name(), topo::family_name(t.family()), s.devices, s.switches, s.cables, t.num_links(),
      s.diameter_hops, format_bandwidth(s.injection), format_bandwidth(s.bisection),
      s.bisection_exact_form ? "closed form" : "max-flow", join(t.domain_sizes()));
  return 0;
}

int validate(std::span<char* const> args) {
  po::options_description options("options");
  std::string file;
  options.add_options()("file", po::value(&file)->required(), "topology YAML file");
  add_limit_options(options);
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  if (!parse_options(args, kUsage, options, positional, vm)) return 0;
  const topo::Topology t = topo::load_topology(file, limits_of(vm));
  std::cout << fmt::format("ok: {}: {} ({}), {} devices, {} switches, {} cables\n", file, t.name(),
                           topo::family_name(t.family()), t.num_devices(), t.num_switches(),
                           t.num_cables());
  return 0;
}

}  // namespace

int run_topology(std::span<char* const> args) {
  const std::string sub = args.size() > 1 ? args[1] : "";
  if (sub == "describe") return describe(args.subspan(1));
  if (sub == "validate") return validate(args.subspan(1));
  if (sub == "--help" || sub == "-h") {
    std::cout << "usage: " << kUsage << "\n";
    return 0;
  }
  throw Error::input("unknown or missing subcommand",
                     {.key = "topology", .value = sub, .expected = "describe or validate"});
}

}  // namespace nest::cli
