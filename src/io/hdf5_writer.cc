#include <hdf5.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "io/hdf5.h"
#include "nest/core/atomic_file.h"
#include "nest/core/error.h"
#include "nest/io/run_writers.h"

namespace nest::io {
namespace {

using replay::MemoryCategory;
using replay::RunRecord;
using replay::Stream;
using replay::TaskKind;

// Flat rows in the exact memory layout of the HDF5 compound types below.
struct TimelineH5 {
  std::uint32_t device;
  std::uint8_t stream;
  std::uint8_t kind;
  std::int32_t stage;
  std::int32_t microbatch;
  std::int32_t first_layer;
  std::int32_t last_layer;
  std::int64_t start;
  std::int64_t end;
};

struct MemoryH5 {
  std::uint32_t device;
  std::int64_t time;
  std::int64_t bytes;
  std::uint8_t category;
};

struct PeakH5 {
  std::uint32_t device;
  std::int64_t peak_bytes;
};

struct LinkH5 {
  std::uint32_t src;
  std::uint32_t dst;
  double bytes;
  std::int64_t busy;
  double utilization;
};

struct CollectiveH5 {
  std::uint32_t op;         // index into the op_names attribute
  std::uint32_t algorithm;  // index into the algorithm_names attribute
  std::uint64_t group_offset;
  std::uint32_t group_size;
  std::int64_t bytes;
  std::int64_t start;
  std::int64_t end;
  std::int64_t closed_form;
};

struct NodeH5 {
  std::uint32_t id;
  const char* name;  // variable-length UTF-8
  std::uint8_t kind;
  std::int32_t tier;
};

struct TopologyLinkH5 {
  std::uint32_t src;
  std::uint32_t dst;
  double bandwidth;
  std::int64_t latency;
};

// A compound type of `size` bytes; members added by `member`.
h5::Id compound(std::size_t size) {
  return h5::Id(H5Tcreate(H5T_COMPOUND, size), H5Tclose, "H5Tcreate");
}

void member(const h5::Id& type, const char* name, std::size_t offset, hid_t member_type) {
  h5::check(H5Tinsert(type.get(), name, offset, member_type), "H5Tinsert");
}

template <class E>
h5::Id enum_type(std::initializer_list<E> values) {
  h5::Id t(H5Tenum_create(H5T_NATIVE_UINT8), H5Tclose, "H5Tenum_create");
  for (E v : values) {
    auto raw = static_cast<std::uint8_t>(v);
    h5::check(H5Tenum_insert(t.get(), to_string(v), &raw), "H5Tenum_insert");
  }
  return t;
}

template <class Row>
void write_rows(hid_t file, const char* name, const h5::Id& type, const std::vector<Row>& rows,
                std::initializer_list<std::pair<const char*, const char*>> units) {
  h5::Id ds = h5::table_dataset(file, name, type.get(), rows.size(), rows.data());
  h5::unit_attributes(ds.get(), units);
  ds.close();
}

std::uint32_t intern(std::vector<std::string>& names, const std::string& s) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == s) return static_cast<std::uint32_t>(i);
  }
  names.push_back(s);
  return static_cast<std::uint32_t>(names.size() - 1);
}

void write_meta(hid_t file, const RunRecord& r) {
  h5::Id meta = h5::make_group(file, "/meta");
  h5::string_attribute(meta.get(), "tool_version", r.meta.tool_version);
  h5::string_attribute(meta.get(), "command_line", r.meta.command_line);
  // A dataset, not an attribute: a plan's text can pass HDF5's 64 KiB attribute limit (GPT-3 on
  // 16,384 GPUs: a partition of hundreds of stages and every baseline).
  h5::text_dataset(meta.get(), "plan_yaml", r.meta.plan_yaml);
  std::vector<std::string> paths, hashes;
  for (const auto& [p, h] : r.meta.inputs) {
    paths.push_back(p);
    hashes.push_back(h);
  }
  h5::string_list_attribute(meta.get(), "input_paths", paths);
  h5::string_list_attribute(meta.get(), "input_hashes", hashes);
  meta.close();
}

// Rows [begin, end) of each device in rows sorted by device.
template <typename Row>
std::vector<std::pair<std::size_t, std::size_t>> spans_by_device(const std::vector<Row>& rows,
                                                                 std::uint32_t devices) {
  std::vector<std::pair<std::size_t, std::size_t>> spans(devices, {0, 0});
  for (std::size_t i = 0; i < rows.size();) {
    std::size_t j = i;
    while (j < rows.size() && rows[j].device == rows[i].device) ++j;
    spans[rows[i].device] = {i, j};
    i = j;
  }
  return spans;
}

bool same_row(const replay::TimelineRow& a, const replay::TimelineRow& b) {
  return a.stream == b.stream && a.kind == b.kind && a.stage == b.stage &&
         a.microbatch == b.microbatch && a.first_layer == b.first_layer &&
         a.last_layer == b.last_layer && a.start == b.start && a.end == b.end;
}
bool same_row(const replay::MemoryRow& a, const replay::MemoryRow& b) {
  return a.at == b.at && a.bytes == b.bytes && a.category == b.category;
}
std::uint64_t row_hash(std::uint64_t h, const replay::TimelineRow& x) {
  for (const std::int64_t v :
       {std::int64_t{static_cast<std::uint8_t>(x.stream)},
        std::int64_t{static_cast<std::uint8_t>(x.kind)}, std::int64_t{x.stage},
        std::int64_t{x.microbatch}, std::int64_t{x.first_layer}, std::int64_t{x.last_layer},
        x.start.ps(), x.end.ps()}) {
    h = (h ^ static_cast<std::uint64_t>(v)) * 0x100000001b3ULL;
  }
  return h;
}
std::uint64_t row_hash(std::uint64_t h, const replay::MemoryRow& x) {
  for (const std::int64_t v :
       {x.at.ps(), x.bytes.count(), std::int64_t{static_cast<std::uint8_t>(x.category)}}) {
    h = (h ^ static_cast<std::uint64_t>(v)) * 0x100000001b3ULL;
  }
  return h;
}
template <typename Row>
bool same_span(const std::vector<Row>& rows, std::pair<std::size_t, std::size_t> a,
               std::pair<std::size_t, std::size_t> b) {
  if (a.second - a.first != b.second - b.first) return false;
  for (std::size_t i = 0; i < a.second - a.first; ++i) {
    if (!same_row(rows[a.first + i], rows[b.first + i])) return false;
  }
  return true;
}

// The record's timeline and memory rows of the representatives only (`classes` as
// timeline_classes gives them).
RunRecord representatives_only(
    const RunRecord& r, const std::vector<std::pair<std::uint32_t, std::uint32_t>>& classes) {
  std::vector<char> keep;
  for (const auto& [device, rep] : classes) {
    if (device >= keep.size()) keep.resize(device + 1, 0);
    keep[device] = device == rep ? 1 : 0;
  }
  auto kept = [&keep](std::uint32_t d) { return d < keep.size() && keep[d] != 0; };
  RunRecord out;
  for (const auto& x : r.timeline) {
    if (kept(x.device)) out.timeline.push_back(x);
  }
  for (const auto& x : r.memory) {
    if (kept(x.device)) out.memory.push_back(x);
  }
  out.peaks = r.peaks;
  return out;
}

void write_classes(hid_t file, const std::vector<std::pair<std::uint32_t, std::uint32_t>>& classes,
                   bool all_devices) {
  struct ClassH5 {
    std::uint32_t device;
    std::uint32_t representative;
  };
  h5::Id t = compound(sizeof(ClassH5));
  member(t, "device", HOFFSET(ClassH5, device), H5T_NATIVE_UINT32);
  member(t, "representative", HOFFSET(ClassH5, representative), H5T_NATIVE_UINT32);
  std::vector<ClassH5> rows;
  rows.reserve(classes.size());
  for (const auto& [device, rep] : classes) rows.push_back({device, all_devices ? device : rep});
  write_rows(file, "/timeline_classes", t, rows, {});
  t.close();
}

void write_timeline(hid_t file, const RunRecord& r) {
  h5::Id stream = enum_type({Stream::kCompute, Stream::kNetwork});
  h5::Id kind =
      enum_type({TaskKind::kForward, TaskKind::kBackward, TaskKind::kRecompute,
                 TaskKind::kSendActivation, TaskKind::kSendGradient, TaskKind::kLayerCollective,
                 TaskKind::kGradientSync, TaskKind::kOptimizer});
  h5::Id t = compound(sizeof(TimelineH5));
  member(t, "device", HOFFSET(TimelineH5, device), H5T_NATIVE_UINT32);
  member(t, "stream", HOFFSET(TimelineH5, stream), stream.get());
  member(t, "kind", HOFFSET(TimelineH5, kind), kind.get());
  member(t, "stage", HOFFSET(TimelineH5, stage), H5T_NATIVE_INT32);
  member(t, "microbatch", HOFFSET(TimelineH5, microbatch), H5T_NATIVE_INT32);
  member(t, "first_layer", HOFFSET(TimelineH5, first_layer), H5T_NATIVE_INT32);
  member(t, "last_layer", HOFFSET(TimelineH5, last_layer), H5T_NATIVE_INT32);
  member(t, "start", HOFFSET(TimelineH5, start), H5T_NATIVE_INT64);
  member(t, "end", HOFFSET(TimelineH5, end), H5T_NATIVE_INT64);
  std::vector<TimelineH5> rows;
  rows.reserve(r.timeline.size());
  for (const auto& x : r.timeline) {
    rows.push_back({x.device, static_cast<std::uint8_t>(x.stream),
                    static_cast<std::uint8_t>(x.kind), x.stage, x.microbatch, x.first_layer,
                    x.last_layer, x.start.ps(), x.end.ps()});
  }
  write_rows(file, "/timeline", t, rows, {{"start", "ps"}, {"end", "ps"}});
  t.close();
  kind.close();
  stream.close();
}

void write_memory(hid_t file, const RunRecord& r) {
  h5::make_group(file, "/memory").close();
  h5::Id category = enum_type({MemoryCategory::kWeights, MemoryCategory::kGradients,
                               MemoryCategory::kOptimizer, MemoryCategory::kActivations});
  h5::Id t = compound(sizeof(MemoryH5));
  member(t, "device", HOFFSET(MemoryH5, device), H5T_NATIVE_UINT32);
  member(t, "time", HOFFSET(MemoryH5, time), H5T_NATIVE_INT64);
  member(t, "bytes", HOFFSET(MemoryH5, bytes), H5T_NATIVE_INT64);
  member(t, "category", HOFFSET(MemoryH5, category), category.get());
  std::vector<MemoryH5> rows;
  rows.reserve(r.memory.size());
  for (const auto& x : r.memory) {
    rows.push_back({x.device, x.at.ps(), x.bytes.count(), static_cast<std::uint8_t>(x.category)});
  }
  write_rows(file, "/memory/trace", t, rows, {{"time", "ps"}, {"bytes", "B"}});
  t.close();
  category.close();

  h5::Id p = compound(sizeof(PeakH5));
  member(p, "device", HOFFSET(PeakH5, device), H5T_NATIVE_UINT32);
  member(p, "peak_bytes", HOFFSET(PeakH5, peak_bytes), H5T_NATIVE_INT64);
  std::vector<PeakH5> peaks;
  for (const auto& x : r.peaks) peaks.push_back({x.device, x.peak.count()});
  write_rows(file, "/memory/peak", p, peaks, {{"peak_bytes", "B"}});
  p.close();
}

void write_links(hid_t file, const RunRecord& r) {
  h5::Id t = compound(sizeof(LinkH5));
  member(t, "src", HOFFSET(LinkH5, src), H5T_NATIVE_UINT32);
  member(t, "dst", HOFFSET(LinkH5, dst), H5T_NATIVE_UINT32);
  member(t, "bytes", HOFFSET(LinkH5, bytes), H5T_NATIVE_DOUBLE);
  member(t, "busy", HOFFSET(LinkH5, busy), H5T_NATIVE_INT64);
  member(t, "utilization", HOFFSET(LinkH5, utilization), H5T_NATIVE_DOUBLE);
  std::vector<LinkH5> rows;
  rows.reserve(r.links.size());
  for (const auto& x : r.links) rows.push_back({x.src, x.dst, x.bytes, x.busy.ps(), x.utilization});
  write_rows(file, "/links", t, rows, {{"bytes", "B"}, {"busy", "ps"}, {"utilization", "1"}});
  t.close();
}

// The node and link tables of the topology: /links and /collectives/members name node ids, and
// these name the nodes.
void write_topology(hid_t file, const RunRecord& r) {
  h5::Id group = h5::make_group(file, "/topology");
  h5::string_attribute(group.get(), "name", r.topology.name);
  group.close();

  h5::Id kind(H5Tenum_create(H5T_NATIVE_UINT8), H5Tclose, "H5Tenum_create");
  for (const topo::NodeKind k : {topo::NodeKind::kDevice, topo::NodeKind::kSwitch}) {
    const auto raw = static_cast<std::uint8_t>(k);
    h5::check(H5Tenum_insert(kind.get(), replay::to_string(k), &raw), "H5Tenum_insert");
  }
  h5::Id text = h5::utf8_type();
  h5::Id n = compound(sizeof(NodeH5));
  member(n, "id", HOFFSET(NodeH5, id), H5T_NATIVE_UINT32);
  member(n, "name", HOFFSET(NodeH5, name), text.get());
  member(n, "kind", HOFFSET(NodeH5, kind), kind.get());
  member(n, "tier", HOFFSET(NodeH5, tier), H5T_NATIVE_INT32);
  std::vector<NodeH5> nodes;
  nodes.reserve(r.topology.nodes.size());
  for (std::size_t i = 0; i < r.topology.nodes.size(); ++i) {
    const topo::Node& x = r.topology.nodes[i];
    nodes.push_back({static_cast<std::uint32_t>(i), x.name.c_str(),
                     static_cast<std::uint8_t>(x.kind), static_cast<std::int32_t>(x.tier)});
  }
  h5::table_dataset(file, "/topology/nodes", n.get(), nodes.size(), nodes.data()).close();
  n.close();
  text.close();
  kind.close();

  h5::Id l = compound(sizeof(TopologyLinkH5));
  member(l, "src", HOFFSET(TopologyLinkH5, src), H5T_NATIVE_UINT32);
  member(l, "dst", HOFFSET(TopologyLinkH5, dst), H5T_NATIVE_UINT32);
  member(l, "bandwidth", HOFFSET(TopologyLinkH5, bandwidth), H5T_NATIVE_DOUBLE);
  member(l, "latency", HOFFSET(TopologyLinkH5, latency), H5T_NATIVE_INT64);
  std::vector<TopologyLinkH5> links;
  links.reserve(r.topology.links.size());
  for (const topo::Link& x : r.topology.links) {
    links.push_back({x.src, x.dst, x.bandwidth.bytes_per_s(), x.latency.ps()});
  }
  write_rows(file, "/topology/links", l, links, {{"bandwidth", "B/s"}, {"latency", "ps"}});
  l.close();
}

void write_collectives(hid_t file, const RunRecord& r) {
  h5::make_group(file, "/collectives").close();
  h5::Id t = compound(sizeof(CollectiveH5));
  member(t, "op", HOFFSET(CollectiveH5, op), H5T_NATIVE_UINT32);
  member(t, "algorithm", HOFFSET(CollectiveH5, algorithm), H5T_NATIVE_UINT32);
  member(t, "group_offset", HOFFSET(CollectiveH5, group_offset), H5T_NATIVE_UINT64);
  member(t, "group_size", HOFFSET(CollectiveH5, group_size), H5T_NATIVE_UINT32);
  member(t, "bytes", HOFFSET(CollectiveH5, bytes), H5T_NATIVE_INT64);
  member(t, "start", HOFFSET(CollectiveH5, start), H5T_NATIVE_INT64);
  member(t, "end", HOFFSET(CollectiveH5, end), H5T_NATIVE_INT64);
  member(t, "closed_form", HOFFSET(CollectiveH5, closed_form), H5T_NATIVE_INT64);
  std::vector<std::string> ops, algorithms;
  std::vector<CollectiveH5> rows;
  std::vector<std::uint32_t> members;
  for (const auto& x : r.collectives) {
    rows.push_back({intern(ops, x.op), intern(algorithms, x.algorithm), members.size(),
                    static_cast<std::uint32_t>(x.group.size()), x.size.count(), x.start.ps(),
                    x.end.ps(), x.closed_form.ps()});
    members.insert(members.end(), x.group.begin(), x.group.end());
  }
  h5::Id table = h5::table_dataset(file, "/collectives/table", t.get(), rows.size(), rows.data());
  h5::unit_attributes(table.get(),
                      {{"bytes", "B"}, {"start", "ps"}, {"end", "ps"}, {"closed_form", "ps"}});
  // A plan without collectives (one replica, one shard) has empty name lists.
  h5::string_list_attribute(table.get(), "op_names", ops);
  h5::string_list_attribute(table.get(), "algorithm_names", algorithms);
  table.close();
  t.close();
  h5::table_dataset(file, "/collectives/members", H5T_NATIVE_UINT32, members.size(), members.data())
      .close();
}

void write_summary(hid_t file, const RunRecord& r) {
  h5::Id g = h5::make_group(file, "/summary");
  const auto& s = r.summary;
  auto real = [&](const char* name, double value) {
    h5::scalar_attribute(g.get(), name, H5T_NATIVE_DOUBLE, &value);
  };
  real("iteration_time_s", s.iteration_time.to_seconds());
  real("estimate_s", s.estimate.to_seconds());
  const double error =
      s.estimate.ps() == 0
          ? 0.0
          : (s.iteration_time.to_seconds() - s.estimate.to_seconds()) / s.estimate.to_seconds();
  real("estimate_error", error);
  real("sequences_per_s", s.sequences_per_s);
  real("tokens_per_s", s.tokens_per_s);
  real("bubble_fraction", s.bubble_fraction);
  real("exposed_communication_s", s.exposed_communication.to_seconds());
  const std::int64_t peak = s.peak_memory.count();
  h5::scalar_attribute(g.get(), "peak_memory_bytes", H5T_NATIVE_INT64, &peak);
  real("model_flops_utilization", s.model_flops_utilization);
  g.close();
}

}  // namespace

std::vector<std::pair<std::uint32_t, std::uint32_t>> timeline_classes(const RunRecord& record) {
  std::uint32_t devices = 0;
  for (const auto& x : record.timeline) devices = std::max(devices, x.device + 1);
  for (const auto& x : record.memory) devices = std::max(devices, x.device + 1);
  const auto tl = spans_by_device(record.timeline, devices);
  const auto mem = spans_by_device(record.memory, devices);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> out;
  // Hash of each device's rows -> the representatives with that hash.
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> seen;
  for (std::uint32_t d = 0; d < devices; ++d) {
    if (tl[d].first == tl[d].second && mem[d].first == mem[d].second) continue;
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (std::size_t i = tl[d].first; i < tl[d].second; ++i) h = row_hash(h, record.timeline[i]);
    h = (h ^ 0xffU) * 0x100000001b3ULL;
    for (std::size_t i = mem[d].first; i < mem[d].second; ++i) h = row_hash(h, record.memory[i]);
    std::vector<std::uint32_t>& reps = seen[h];
    std::uint32_t rep = d;
    for (const std::uint32_t c : reps) {
      if (same_span(record.timeline, tl[c], tl[d]) && same_span(record.memory, mem[c], mem[d])) {
        rep = c;
        break;
      }
    }
    if (rep == d) reps.push_back(d);
    out.emplace_back(d, rep);
  }
  return out;
}

void write_hdf5(const RunRecord& record, OutputFile& out, const Hdf5Options& options) {
  try {
    h5::MemoryFile file;
    write_meta(file.get(), record);
    const auto classes = timeline_classes(record);
    write_classes(file.get(), classes, options.all_devices);
    if (options.all_devices) {
      write_timeline(file.get(), record);
      write_memory(file.get(), record);
    } else {
      const RunRecord reps = representatives_only(record, classes);
      write_timeline(file.get(), reps);
      write_memory(file.get(), reps);
    }
    write_links(file.get(), record);
    write_collectives(file.get(), record);
    write_topology(file.get(), record);
    write_summary(file.get(), record);
    file.write_to(out);
  } catch (const Error& e) {
    throw e.in_file(out.target().string());
  }
}

void write_hdf5(const RunRecord& record, const std::filesystem::path& path,
                const Hdf5Options& options) {
  OutputFile out(path);
  write_hdf5(record, out, options);
  out.commit();
}

}  // namespace nest::io
