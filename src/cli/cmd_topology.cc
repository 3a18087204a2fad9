// `nest topology describe|validate FILE`: loads a topology file and reports its size, diameter,
// injection and bisection bandwidth (and with --nodes its node and link tables, as run files
// hold them under /topology), or just checks it. `nest topology import FILE` converts an
// ASTRA-sim analytical network config into a NEST topology file (kind: dimensions).

#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "cli/commands.h"
#include "cli/options.h"
#include "nest/config/node.h"
#include "nest/core/atomic_file.h"
#include "nest/core/error.h"
#include "nest/core/unit_parse.h"
#include "nest/topo/astra_sim.h"
#include "nest/topo/loader.h"
#include "nest/topo/metrics.h"

namespace nest::cli {
namespace {

constexpr const char* kUsage =
    "nest topology describe FILE|NAME [--nodes] [--json] [--max-input-size SIZE] [--max-memory "
    "SIZE]\n"
    "       nest topology validate FILE|NAME [--json] [--max-input-size SIZE] [--max-memory SIZE]\n"
    "       nest topology import ASTRA_SIM_YAML [-o OUT] [--max-input-size SIZE] [--max-memory "
    "SIZE]";

std::string join(const std::vector<int>& v) {
  std::string out;
  for (const int x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return out;
}

const char* kind_name(topo::NodeKind kind) {
  return kind == topo::NodeKind::kDevice ? "device" : "switch";
}

// The node and link tables, as /topology/nodes and /topology/links of a run file.
nlohmann::ordered_json tables_json(const topo::Topology& t) {
  auto nodes = nlohmann::ordered_json::array();
  for (topo::NodeId id = 0; id < t.num_nodes(); ++id) {
    const topo::Node& n = t.node(id);
    nodes.push_back({{"id", id},
                     {"name", n.name},
                     {"kind", kind_name(n.kind)},
                     {"tier", n.tier},
                     {"forwards", n.forwards}});
  }
  auto links = nlohmann::ordered_json::array();
  for (const topo::Link& l : t.links()) {
    links.push_back({{"src", l.src},
                     {"dst", l.dst},
                     {"bandwidth_bytes_per_s", l.bandwidth.bytes_per_s()},
                     {"latency_s", l.latency.to_seconds()}});
  }
  return {{"nodes", std::move(nodes)}, {"links", std::move(links)}};
}

void print_tables(const topo::Topology& t) {
  std::cout << fmt::format("\n{:>6}  {:<24} {:<7} {:>4}  {}\n", "node", "name", "kind", "tier",
                           "forwards");
  for (topo::NodeId id = 0; id < t.num_nodes(); ++id) {
    const topo::Node& n = t.node(id);
    std::cout << fmt::format("{:>6}  {:<24} {:<7} {:>4}  {}\n", id, n.name, kind_name(n.kind),
                             n.tier, n.forwards ? "yes" : "no");
  }
  std::cout << fmt::format("\n{:>6}  {:<24} {:<24} {:>12} {:>10}\n", "link", "from", "to",
                           "bandwidth", "latency");
  for (topo::LinkId id = 0; id < t.num_links(); ++id) {
    const topo::Link& l = t.link(id);
    std::cout << fmt::format("{:>6}  {:<24} {:<24} {:>12} {:>10}\n", id, t.node(l.src).name,
                             t.node(l.dst).name, format_bandwidth(l.bandwidth),
                             format_time(l.latency));
  }
}

int describe(std::span<char* const> args) {
  std::string file;
  bool json = false;
  bool tables = false;
  Options o(kUsage);
  o.positional("file", &file, "topology YAML file or name (topologies/)")
      .add("nodes", &tables,
           "also list every node (id, name, kind, tier, forwards) and directed link")
      .add("json", &json, "print one JSON object instead of text");
  LimitArgs limit_args;
  add_limit_options(o, limit_args);
  if (!o.parse(args)) return 0;
  file = find_topology(file, "file");
  const topo::Topology t = topo::load_topology(file, limits_of(limit_args));
  const topo::TopologySummary s = topo::summarize(t);
  const char* method = s.bisection_exact_form ? "closed_form" : "max_flow";
  if (json) {
    nlohmann::ordered_json j = {
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
    if (tables) j["topology"] = tables_json(t);
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
  if (tables) print_tables(t);
  return 0;
}

int validate(std::span<char* const> args) {
  std::string file;
  bool json = false;
  Options o(kUsage);
  o.positional("file", &file, "topology YAML file or name (topologies/)")
      .add("json", &json, "print one JSON object instead of text");
  LimitArgs limit_args;
  add_limit_options(o, limit_args);
  if (!o.parse(args)) return 0;
  file = find_topology(file, "file");
  const topo::Topology t = topo::load_topology(file, limits_of(limit_args));
  if (json) {
    nlohmann::ordered_json j = {{"file", file},
                                {"valid", true},
                                {"name", t.name()},
                                {"kind", topo::family_name(t.family())},
                                {"devices", t.num_devices()},
                                {"switches", t.num_switches()},
                                {"links", t.num_cables()}};
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << fmt::format("ok: {}: {} ({}), {} devices, {} switches, {} cables\n", file, t.name(),
                           topo::family_name(t.family()), t.num_devices(), t.num_switches(),
                           t.num_cables());
  return 0;
}

// Converts an ASTRA-sim analytical network config; the result is loaded (size limits, every
// check of a NEST file) before anything is written.
int import(std::span<char* const> args) {
  std::string file;
  std::string output;
  Options o(kUsage);
  o.positional("file", &file, "ASTRA-sim analytical network config (YAML, GB/s and ns implied)")
      .add("output,o", &output, "write the NEST topology file here (default: standard output)");
  LimitArgs limit_args;
  add_limit_options(o, limit_args);
  if (!o.parse(args)) return 0;
  const config::Limits limits = limits_of(limit_args);
  const std::string text =
      topo::import_astra_sim_network(config::Node::load_file(file, limits.max_input_bytes));
  (void)topo::load_topology_string(text, output.empty() ? file : output, limits);
  if (output.empty()) {
    std::cout << text;
    return 0;
  }
  write_text_atomically(output, text);
  std::cout << "topology written to " << output << "\n";
  return 0;
}

}  // namespace

int run_topology(std::span<char* const> args, const Context&) {
  const std::string sub = args.size() > 1 ? args[1] : "";
  if (sub == "describe") return describe(args.subspan(1));
  if (sub == "validate") return validate(args.subspan(1));
  if (sub == "import") return import(args.subspan(1));
  if (sub == "--help" || sub == "-h") {
    std::cout << "usage: " << kUsage << "\n";
    return 0;
  }
  throw Error::input("unknown or missing subcommand",
                     {.key = "topology", .value = sub, .expected = "describe, validate or import"});
}

}  // namespace nest::cli
