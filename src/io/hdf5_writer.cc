#include <H5Cpp.h>
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

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

template <class E>
H5::EnumType enum_type(std::initializer_list<E> values) {
  H5::EnumType t(H5::PredType::NATIVE_UINT8);
  for (E v : values) {
    auto raw = static_cast<std::uint8_t>(v);
    t.insert(to_string(v), &raw);
  }
  return t;
}

H5::DSetCreatPropList no_times() {
  H5::DSetCreatPropList p;
  H5Pset_obj_track_times(p.getId(), false);
  return p;
}

// H5::H5File::createGroup cannot turn off the group's modification time, which would make two
// identical runs differ; so groups come from the C API.
H5::Group make_group(H5::H5File& file, const char* name) {
  const hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
  H5Pset_obj_track_times(gcpl, false);
  const hid_t id = H5Gcreate2(file.getId(), name, H5P_DEFAULT, gcpl, H5P_DEFAULT);
  H5Pclose(gcpl);
  if (id < 0) throw H5::GroupIException("make_group", std::string("cannot create ") + name);
  H5::Group group(id);  // takes a reference of its own
  H5Gclose(id);
  return group;
}

void string_attr(H5::H5Object& obj, const char* name, const std::string& value) {
  const H5::StrType type(H5::PredType::C_S1, value.empty() ? 1 : value.size());
  obj.createAttribute(name, type, H5::DataSpace(H5S_SCALAR)).write(type, value.c_str());
}

void string_list_attr(H5::H5Object& obj, const char* name, const std::vector<std::string>& values) {
  const H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
  const hsize_t n = values.size();
  std::vector<const char*> ptrs;
  for (const auto& v : values) ptrs.push_back(v.c_str());
  obj.createAttribute(name, type, H5::DataSpace(1, &n)).write(type, ptrs.data());
}

template <class T>
void scalar_attr(H5::H5Object& obj, const char* name, const H5::PredType& type, T value) {
  obj.createAttribute(name, type, H5::DataSpace(H5S_SCALAR)).write(type, &value);
}

template <class Row>
H5::DataSet write_table(H5::H5File& file, const char* name, const H5::CompType& type,
                        const std::vector<Row>& rows,
                        std::initializer_list<std::pair<const char*, const char*>> units) {
  const hsize_t n = rows.size();
  // The file type is packed: no padding bytes (whose content is arbitrary) reach the file.
  H5::CompType packed(sizeof(Row));
  packed.copy(type);  // a new type: copy construction would share (and pack) `type` itself
  packed.pack();
  H5::DataSet ds = file.createDataSet(name, packed, H5::DataSpace(1, &n), no_times());
  if (!rows.empty()) ds.write(rows.data(), type);
  for (const auto& [field, unit] : units)
    string_attr(ds, (std::string(field) + ".unit").c_str(), unit);
  return ds;
}

std::uint32_t intern(std::vector<std::string>& names, const std::string& s) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == s) return static_cast<std::uint32_t>(i);
  }
  names.push_back(s);
  return static_cast<std::uint32_t>(names.size() - 1);
}

void write_meta(H5::H5File& file, const RunRecord& r) {
  H5::Group meta = make_group(file, "/meta");
  string_attr(meta, "tool_version", r.meta.tool_version);
  string_attr(meta, "command_line", r.meta.command_line);
  string_attr(meta, "plan_yaml", r.meta.plan_yaml);
  std::vector<std::string> paths, hashes;
  for (const auto& [p, h] : r.meta.inputs) {
    paths.push_back(p);
    hashes.push_back(h);
  }
  string_list_attr(meta, "input_paths", paths);
  string_list_attr(meta, "input_hashes", hashes);
}

void write_timeline(H5::H5File& file, const RunRecord& r) {
  H5::CompType t(sizeof(TimelineH5));
  t.insertMember("device", HOFFSET(TimelineH5, device), H5::PredType::NATIVE_UINT32);
  t.insertMember("stream", HOFFSET(TimelineH5, stream),
                 enum_type({Stream::kCompute, Stream::kNetwork}));
  t.insertMember(
      "kind", HOFFSET(TimelineH5, kind),
      enum_type({TaskKind::kForward, TaskKind::kBackward, TaskKind::kRecompute,
                 TaskKind::kSendActivation, TaskKind::kSendGradient, TaskKind::kLayerCollective,
                 TaskKind::kGradientSync, TaskKind::kOptimizer}));
  t.insertMember("stage", HOFFSET(TimelineH5, stage), H5::PredType::NATIVE_INT32);
  t.insertMember("microbatch", HOFFSET(TimelineH5, microbatch), H5::PredType::NATIVE_INT32);
  t.insertMember("first_layer", HOFFSET(TimelineH5, first_layer), H5::PredType::NATIVE_INT32);
  t.insertMember("last_layer", HOFFSET(TimelineH5, last_layer), H5::PredType::NATIVE_INT32);
  t.insertMember("start", HOFFSET(TimelineH5, start), H5::PredType::NATIVE_INT64);
  t.insertMember("end", HOFFSET(TimelineH5, end), H5::PredType::NATIVE_INT64);
  std::vector<TimelineH5> rows;
  rows.reserve(r.timeline.size());
  for (const auto& x : r.timeline) {
    rows.push_back({x.device, static_cast<std::uint8_t>(x.stream),
                    static_cast<std::uint8_t>(x.kind), x.stage, x.microbatch, x.first_layer,
                    x.last_layer, x.start.ps(), x.end.ps()});
  }
  write_table(file, "/timeline", t, rows, {{"start", "ps"}, {"end", "ps"}});
}

void write_memory(H5::H5File& file, const RunRecord& r) {
  make_group(file, "/memory");
  H5::CompType t(sizeof(MemoryH5));
  t.insertMember("device", HOFFSET(MemoryH5, device), H5::PredType::NATIVE_UINT32);
  t.insertMember("time", HOFFSET(MemoryH5, time), H5::PredType::NATIVE_INT64);
  t.insertMember("bytes", HOFFSET(MemoryH5, bytes), H5::PredType::NATIVE_INT64);
  t.insertMember("category", HOFFSET(MemoryH5, category),
                 enum_type({MemoryCategory::kWeights, MemoryCategory::kGradients,
                            MemoryCategory::kOptimizer, MemoryCategory::kActivations}));
  std::vector<MemoryH5> rows;
  rows.reserve(r.memory.size());
  for (const auto& x : r.memory) {
    rows.push_back({x.device, x.at.ps(), x.bytes.count(), static_cast<std::uint8_t>(x.category)});
  }
  write_table(file, "/memory/trace", t, rows, {{"time", "ps"}, {"bytes", "B"}});

  H5::CompType p(sizeof(PeakH5));
  p.insertMember("device", HOFFSET(PeakH5, device), H5::PredType::NATIVE_UINT32);
  p.insertMember("peak_bytes", HOFFSET(PeakH5, peak_bytes), H5::PredType::NATIVE_INT64);
  std::vector<PeakH5> peaks;
  for (const auto& x : r.peaks) peaks.push_back({x.device, x.peak.count()});
  write_table(file, "/memory/peak", p, peaks, {{"peak_bytes", "B"}});
}

void write_links(H5::H5File& file, const RunRecord& r) {
  H5::CompType t(sizeof(LinkH5));
  t.insertMember("src", HOFFSET(LinkH5, src), H5::PredType::NATIVE_UINT32);
  t.insertMember("dst", HOFFSET(LinkH5, dst), H5::PredType::NATIVE_UINT32);
  t.insertMember("bytes", HOFFSET(LinkH5, bytes), H5::PredType::NATIVE_DOUBLE);
  t.insertMember("busy", HOFFSET(LinkH5, busy), H5::PredType::NATIVE_INT64);
  t.insertMember("utilization", HOFFSET(LinkH5, utilization), H5::PredType::NATIVE_DOUBLE);
  std::vector<LinkH5> rows;
  rows.reserve(r.links.size());
  for (const auto& x : r.links) rows.push_back({x.src, x.dst, x.bytes, x.busy.ps(), x.utilization});
  write_table(file, "/links", t, rows, {{"bytes", "B"}, {"busy", "ps"}, {"utilization", "1"}});
}

void write_collectives(H5::H5File& file, const RunRecord& r) {
  make_group(file, "/collectives");
  H5::CompType t(sizeof(CollectiveH5));
  t.insertMember("op", HOFFSET(CollectiveH5, op), H5::PredType::NATIVE_UINT32);
  t.insertMember("algorithm", HOFFSET(CollectiveH5, algorithm), H5::PredType::NATIVE_UINT32);
  t.insertMember("group_offset", HOFFSET(CollectiveH5, group_offset), H5::PredType::NATIVE_UINT64);
  t.insertMember("group_size", HOFFSET(CollectiveH5, group_size), H5::PredType::NATIVE_UINT32);
  t.insertMember("bytes", HOFFSET(CollectiveH5, bytes), H5::PredType::NATIVE_INT64);
  t.insertMember("start", HOFFSET(CollectiveH5, start), H5::PredType::NATIVE_INT64);
  t.insertMember("end", HOFFSET(CollectiveH5, end), H5::PredType::NATIVE_INT64);
  t.insertMember("closed_form", HOFFSET(CollectiveH5, closed_form), H5::PredType::NATIVE_INT64);
  std::vector<std::string> ops, algorithms;
  std::vector<CollectiveH5> rows;
  std::vector<std::uint32_t> members;
  for (const auto& x : r.collectives) {
    rows.push_back({intern(ops, x.op), intern(algorithms, x.algorithm), members.size(),
                    static_cast<std::uint32_t>(x.group.size()), x.size.count(), x.start.ps(),
                    x.end.ps(), x.closed_form.ps()});
    members.insert(members.end(), x.group.begin(), x.group.end());
  }
  H5::DataSet table =
      write_table(file, "/collectives/table", t, rows,
                  {{"bytes", "B"}, {"start", "ps"}, {"end", "ps"}, {"closed_form", "ps"}});
  string_list_attr(table, "op_names", ops);
  string_list_attr(table, "algorithm_names", algorithms);
  const hsize_t n = members.size();
  H5::DataSet m = file.createDataSet("/collectives/members", H5::PredType::NATIVE_UINT32,
                                     H5::DataSpace(1, &n), no_times());
  if (n > 0) m.write(members.data(), H5::PredType::NATIVE_UINT32);
}

void write_summary(H5::H5File& file, const RunRecord& r) {
  H5::Group g = make_group(file, "/summary");
  const auto& s = r.summary;
  const auto& f64 = H5::PredType::NATIVE_DOUBLE;
  scalar_attr(g, "iteration_time_s", f64, s.iteration_time.to_seconds());
  scalar_attr(g, "estimate_s", f64, s.estimate.to_seconds());
  const double error =
      s.estimate.ps() == 0
          ? 0.0
          : (s.iteration_time.to_seconds() - s.estimate.to_seconds()) / s.estimate.to_seconds();
  scalar_attr(g, "estimate_error", f64, error);
  scalar_attr(g, "sequences_per_s", f64, s.sequences_per_s);
  scalar_attr(g, "tokens_per_s", f64, s.tokens_per_s);
  scalar_attr(g, "bubble_fraction", f64, s.bubble_fraction);
  scalar_attr(g, "exposed_communication_s", f64, s.exposed_communication.to_seconds());
  scalar_attr(g, "peak_memory_bytes", H5::PredType::NATIVE_INT64, s.peak_memory.count());
  scalar_attr(g, "model_flops_utilization", f64, s.model_flops_utilization);
}

}  // namespace

void write_hdf5(const RunRecord& record, const std::filesystem::path& path) {
  write_atomically(path, [&](const std::filesystem::path& temp) {
    try {
      H5::Exception::dontPrint();
      H5::FileCreatPropList fcpl;
      H5::FileAccPropList fapl;
      H5::H5File file(temp.string(), H5F_ACC_TRUNC, fcpl, fapl);
      write_meta(file, record);
      write_timeline(file, record);
      write_memory(file, record);
      write_links(file, record);
      write_collectives(file, record);
      write_summary(file, record);
    } catch (const H5::Exception& e) {
      throw Error::input("cannot write HDF5 file: " + e.getDetailMsg(),
                         {.file = path.string(), .expected = "a writable path"});
    }
  });
}

}  // namespace nest::io
