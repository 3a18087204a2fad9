#include "nest/sweep/study.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "nest/config/limits.h"
#include "nest/config/node.h"
#include "nest/core/catalog.h"
#include "nest/core/error.h"
#include "nest/core/unit_parse.h"

namespace nest::sweep {
namespace {

using config::Node;

constexpr std::int64_t kMaxDevices = std::int64_t{1} << 24;
constexpr std::size_t kMaxPoints = 1'000'000;

// Generator parameter names, as nest/topo/params.h names the fields (topology files use them).
const std::map<std::string, std::vector<std::string>, std::less<>>& generator_table() {
  static const std::map<std::string, std::vector<std::string>, std::less<>> kTable = {
      {"fat_tree",
       {"k", "link_bandwidth", "link_latency", "edge_oversubscription",
        "aggregation_oversubscription", "devices_per_host", "scale_up_bandwidth",
        "scale_up_latency"}},
      {"spine_leaf",
       {"leaves", "spines", "hosts_per_leaf", "host_bandwidth", "host_latency", "uplink_bandwidth",
        "uplink_latency"}},
      {"torus", {"dims", "link_bandwidth", "link_latency"}},
      {"rail_optimized",
       {"nodes", "gpus_per_node", "nodes_per_leaf", "spines", "nvlink_bandwidth", "nvlink_latency",
        "nic_bandwidth", "nic_latency", "spine_bandwidth", "spine_latency"}},
      {"hierarchical", {"devices_per_level", "bandwidth_per_level", "latency_per_level"}},
      {"dragonfly",
       {"groups", "routers_per_group", "hosts_per_router", "global_links_per_router",
        "host_bandwidth", "host_latency", "local_bandwidth", "local_latency", "global_bandwidth",
        "global_latency"}},
  };
  return kTable;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The parameter a generator sizes from `devices`, and the one `spine_oversubscription` sets.
std::string_view size_parameter(std::string_view kind) {
  if (kind == "rail_optimized") return "nodes";
  if (kind == "spine_leaf") return "leaves";
  if (kind == "fat_tree") return "k";
  return {};
}
std::string_view oversubscribed_parameter(std::string_view kind) {
  if (kind == "rail_optimized") return "spine_bandwidth";
  if (kind == "spine_leaf") return "uplink_bandwidth";
  if (kind == "fat_tree") return "aggregation_oversubscription";
  return {};
}

Value value_of(const Node& node) {
  Value v;
  v.line = node.line();
  if (node.is_scalar()) {
    v.items.push_back(node.as_string());
    return v;
  }
  if (node.is_sequence()) {
    v.list = true;
    for (const Node& e : node.elements()) {
      if (!e.is_scalar()) throw e.error("expected a scalar", "a flat list of scalars");
      v.items.push_back(e.as_string());
    }
    return v;
  }
  throw node.error("expected a scalar or a list", "a parameter value");
}

const Parameter* find_parameter(const std::vector<Parameter>& params, std::string_view key) {
  for (const auto& p : params) {
    if (p.first == key) return &p;
  }
  return nullptr;
}

void set_parameter(std::vector<Parameter>& params, const std::string& key, Value value) {
  for (auto& p : params) {
    if (p.first == key) {
      p.second = std::move(value);
      return;
    }
  }
  params.emplace_back(key, std::move(value));
}

// A study's file reference: a path relative to the study's folder (or absolute), or the name of
// a bundled file (`nest list`).
std::filesystem::path resolve(const std::filesystem::path& directory, const Node& node,
                              DataKind kind, const Catalog& catalog) {
  const std::string text = node.as_string();
  const std::filesystem::path p(text);
  const std::filesystem::path full = p.is_absolute() ? p : directory / p;
  std::error_code ec;
  if (std::filesystem::is_regular_file(full, ec)) return full;
  if (text.find('/') == std::string::npos && p.extension() != ".yaml") {
    try {
      return catalog.find(kind, text);
    } catch (const Error& e) {
      throw node.error(e.message(), e.context().expected);
    }
  }
  throw node.error("no such file",
                   "a readable file (paths are relative to the study file) or a bundled name");
}

TopologyEntry parse_topology(const std::string& name, const Node& node) {
  TopologyEntry t;
  t.name = name;
  t.line = node.line();
  if (!node.is_map()) throw node.error("expected a map", "generator parameters or {file: path}");
  if (node.has("file")) {
    node.expect_keys({"file"});
    t.kind = "file";
    t.file = node.at("file").as_string();
    return t;
  }
  const Node kind = node.at("kind");
  const auto& table = generator_table();
  const auto it = table.find(kind.as_string());
  if (it == table.end()) {
    std::vector<std::string> kinds;
    for (const auto& [k, params] : table) kinds.push_back(k);
    throw kind.error("unknown topology generator", "one of " + join(kinds) + ", or file:");
  }
  t.kind = it->first;
  std::vector<std::string> allowed = it->second;
  allowed.emplace_back("kind");
  allowed.emplace_back("name");
  allowed.emplace_back("description");
  node.expect_keys(allowed);
  for (const auto& [key, value] : node.entries()) {
    if (key == "kind" || key == "name" || key == "description") continue;
    t.parameters.emplace_back(key, value_of(value));
  }
  return t;
}

std::vector<int> int_list(const Node& node, std::int64_t min, std::int64_t max) {
  std::vector<int> out;
  for (std::int64_t v : node.as_int_list(min, max)) out.push_back(static_cast<int>(v));
  if (out.empty()) throw node.error("empty list", "at least one value");
  return out;
}

WorkloadEntry parse_workload(const std::string& name, const Node& node,
                             const std::filesystem::path& directory, const Catalog& catalog) {
  WorkloadEntry w;
  w.name = name;
  w.line = node.line();
  if (!node.is_map()) throw node.error("expected a map", "{profile: path} or {model, accelerator}");
  if (node.has("profile")) {
    node.expect_keys({"profile"});
    w.profile = resolve(directory, node.at("profile"), DataKind::kProfile, catalog);
    return w;
  }
  node.expect_keys({"model", "accelerator", "precision", "flash_attention", "sequence_length",
                    "global_batch", "max_tensor_parallel", "max_expert_parallel",
                    "context_parallel", "micro_batches"});
  w.model = resolve(directory, node.at("model"), DataKind::kModel, catalog);
  w.accelerator = resolve(directory, node.at("accelerator"), DataKind::kAccelerator, catalog);
  if (auto n = node.find("precision")) w.precision = n->as_string();
  if (auto n = node.find("flash_attention")) w.flash_attention = n->as_bool();
  if (auto n = node.find("sequence_length")) w.sequence_length = n->as_int(1, 1 << 24);
  if (auto n = node.find("global_batch")) w.global_batch = n->as_int(1, 1 << 30);
  if (auto n = node.find("max_tensor_parallel")) {
    w.max_tensor_parallel = static_cast<int>(n->as_int(1, 1024));
  }
  if (auto n = node.find("max_expert_parallel")) {
    w.max_expert_parallel = static_cast<int>(n->as_int(1, 1024));
  }
  if (auto n = node.find("context_parallel")) w.context_parallel = int_list(*n, 1, 1024);
  if (auto n = node.find("micro_batches")) w.micro_batches = int_list(*n, 1, 1 << 16);
  return w;
}

PlacerSettings parse_placer(const Node& node) {
  node.expect_keys({"baselines", "orders", "zero_stages", "recompute", "max_stages", "verify"});
  PlacerSettings p;
  if (auto n = node.find("baselines")) {
    p.baselines.clear();
    for (const Node& e : n->elements()) {
      const std::string b = e.as_choice({"manual", "topology-agnostic", "anneal"});
      if (std::find(p.baselines.begin(), p.baselines.end(), b) != p.baselines.end()) {
        throw e.error("baseline listed twice", "each baseline once");
      }
      p.baselines.push_back(b);
    }
  }
  if (auto n = node.find("orders")) {
    for (const Node& e : n->elements()) {
      try {
        p.orders.push_back(placer::parse_placement_order(e.as_string()));
      } catch (const Error& err) {
        throw e.error(err.message(), err.context().expected);
      }
    }
    if (p.orders.empty()) throw n->error("empty list", "at least one placement order");
  }
  if (auto n = node.find("zero_stages")) p.zero_stages = int_list(*n, 0, 3);
  if (auto n = node.find("recompute")) p.recompute = n->as_bool();
  if (auto n = node.find("max_stages")) p.max_stages = static_cast<int>(n->as_int(0, 1 << 20));
  if (auto n = node.find("verify")) p.verify = static_cast<int>(n->as_int(0, 64));
  return p;
}

// Parses the scalars of one point's axes and remembers where each was set.
class PointBuilder {
 public:
  explicit PointBuilder(const Study& study) : study_(study) {}

  // Sets axis `key` of `point` from `node`.
  void set(Point& point, const std::string& key, const Node& node) const {
    if (key == "topology") {
      point.topology = entry_name(node, study_.topologies);
    } else if (key == "workload") {
      point.workload = entry_name(node, study_.workloads);
    } else if (key == "devices") {
      point.devices = node.as_int(1, kMaxDevices);
    } else if (key == "rules") {
      point.rules = node.as_choice({"megatron", "nest-artifact"}) == "megatron"
                        ? workload::MemoryRules::kMegatron
                        : workload::MemoryRules::kNestArtifact;
    } else if (key == "replay") {
      point.replay = node.as_bool();
    } else if (key == "spine_oversubscription") {
      point.spine_oversubscription = node.as_double(1, 1e6);
    } else if (key == "seed") {
      point.seed = static_cast<std::uint64_t>(node.as_int(0));
    } else if (key.starts_with("topology.") && key.size() > 9) {
      set_parameter(point.topology_overrides, key.substr(9), value_of(node));
    } else if (std::find(std::begin(kConfigurationAxes), std::end(kConfigurationAxes), key) !=
               std::end(kConfigurationAxes)) {
      set_configuration(point, key, node);
    } else {
      throw node.error(fmt::format("unknown axis \"{}\"", key),
                       "one of topology, workload, devices, rules, replay, "
                       "spine_oversubscription, seed, topology.<parameter>, tp, pp, dp, vp, zero, "
                       "recompute, order");
    }
  }

 private:
  // A configuration axis, checked as the command line checks its flag.
  static void set_configuration(Point& point, const std::string& key, const Node& node) {
    std::string value;
    if (key == "recompute") {
      value = node.as_choice({"none", "selective", "full"});
    } else if (key == "order") {
      value = node.as_string();
      try {
        (void)placer::parse_placement_order(value);
      } catch (const Error& e) {
        throw node.error(e.message(), e.context().expected);
      }
    } else if (key == "zero") {
      value = std::to_string(node.as_int(0, 3));
    } else {
      value = std::to_string(node.as_int(1, 1 << 20));
    }
    auto& c = point.configuration;
    const auto at = std::find_if(c.begin(), c.end(), [&](const auto& e) { return e.first == key; });
    if (at != c.end()) {
      at->second = value;
    } else {
      c.emplace_back(key, value);
    }
  }

  template <class Entry>
  static std::string entry_name(const Node& node, const std::vector<Entry>& entries) {
    const std::string name = node.as_string();
    std::vector<std::string> names;
    for (const auto& e : entries) {
      if (e.name == name) return name;
      names.push_back(e.name);
    }
    throw node.error("unknown name", "one of " + join(names));
  }

  const Study& study_;
};

// Checks what can be checked of a point before it runs; `where` locates its axes in the study.
void check_point(const Study& study, const Point& point, const Node& where) {
  const TopologyEntry& topology = study.topology(point);
  if (topology.kind == "file") {
    if (!point.topology_overrides.empty()) {
      throw where.error(
          fmt::format("topology \"{}\" is a file: it has no parameters to sweep", topology.name),
          "topology.<parameter> axes only on generated topologies");
    }
    if (point.spine_oversubscription) {
      throw where.error("spine_oversubscription needs a generated topology",
                        "a rail_optimized, spine_leaf or fat_tree topology");
    }
    return;
  }
  const auto& allowed = generator_table().at(topology.kind);
  for (const auto& [key, value] : point.topology_overrides) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      throw Error::input(
          fmt::format("not a parameter of {} topology \"{}\"", topology.kind, topology.name),
          {.file = study.file,
           .line = value.line,
           .key = where.path() + ".topology." + key,
           .expected = "one of " + join(allowed)});
    }
  }
  if (point.spine_oversubscription) {
    const std::string_view target = oversubscribed_parameter(topology.kind);
    if (target.empty()) {
      throw where.error(fmt::format("spine_oversubscription does not apply to {} topology \"{}\"",
                                    topology.kind, topology.name),
                        "a rail_optimized, spine_leaf or fat_tree topology");
    }
    if (find_parameter(point.topology_overrides, target) != nullptr) {
      throw where.error(fmt::format("spine_oversubscription sets topology.{}: sweep one or the "
                                    "other",
                                    target),
                        "not both");
    }
  }
}

void fill_inputs(const Study& study, Point& point) {
  point.inputs.clear();
  point.inputs.push_back(point.topology);
  point.inputs.push_back(point.workload);
  point.inputs.push_back(point.devices ? std::to_string(*point.devices) : "");
  point.inputs.emplace_back(rules_name(point.rules));
  point.inputs.emplace_back(point.replay ? "true" : "false");
  point.inputs.push_back(
      point.spine_oversubscription ? fmt::format("{}", *point.spine_oversubscription) : "");
  point.inputs.push_back(std::to_string(point.seed));
  const TopologyEntry& topology = study.topology(point);
  for (std::size_t c = std::size(kStandardAxes); c < study.input_columns.size(); ++c) {
    const std::string& column = study.input_columns[c];
    if (!column.starts_with("topology.")) {
      const std::string axis = column.substr(6);  // "fixed.<axis>"
      const auto& fixed = point.configuration;
      const auto at =
          std::find_if(fixed.begin(), fixed.end(), [&](const auto& e) { return e.first == axis; });
      point.inputs.push_back(at != fixed.end() ? at->second : "");
      continue;
    }
    const std::string key = column.substr(9);
    const Parameter* p = find_parameter(point.topology_overrides, key);
    if (p == nullptr) p = find_parameter(topology.parameters, key);
    point.inputs.push_back(p != nullptr ? p->second.text() : "");
  }
}

}  // namespace

std::string Value::text() const {
  if (!list) return items.empty() ? std::string() : items.front();
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out + "]";
}

Value Value::scalar(std::string text) {
  Value v;
  v.items.push_back(std::move(text));
  return v;
}

const TopologyEntry& Study::topology(const Point& point) const {
  for (const auto& t : topologies) {
    if (t.name == point.topology) return t;
  }
  throw Error::internal("point names an unknown topology \"" + point.topology + "\"");
}

const WorkloadEntry& Study::workload(const Point& point) const {
  for (const auto& w : workloads) {
    if (w.name == point.workload) return w;
  }
  throw Error::internal("point names an unknown workload \"" + point.workload + "\"");
}

std::string_view rules_name(workload::MemoryRules rules) noexcept {
  return rules == workload::MemoryRules::kMegatron ? "megatron" : "nest-artifact";
}

std::vector<std::string> generator_parameters(std::string_view kind) {
  const auto& table = generator_table();
  const auto it = table.find(kind);
  return it == table.end() ? std::vector<std::string>{} : it->second;
}

Study parse_study(std::string_view text, const std::string& name,
                  const std::filesystem::path& directory, const config::Limits& limits,
                  const Catalog& catalog) {
  const Node root = Node::load_string(text, name);
  root.expect_keys(
      {"kind", "name", "topologies", "workloads", "placer", "defaults", "sweep", "description"});
  if (root.at("kind").as_string() != "study") {
    throw root.at("kind").error("not a study file", "kind: study");
  }
  Study study;
  study.limits = limits;
  study.file = name;
  study.directory = directory;
  study.text = std::string(text);
  study.name =
      root.has("name") ? root.at("name").as_string() : std::filesystem::path(name).stem().string();

  const Node topologies = root.at("topologies");
  for (const auto& [key, node] : topologies.entries()) {
    study.topologies.push_back(parse_topology(key, node));
  }
  if (study.topologies.empty()) throw topologies.error("no topology", "at least one topology");
  const Node entries = root.at("topologies");
  for (auto& t : study.topologies) {
    if (t.kind != "file") continue;
    t.file = resolve(directory, entries.at(t.name).at("file"), DataKind::kTopology, catalog);
  }
  const Node workloads = root.at("workloads");
  for (const auto& [key, node] : workloads.entries()) {
    study.workloads.push_back(parse_workload(key, node, directory, catalog));
  }
  if (study.workloads.empty()) throw workloads.error("no workload", "at least one workload");
  if (auto n = root.find("placer")) study.placer = parse_placer(*n);

  const PointBuilder builder(study);
  Point base;
  base.topology = study.topologies.size() == 1 ? study.topologies.front().name : "";
  base.workload = study.workloads.size() == 1 ? study.workloads.front().name : "";
  if (auto defaults = root.find("defaults")) {
    for (const auto& [key, node] : defaults->entries()) builder.set(base, key, node);
  }

  // Each point with the node its axes were written at (for errors found after expansion).
  std::vector<std::pair<Point, Node>> expanded;
  const Node sweep = root.at("sweep");
  sweep.expect_keys({"product", "points"});
  if (sweep.has("product") == sweep.has("points")) {
    throw sweep.error("expected exactly one of product and points", "product: or points:");
  }
  if (auto product = sweep.find("product")) {
    const auto axes = product->entries();
    std::vector<std::vector<Node>> values;
    std::size_t total = 1;
    for (const auto& [key, node] : axes) {
      values.push_back(node.elements());
      if (values.back().empty()) throw node.error("empty list", "at least one value");
      total *= values.back().size();
      if (total > kMaxPoints) {
        throw node.error("too many points", fmt::format("at most {} points", kMaxPoints));
      }
    }
    std::vector<std::size_t> digit(axes.size(), 0);
    for (std::size_t i = 0; i < total; ++i) {
      Point p = base;
      for (std::size_t a = 0; a < axes.size(); ++a) {
        builder.set(p, axes[a].first, values[a][digit[a]]);
      }
      expanded.emplace_back(std::move(p), *product);
      // The last axis varies fastest.
      for (std::size_t a = axes.size(); a-- > 0;) {
        if (++digit[a] < values[a].size()) break;
        digit[a] = 0;
      }
    }
  } else {
    const Node points = sweep.at("points");
    const auto list = points.elements();
    if (list.empty()) throw points.error("empty list", "at least one point");
    if (list.size() > kMaxPoints) throw points.error("too many points");
    for (const Node& entry : list) {
      if (!entry.is_map()) throw entry.error("expected a map", "a map of axis values");
      Point p = base;
      for (const auto& [key, node] : entry.entries()) builder.set(p, key, node);
      expanded.emplace_back(std::move(p), entry);
    }
  }

  study.input_columns.assign(std::begin(kStandardAxes), std::end(kStandardAxes));
  for (auto& [point, where] : expanded) {
    if (point.topology.empty()) {
      throw where.error("no topology for this point", "a topology axis (or defaults.topology)");
    }
    if (point.workload.empty()) {
      throw where.error("no workload for this point", "a workload axis (or defaults.workload)");
    }
    check_point(study, point, where);
    for (const auto& [key, value] : point.topology_overrides) {
      const std::string column = "topology." + key;
      if (std::find(study.input_columns.begin(), study.input_columns.end(), column) ==
          study.input_columns.end()) {
        study.input_columns.push_back(column);
      }
    }
  }
  // The configuration axes any point sets, after the topology parameters.
  for (const std::string_view axis : kConfigurationAxes) {
    for (const auto& [point, where] : expanded) {
      const auto& c = point.configuration;
      if (std::find_if(c.begin(), c.end(), [&](const auto& e) { return e.first == axis; }) !=
          c.end()) {
        study.input_columns.push_back("fixed." + std::string(axis));
        break;
      }
    }
  }
  for (auto& [point, where] : expanded) {
    point.index = study.points.size();
    // Overrides in column order, so that equal points have equal overrides.
    std::vector<Parameter> ordered;
    for (std::size_t c = std::size(kStandardAxes); c < study.input_columns.size(); ++c) {
      if (!study.input_columns[c].starts_with("topology.")) continue;
      if (const Parameter* p = find_parameter(point.topology_overrides,
                                              std::string_view(study.input_columns[c]).substr(9))) {
        ordered.push_back(*p);
      }
    }
    point.topology_overrides = std::move(ordered);
    fill_inputs(study, point);
    study.points.push_back(std::move(point));
  }
  return study;
}

Study load_study(const std::string& path, const config::Limits& limits, const Catalog& catalog) {
  const std::string text =
      config::read_input_file(path, limits.max_input_bytes, "a readable study file");
  const std::filesystem::path directory = std::filesystem::path(path).parent_path();
  return parse_study(text, path, directory.empty() ? "." : directory, limits, catalog);
}

std::vector<Parameter> topology_parameters(const Study& study, const Point& point) {
  const TopologyEntry& entry = study.topology(point);
  std::vector<Parameter> params = entry.parameters;
  for (const auto& [key, value] : point.topology_overrides) set_parameter(params, key, value);

  auto number = [&](std::string_view key) -> double {
    const Parameter* p = find_parameter(params, key);
    if (p == nullptr || p->second.list || p->second.items.size() != 1) {
      throw Error::input(fmt::format("needs topology parameter \"{}\"", key),
                         {.key = "topology." + std::string(key),
                          .expected = "a number, to derive the topology's size or uplinks"});
    }
    const std::string& text = p->second.items.front();
    try {
      std::size_t used = 0;
      const double v = std::stod(text, &used);
      if (used == text.size() && std::isfinite(v) && v > 0) return v;
    } catch (const std::exception&) {
    }
    throw Error::input(
        "not a positive number",
        {.key = "topology." + std::string(key), .value = text, .expected = "a number > 0"});
  };
  auto rate = [&](std::string_view key) -> double {
    const Parameter* p = find_parameter(params, key);
    if (p == nullptr || p->second.list || p->second.items.size() != 1) {
      throw Error::input(fmt::format("needs topology parameter \"{}\"", key),
                         {.key = "topology." + std::string(key),
                          .expected = "a bandwidth, to derive the oversubscribed uplinks"});
    }
    try {
      return parse_bandwidth(p->second.items.front()).bytes_per_s();
    } catch (const Error& e) {
      throw e.at_key("topology." + std::string(key));
    }
  };

  const std::string_view size_key = size_parameter(entry.kind);
  const bool size_given = find_parameter(params, size_key) != nullptr;
  if (point.devices && !size_key.empty() && !size_given) {
    const auto devices = static_cast<double>(*point.devices);
    // Sizes past the generators' node limit (a per-node count of 1e-300) are refused here,
    // before they are cast to integers; the generator names the exact limit.
    const auto whole = [&](double v, std::string_view key) {
      if (!(v <= static_cast<double>(kMaxDevices))) {
        throw Error::input("the device budget needs too large a topology",
                           {.key = "topology." + std::string(key),
                            .value = fmt::format("{:g}", v),
                            .expected = fmt::format("at most {}", kMaxDevices)});
      }
      return static_cast<std::int64_t>(std::ceil(v));
    };
    std::int64_t size = 0;
    if (entry.kind == "rail_optimized") {
      size = whole(devices / number("gpus_per_node"), "nodes");
    } else if (entry.kind == "spine_leaf") {
      size = whole(devices / number("hosts_per_leaf"), "leaves");
    } else {  // fat_tree: the smallest even k with k^3/4 hosts of devices_per_host devices
      const double per_host =
          find_parameter(params, "devices_per_host") ? number("devices_per_host") : 1.0;
      constexpr std::int64_t kMaxK = 1024;  // the generator's
      size = 2;
      while (static_cast<double>(size * size * size / 4) * per_host < devices && size < kMaxK) {
        size += 2;
      }
      if (static_cast<double>(size * size * size / 4) * per_host < devices) {
        throw Error::input("the device budget needs too large a fat-tree",
                           {.key = "topology.k",
                            .value = std::to_string(*point.devices) + " devices",
                            .expected = "a budget that k <= 1024 holds"});
      }
    }
    set_parameter(params, std::string(size_key), Value::scalar(std::to_string(size)));
  }
  if (point.spine_oversubscription) {
    const double ratio = *point.spine_oversubscription;
    if (entry.kind == "rail_optimized") {
      const double up =
          number("nodes_per_leaf") * rate("nic_bandwidth") / (number("spines") * ratio);
      set_parameter(params, "spine_bandwidth", Value::scalar(fmt::format("{} B/s", up)));
    } else if (entry.kind == "spine_leaf") {
      const double up =
          number("hosts_per_leaf") * rate("host_bandwidth") / (number("spines") * ratio);
      set_parameter(params, "uplink_bandwidth", Value::scalar(fmt::format("{} B/s", up)));
    } else if (entry.kind == "fat_tree") {
      set_parameter(params, "aggregation_oversubscription",
                    Value::scalar(fmt::format("{}", ratio)));
    }
  }
  return params;
}

std::string topology_yaml(std::string_view kind, std::string_view name,
                          const std::vector<Parameter>& parameters) {
  auto quote = [](std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out + "\"";
  };
  std::string out = fmt::format("kind: {}\nname: {}\n", kind, quote(name));
  for (const auto& [key, value] : parameters) {
    if (!value.list) {
      out += fmt::format("{}: {}\n", key, quote(value.text()));
      continue;
    }
    out += key + ": [";
    for (std::size_t i = 0; i < value.items.size(); ++i) {
      out += (i ? ", " : "") + quote(value.items[i]);
    }
    out += "]\n";
  }
  return out;
}

}  // namespace nest::sweep
