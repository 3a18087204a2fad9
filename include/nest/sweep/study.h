#pragma once
/// \file
/// Study files (`nest sweep study.yaml`): what-if questions as a set of points, each point one
/// placer (+ replay) run on one topology, workload and scale. A study names its topologies and
/// workloads, then sweeps *axes* over them, as a Cartesian product or as an explicit list.
///
/// Format (keys marked * are optional):
/// ```yaml
/// kind: study
/// name: spine-vs-bandwidth        # * default: the file's stem
/// description: "..."             # * free text
/// topologies:                     # named topologies: generator parameters as in
///   rail:                         #   topologies/*.yaml (kind + parameters), or {file: path}
///     kind: rail_optimized
///     gpus_per_node: 8
///     nodes_per_leaf: 32
///     spines: 32
///     nvlink_bandwidth: 450 GB/s
///     nvlink_latency: 0.5 us
///     nic_bandwidth: 50 GB/s
///     nic_latency: 2 us
///     spine_bandwidth: 50 GB/s
///     spine_latency: 2 us
/// workloads:                      # named workloads: a layer profile, or a model + accelerator
///   gpt3:
///     model: ../workloads/models/gpt3-175b.yaml            # paths: relative to this file
///     accelerator: ../workloads/accelerators/h100-sxm.yaml
///     precision: bf16             # * default bf16
///     flash_attention: true       # * default false
///     sequence_length: 2048       # * default: the model's
///     global_batch: 1536          # * default: the model's
///     max_tensor_parallel: 8      # * variants the placer may choose from, as `nest place`
///     max_expert_parallel: 8      # *   (nest/placer/variants.h): t and e powers of two up to
///     context_parallel: [1]       # *   these, sequence parallel when t > 1, these c and
///     micro_batches: [1, 2, 4]    # *   micro-batch sizes (defaults as shown)
///   artifact:
///     profile: ../workloads/profiles/gpt3-175b-h100.yaml
/// placer:                         # * search settings shared by every point
///   baselines: [manual]           # * of manual, topology-agnostic, anneal (default [manual])
///   orders: [tp-pp-dp, tp-dp-pp]  # * placement orders (default: the search's)
///   zero_stages: [0, 1]           # * default: the search's
///   recompute: true               # * allow full recomputation (default true)
///   max_stages: 0                 # * 0: no bound
///   verify: 0                     # * replay this many candidates per megatron point and
///                                 #   choose by replay (nest place --verify; default 0)
/// defaults:                       # * axis values of every point unless swept
///   devices: 1024
/// sweep:                          # exactly one of product / points
///   product:                      # Cartesian product; the first key varies slowest
///     workload: [gpt3]
///     devices: [1024, 4096]
///     topology.nic_bandwidth: [12.5 GB/s, 25 GB/s, 50 GB/s, 100 GB/s]
///     spine_oversubscription: [1, 2, 4]
///   # points:                     # or an explicit list: each point sets some axes
///   #   - {devices: 1024, topology.nic_bandwidth: 50 GB/s}
/// ```
///
/// Axes (the keys of `defaults`, `product` and `points` entries):
/// - `topology`, `workload`: a name from `topologies` / `workloads` (default: the only one);
/// - `devices`: the device budget of the placer (>= 1). A generated topology whose size
///   parameter is not given is sized to hold it: rail_optimized `nodes`, spine_leaf `leaves`,
///   fat_tree `k` (the smallest even k that holds it); without it the budget is every device;
/// - `rules`: `megatron` (default; the network priced by the collective oracle) or
///   `nest-artifact` (the rules of the published NEST numbers: zero network);
/// - `replay`: whether to replay the chosen plan on the simulator (default false);
/// - `spine_oversubscription`: >= 1, the ratio of down to up capacity of the topmost switching
///   tier, realized on the up links: rail_optimized `spine_bandwidth` = nodes_per_leaf ·
///   nic_bandwidth / (spines · ratio); spine_leaf `uplink_bandwidth` = hosts_per_leaf ·
///   host_bandwidth / (spines · ratio); fat_tree `aggregation_oversubscription` = ratio;
/// - `seed`: the ECMP seed (default 0);
/// - `topology.<parameter>`: any parameter of the point's topology generator, value as in a
///   topology file;
/// - `tp`, `pp`, `dp`, `vp` (>= 1), `zero` (0..3), `recompute` (none, selective, full),
///   `order` (tp-dp-pp, ...): fix that dimension of the point's plan, as `nest place --tp ...`
///   (the search ranges over the rest); input columns `fixed.<axis>`. A combination the job
///   refuses (a pipeline deeper than the layers, ...) is the point's error, naming the axis.
///
/// Everything that can be checked without running a point is checked when the study is read,
/// so a malformed study fails before any work, naming file, line and key: unknown keys, wrong
/// types, unknown names, unreadable workload files, topology parameters that the generator does
/// not have, an axis given twice. A bad parameter *value* (an odd fat-tree k, a zero bandwidth)
/// is the point's own failure: its row records the error and the sweep goes on.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nest/config/limits.h"
#include "nest/core/catalog.h"
#include "nest/placer/plan.h"
#include "nest/workload/memory.h"

namespace nest::sweep {

/// A parameter as written in the study: one scalar, or a flat list of scalars.
struct Value {
  std::vector<std::string> items;  ///< the scalar texts (one for a scalar)
  bool list = false;               ///< written as a sequence
  int line = 0;                    ///< 1-based line in the study file (0 for derived values)

  /// The YAML text: the scalar ("50 GB/s") or a flow sequence ("[4, 4, 4]").
  [[nodiscard]] std::string text() const;
  /// A scalar value (line 0).
  [[nodiscard]] static Value scalar(std::string text);
  friend bool operator==(const Value& a, const Value& b) {
    return a.items == b.items && a.list == b.list;
  }
};

/// A parameter name and its value, in the order the study wrote them.
using Parameter = std::pair<std::string, Value>;

/// A named topology: a generator (`kind` and its parameters) or a topology file.
struct TopologyEntry {
  std::string name;
  std::string kind;                   ///< generator kind ("rail_optimized", ...) or "file"
  std::filesystem::path file;         ///< the topology file when kind == "file"
  std::vector<Parameter> parameters;  ///< generator parameters (not `kind`), file order
  int line = 0;
};

/// A named workload: a layer-profile file, or a model and an accelerator with the intra-layer
/// variants the placer may choose from.
struct WorkloadEntry {
  std::string name;
  std::filesystem::path profile;  ///< a layer profile (then the fields below are unused)
  std::filesystem::path model;
  std::filesystem::path accelerator;
  std::string precision = "bf16";
  bool flash_attention = false;
  std::int64_t sequence_length = 0;  ///< 0: the model's
  std::int64_t global_batch = 0;     ///< 0: the model's
  int max_tensor_parallel = 8;
  int max_expert_parallel = 8;
  std::vector<int> context_parallel = {1};
  std::vector<int> micro_batches = {1, 2, 4};
  int line = 0;
};

/// Search settings shared by every point.
struct PlacerSettings {
  std::vector<std::string> baselines = {"manual"};  ///< "manual", "topology-agnostic", "anneal"
  std::vector<placer::PlacementOrder> orders;       ///< empty: the search's default
  std::vector<int> zero_stages;                     ///< empty: the search's default
  bool recompute = true;
  int max_stages = 0;
  /// Candidates replayed per point under the megatron rules (`JobSpec::verify`); 0: none.
  int verify = 0;
};

/// The axes that every point has, in the column order of the results.
inline constexpr std::string_view kStandardAxes[] = {
    "topology", "workload", "devices", "rules", "replay", "spine_oversubscription", "seed"};

/// The axes that fix a dimension of the plan (`nest place --tp --pp --dp --vp --zero --recompute
/// --order`); a column `fixed.<axis>` each, after the topology parameters, when any point
/// sets it (the plan's own columns say what the search chose).
inline constexpr std::string_view kConfigurationAxes[] = {"tp",   "pp",        "dp",   "vp",
                                                          "zero", "recompute", "order"};

/// One point of a study: the values of every axis.
struct Point {
  std::size_t index = 0;  ///< position in the study's expansion, from 0
  std::string topology;   ///< a `TopologyEntry::name`
  std::string workload;   ///< a `WorkloadEntry::name`
  std::optional<std::int64_t> devices;
  workload::MemoryRules rules = workload::MemoryRules::kMegatron;
  bool replay = false;
  std::optional<double> spine_oversubscription;
  std::uint64_t seed = 0;
  /// `topology.<parameter>` axes (parameter names without the prefix), in column order.
  std::vector<Parameter> topology_overrides;
  /// The configuration axes the point sets (`kConfigurationAxes` name → value as written:
  /// "8", "selective", "tp-dp-pp"); the search ranges over the rest.
  std::vector<std::pair<std::string, std::string>> configuration;
  /// The text of every input column (`Study::input_columns`), for the results table.
  std::vector<std::string> inputs;
};

/// A parsed and expanded study. Immutable once read; any number of threads may read it.
struct Study {
  std::string file;                 ///< as the user named it
  std::filesystem::path directory;  ///< relative paths in the study resolve against this
  std::string name;
  std::string text;  ///< the file's content (recorded in the results)
  std::vector<TopologyEntry> topologies;
  std::vector<WorkloadEntry> workloads;
  PlacerSettings placer;
  /// Input columns: the standard axes, then one `topology.<parameter>` column per parameter
  /// that any point overrides (first appearance order).
  std::vector<std::string> input_columns;
  std::vector<Point> points;  ///< in expansion order; points[i].index == i
  /// The limits the study was read with; its evaluation reads and builds under the same.
  config::Limits limits;

  /// The entry a point names (always present in a parsed study).
  [[nodiscard]] const TopologyEntry& topology(const Point& point) const;
  [[nodiscard]] const WorkloadEntry& workload(const Point& point) const;
};

/// Reads and expands a study file (read by `config::read_input_file`, at most
/// `limits.max_input_bytes`). Throws `Error` (input) naming file, line and key on any problem
/// listed in the file comment. O(points · axes) plus reading the workload files' YAML. Bundled
/// names in the study (a topology `file:`, a workload's files) are looked up in `catalog`.
[[nodiscard]] Study load_study(const std::string& path, const config::Limits& limits = {},
                               const Catalog& catalog = Catalog::standard());

/// Parses study YAML; `name` stands for the file name in errors and `directory` resolves the
/// relative paths in it; `limits` is kept in `Study::limits`.
[[nodiscard]] Study parse_study(std::string_view text, const std::string& name,
                                const std::filesystem::path& directory,
                                const config::Limits& limits = {},
                                const Catalog& catalog = Catalog::standard());

/// "megatron" or "nest-artifact".
[[nodiscard]] std::string_view rules_name(workload::MemoryRules rules) noexcept;

/// The generator parameters of a point's topology: the entry's, with the point's overrides and
/// the values derived from `devices` and `spine_oversubscription` (see the file comment), in
/// the entry's order with new parameters appended. Throws `Error` (input) when a derived value
/// cannot be computed from the others (a missing or malformed rate or count); such a failure
/// belongs to the point, not to the study. O(parameters).
[[nodiscard]] std::vector<Parameter> topology_parameters(const Study& study, const Point& point);

/// The YAML text of a generator topology (`kind:` line, then one line per parameter), as a
/// topology file would hold it.
[[nodiscard]] std::string topology_yaml(std::string_view kind, std::string_view name,
                                        const std::vector<Parameter>& parameters);

/// The parameter names of a generator kind, as topology files spell them; empty for an unknown
/// kind. Used to reject unknown `topology.<parameter>` axes before any work.
[[nodiscard]] std::vector<std::string> generator_parameters(std::string_view kind);

}  // namespace nest::sweep
