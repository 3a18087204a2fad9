// Chakra ET files: writing a trace (varint32-delimited GlobalMetadata and Node messages, as
// Chakra's protolib encodes them), reading a folder back, checking it, summarizing it. The only
// file that includes the generated protobuf code (built once, in src/chakra/ only).

#include <et_def.pb.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>
#include <queue>
#include <set>
#include <sstream>
#include <string_view>
#include <system_error>
#include <tuple>

#include "nest/chakra/chakra.h"
#include "nest/core/error.h"

namespace nest::chakra {
namespace {

namespace fs = std::filesystem;
namespace pb = ChakraProtoMsg;
using google::protobuf::io::ArrayInputStream;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;
using google::protobuf::io::StringOutputStream;

constexpr const char* kGroupsFile = "comm_group.json";

void add(pb::Node& n, const char* name, std::int64_t value) {
  pb::AttributeProto* a = n.add_attr();
  a->set_name(name);
  a->set_int64_val(value);
}

void add32(pb::Node& n, const char* name, std::int32_t value) {
  pb::AttributeProto* a = n.add_attr();
  a->set_name(name);
  a->set_int32_val(value);
}

std::uint64_t whole_micros(Time t) {
  const std::int64_t ps = std::max<std::int64_t>(t.ps(), 0);
  return static_cast<std::uint64_t>((ps + 500'000) / 1'000'000);
}

pb::Node to_proto(const Node& n) {
  pb::Node p;
  p.set_id(n.id);
  p.set_name(n.name);
  p.set_type(static_cast<pb::NodeType>(n.type));
  for (const auto d : n.data_deps) p.add_data_deps(d);
  for (const auto d : n.ctrl_deps) p.add_ctrl_deps(d);
  p.set_start_time_micros(whole_micros(n.start));
  p.set_duration_micros(whole_micros(n.duration));
  pb::AttributeProto* cpu = p.add_attr();
  cpu->set_name("is_cpu_op");
  cpu->set_bool_val(false);
  if (n.type == NodeType::kCollective) add(p, "comm_type", static_cast<std::int64_t>(n.comm_type));
  if (n.type == NodeType::kCollective || n.type == NodeType::kSend ||
      n.type == NodeType::kReceive) {
    add(p, "comm_size", n.comm_size.count());
  }
  if (n.comm_src >= 0) add32(p, "comm_src", n.comm_src);
  if (n.comm_dst >= 0) add32(p, "comm_dst", n.comm_dst);
  if (n.comm_tag >= 0) add32(p, "comm_tag", n.comm_tag);
  if (!n.pg_name.empty()) {
    pb::AttributeProto* a = p.add_attr();
    a->set_name("pg_name");
    a->set_string_val(n.pg_name);
  }
  add(p, "nest_start_ps", n.start.ps());
  add(p, "nest_duration_ps", n.duration.ps());
  if (n.stage >= 0) add32(p, "nest_stage", n.stage);
  if (n.microbatch >= 0) add32(p, "nest_microbatch", n.microbatch);
  if (n.first_layer >= 0) add32(p, "nest_first_layer", n.first_layer);
  if (n.last_layer >= 0) add32(p, "nest_last_layer", n.last_layer);
  if (n.part >= 0) add32(p, "nest_part", n.part);
  return p;
}

void append_delimited(const google::protobuf::MessageLite& m, std::string& out) {
  StringOutputStream stream(&out);
  CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  coded.WriteVarint32(static_cast<std::uint32_t>(m.ByteSizeLong()));
  m.SerializeWithCachedSizes(&coded);
}

// Groups by their names' numbers ("2" before "10"), then the others by name.
std::vector<std::string> group_order(const std::map<std::string, std::vector<std::uint32_t>>& g) {
  std::vector<std::string> names;
  for (const auto& [name, ranks] : g) names.push_back(name);
  std::stable_sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  return names;
}

Error at_node(const std::string& file, std::uint64_t id, const std::string& key,
              const std::string& message, const std::string& value = {},
              const std::string& expected = {}) {
  return Error::input(message, {.file = file,
                                .key = fmt::format("node {}: {}", id, key),
                                .value = value,
                                .expected = expected});
}

// A file written with plain writes: `write_files` fills a folder nobody sees yet and makes it
// durable with one syncfs at the end (an atomic write per file costs two fsyncs each: 13.8 s
// for the example's 1,025 files here, against 0.8 s of work).
void write_plain(const fs::path& path, std::string_view bytes) {
  const auto fail = [&](int err) {
    throw Error::input("cannot write: " + std::error_code(err, std::generic_category()).message(),
                       {.file = path.string()});
  };
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(errno);
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      fail(err);
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  if (::close(fd) != 0) fail(errno);
}

void sync_folder(const fs::path& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int status = fd < 0 ? -1 : ::syncfs(fd);
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (status != 0) {
    throw Error::input("cannot sync: " + std::error_code(err, std::generic_category()).message(),
                       {.file = folder.string()});
  }
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error::input("cannot read the file", {.file = path.string()});
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Reads one delimited message; false at the end of the input.
bool read_delimited(CodedInputStream& in, google::protobuf::MessageLite& m, const std::string& file,
                    std::size_t index, std::size_t total) {
  const auto at = static_cast<std::size_t>(in.CurrentPosition());
  std::uint32_t size = 0;
  if (!in.ReadVarint32(&size)) {
    if (at == total) return false;
    throw Error::input(fmt::format("{} bytes after the last whole message", total - at),
                       {.file = file, .expected = "varint32-delimited Chakra ET messages"});
  }
  const auto limit = in.PushLimit(static_cast<int>(size));
  if (!m.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage() || in.BytesUntilLimit() != 0) {
    throw Error::input(fmt::format("message {}: {} bytes that do not parse as a Chakra {} (a file "
                                   "cut short?)",
                                   index, size, index == 0 ? "GlobalMetadata" : "Node"),
                       {.file = file, .expected = "varint32-delimited Chakra ET messages"});
  }
  in.PopLimit(limit);
  return true;
}

std::int64_t integer(const pb::AttributeProto& a) {
  switch (a.value_case()) {
    case pb::AttributeProto::kInt64Val:
      return a.int64_val();
    case pb::AttributeProto::kInt32Val:
      return a.int32_val();
    case pb::AttributeProto::kUint64Val:
      return static_cast<std::int64_t>(a.uint64_val());
    case pb::AttributeProto::kUint32Val:
      return a.uint32_val();
    case pb::AttributeProto::kSint64Val:
      return a.sint64_val();
    case pb::AttributeProto::kSint32Val:
      return a.sint32_val();
    default:
      return std::numeric_limits<std::int64_t>::min();
  }
}

Node from_proto(const pb::Node& p, const std::string& file) {
  Node n;
  n.id = p.id();
  n.name = p.name();
  if (p.type() < pb::METADATA_NODE || p.type() > pb::COMM_COLL_NODE) {
    throw at_node(file, n.id, "type", "not a node type", std::to_string(p.type()),
                  "METADATA_NODE .. COMM_COLL_NODE");
  }
  n.type = static_cast<NodeType>(p.type());
  n.data_deps.assign(p.data_deps().begin(), p.data_deps().end());
  n.ctrl_deps.assign(p.ctrl_deps().begin(), p.ctrl_deps().end());
  n.start = Time::microseconds(static_cast<double>(p.start_time_micros()));
  n.duration = Time::microseconds(static_cast<double>(p.duration_micros()));
  bool has_type = false;
  bool has_size = false;
  for (const pb::AttributeProto& a : p.attr()) {
    const std::string& key = a.name();
    auto number = [&] {
      const std::int64_t v = integer(a);
      if (v == std::numeric_limits<std::int64_t>::min()) {
        throw at_node(file, n.id, key, "not an integer attribute", a.ShortDebugString());
      }
      return v;
    };
    auto small = [&] { return static_cast<std::int32_t>(number()); };
    if (key == "comm_type") {
      const std::int64_t v = number();
      if (v < 0 || v > static_cast<std::int64_t>(Collective::kBarrier)) {
        throw at_node(file, n.id, key, "not a collective type", std::to_string(v),
                      "ALL_REDUCE (0) .. BARRIER (9)");
      }
      n.comm_type = static_cast<Collective>(v);
      has_type = true;
    } else if (key == "comm_size") {
      n.comm_size = Bytes(number());
      has_size = true;
    } else if (key == "comm_src") {
      n.comm_src = small();
    } else if (key == "comm_dst") {
      n.comm_dst = small();
    } else if (key == "comm_tag") {
      n.comm_tag = small();
    } else if (key == "pg_name") {
      n.pg_name = a.string_val();
    } else if (key == "nest_start_ps") {
      n.start = Time::picoseconds(number());
    } else if (key == "nest_duration_ps") {
      n.duration = Time::picoseconds(number());
    } else if (key == "nest_stage") {
      n.stage = small();
    } else if (key == "nest_microbatch") {
      n.microbatch = small();
    } else if (key == "nest_first_layer") {
      n.first_layer = small();
    } else if (key == "nest_last_layer") {
      n.last_layer = small();
    } else if (key == "nest_part") {
      n.part = small();
    } else if (key != "is_cpu_op") {
      n.other[key] = a.ShortDebugString();
    }
  }
  const bool comm =
      n.type == NodeType::kSend || n.type == NodeType::kReceive || n.type == NodeType::kCollective;
  if (n.type == NodeType::kCollective && !has_type) {
    throw at_node(file, n.id, "comm_type", "a collective without its type", {},
                  "an int64 attribute comm_type");
  }
  if (comm && !has_size) {
    throw at_node(file, n.id, "comm_size", "a communication node without its size", {},
                  "an int64 attribute comm_size");
  }
  if (comm && n.comm_size < Bytes(0)) {
    throw at_node(file, n.id, "comm_size", "negative size", std::to_string(n.comm_size.count()),
                  "bytes >= 0");
  }
  if (n.type == NodeType::kSend && n.comm_dst < 0) {
    throw at_node(file, n.id, "comm_dst", "a send without its destination", {}, "a rank");
  }
  if (n.type == NodeType::kReceive && n.comm_src < 0) {
    throw at_node(file, n.id, "comm_src", "a receive without its source", {}, "a rank");
  }
  return n;
}

// Rank and prefix of "<prefix>.<rank>.et".
bool parse_name(const std::string& name, std::string& prefix, std::uint32_t& rank) {
  if (name.size() < 4 || name.substr(name.size() - 3) != ".et") return false;
  const std::string stem = name.substr(0, name.size() - 3);
  const auto dot = stem.rfind('.');
  if (dot == std::string::npos) return false;
  const std::string digits = stem.substr(dot + 1);
  if (digits.empty() || digits.size() > 9) return false;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  if (ec != std::errc() || end != digits.data() + digits.size()) return false;
  prefix = stem.substr(0, dot);
  return true;
}

Rank read_rank(const fs::path& path, std::uint32_t rank) {
  const std::string file = path.string();
  const std::string bytes = slurp(path);
  ArrayInputStream stream(bytes.data(), static_cast<int>(bytes.size()));
  CodedInputStream in(&stream);
  Rank r;
  r.rank = rank;
  pb::GlobalMetadata meta;
  if (!read_delimited(in, meta, file, 0, bytes.size())) {
    throw Error::input("no GlobalMetadata message",
                       {.file = file, .expected = "a Chakra ET file (GlobalMetadata first)"});
  }
  r.version = meta.version();
  pb::Node node;
  for (std::size_t i = 1; read_delimited(in, node, file, i, bytes.size()); ++i) {
    r.nodes.push_back(from_proto(node, file));
    node.Clear();
  }
  return r;
}

// Ids unique, dependencies known and acyclic.
void check_graph(const Rank& r, const std::string& file) {
  std::map<std::uint64_t, std::size_t> at;
  for (std::size_t i = 0; i < r.nodes.size(); ++i) {
    if (!at.emplace(r.nodes[i].id, i).second) {
      throw at_node(file, r.nodes[i].id, "id", "duplicate node id", std::to_string(r.nodes[i].id),
                    "ids unique within the file");
    }
  }
  std::vector<std::size_t> waiting(r.nodes.size(), 0);
  std::vector<std::vector<std::size_t>> users(r.nodes.size());
  for (std::size_t i = 0; i < r.nodes.size(); ++i) {
    const Node& n = r.nodes[i];
    for (const auto* deps : {&n.data_deps, &n.ctrl_deps}) {
      for (const std::uint64_t d : *deps) {
        const auto it = at.find(d);
        if (it == at.end()) {
          throw at_node(file, n.id, deps == &n.data_deps ? "data_deps" : "ctrl_deps",
                        "unknown node", std::to_string(d), "the id of a node of this file");
        }
        users[it->second].push_back(i);
        ++waiting[i];
      }
    }
  }
  std::queue<std::size_t> ready;
  for (std::size_t i = 0; i < waiting.size(); ++i) {
    if (waiting[i] == 0) ready.push(i);
  }
  std::size_t done = 0;
  while (!ready.empty()) {
    const std::size_t i = ready.front();
    ready.pop();
    ++done;
    for (const std::size_t u : users[i]) {
      if (--waiting[u] == 0) ready.push(u);
    }
  }
  if (done == r.nodes.size()) return;
  for (std::size_t i = 0; i < waiting.size(); ++i) {
    if (waiting[i] > 0) {
      throw at_node(file, r.nodes[i].id, "data_deps", "the dependencies form a cycle", {},
                    "an acyclic graph");
    }
  }
}

}  // namespace

std::vector<std::string> file_names(const Trace& trace, const std::string& prefix) {
  std::vector<std::string> names;
  for (const Rank& r : trace.ranks) names.push_back(fmt::format("{}.{}.et", prefix, r.rank));
  names.emplace_back(kGroupsFile);
  return names;
}

void write_files(const Trace& trace, const fs::path& folder, const std::string& prefix) {
  for (const Rank& r : trace.ranks) {
    std::string bytes;
    pb::GlobalMetadata meta;
    meta.set_version(r.version);
    pb::AttributeProto* producer = meta.add_attr();
    producer->set_name("producer");
    producer->set_string_val("NEST " NEST_VERSION);
    append_delimited(meta, bytes);
    for (const Node& n : r.nodes) append_delimited(to_proto(n), bytes);
    write_plain(folder / fmt::format("{}.{}.et", prefix, r.rank), bytes);
  }
  nlohmann::ordered_json groups = nlohmann::ordered_json::object();
  for (const std::string& name : group_order(trace.groups)) groups[name] = trace.groups.at(name);
  write_plain(folder / kGroupsFile, groups.dump(1) + "\n");
  sync_folder(folder);
}

Trace read_folder(const fs::path& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    throw Error::input("not a folder",
                       {.file = folder.string(), .expected = "a folder of Chakra ET files"});
  }
  std::map<std::uint32_t, fs::path> files;
  std::string prefix;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 3 || name.substr(name.size() - 3) != ".et") continue;
    std::string p;
    std::uint32_t rank = 0;
    if (!parse_name(name, p, rank)) {
      throw Error::input("not a rank's file name",
                         {.file = entry.path().string(), .expected = "<prefix>.<rank>.et"});
    }
    if (!prefix.empty() && p != prefix) {
      throw Error::input("two prefixes in one folder",
                         {.file = entry.path().string(), .value = p, .expected = prefix});
    }
    prefix = p;
    files[rank] = entry.path();
  }
  if (files.empty()) {
    throw Error::input("no Chakra ET files",
                       {.file = folder.string(), .expected = "files named <prefix>.<rank>.et"});
  }
  std::uint32_t expected = 0;
  for (const auto& [rank, path] : files) {
    if (rank != expected) {
      throw Error::input(fmt::format("rank {} has no file", expected),
                         {.file = folder.string(),
                          .expected = fmt::format("{}.{}.et (ranks 0..{} without gaps)", prefix,
                                                  expected, files.rbegin()->first)});
    }
    ++expected;
  }
  Trace trace;
  for (const auto& [rank, path] : files) {
    trace.ranks.push_back(read_rank(path, rank));
    check_graph(trace.ranks.back(), path.string());
  }
  const fs::path groups_file = folder / kGroupsFile;
  if (fs::exists(groups_file, ec)) {
    const std::string file = groups_file.string();
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(slurp(groups_file));
    } catch (const nlohmann::json::exception& e) {
      throw Error::input("not JSON", {.file = file, .expected = "{\"<pg_name>\": [ranks]}"});
    }
    if (!j.is_object()) {
      throw Error::input("not an object", {.file = file, .expected = "{\"<pg_name>\": [ranks]}"});
    }
    for (const auto& [name, ranks] : j.items()) {
      if (!ranks.is_array()) {
        throw Error::input("not a list of ranks", {.file = file, .key = name});
      }
      std::vector<std::uint32_t>& g = trace.groups[name];
      for (const auto& rank : ranks) {
        if (!rank.is_number_unsigned() || rank.get<std::uint64_t>() >= files.size()) {
          throw Error::input("not a rank of the trace",
                             {.file = file,
                              .key = name,
                              .value = rank.dump(),
                              .expected = fmt::format("0..{}", files.size() - 1)});
        }
        g.push_back(rank.get<std::uint32_t>());
      }
    }
  }
  // Every send has one receive with the same tag and size, every receive one send.
  std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t>, std::pair<Bytes, std::uint64_t>>
      sends;
  const auto name_of = [&](std::uint32_t rank) { return files.at(rank).string(); };
  for (const Rank& r : trace.ranks) {
    for (const Node& n : r.nodes) {
      const auto self = static_cast<std::int32_t>(r.rank);
      const std::int32_t peer = n.type == NodeType::kSend ? n.comm_dst : n.comm_src;
      if ((n.type == NodeType::kSend || n.type == NodeType::kReceive) &&
          (peer < 0 || static_cast<std::size_t>(peer) >= files.size())) {
        throw at_node(name_of(r.rank), n.id, n.type == NodeType::kSend ? "comm_dst" : "comm_src",
                      "not a rank of the trace", std::to_string(peer),
                      fmt::format("0..{}", files.size() - 1));
      }
      if (n.type == NodeType::kSend &&
          !sends.emplace(std::tuple{self, n.comm_dst, n.comm_tag}, std::pair{n.comm_size, n.id})
               .second) {
        throw at_node(name_of(r.rank), n.id, "comm_tag", "two sends to one rank with one tag",
                      std::to_string(n.comm_tag), "a tag per transfer");
      }
      if (n.type == NodeType::kCollective && !n.pg_name.empty() && !trace.groups.empty()) {
        const auto g = trace.groups.find(n.pg_name);
        if (g == trace.groups.end()) {
          throw at_node(name_of(r.rank), n.id, "pg_name", "unknown process group", n.pg_name,
                        fmt::format("a group of {}", kGroupsFile));
        }
        if (std::find(g->second.begin(), g->second.end(), r.rank) == g->second.end()) {
          throw at_node(name_of(r.rank), n.id, "pg_name", "the rank is not in its group", n.pg_name,
                        "a group that holds the rank");
        }
      }
    }
  }
  for (const Rank& r : trace.ranks) {
    for (const Node& n : r.nodes) {
      if (n.type != NodeType::kReceive) continue;
      const auto it = sends.find({n.comm_src, static_cast<std::int32_t>(r.rank), n.comm_tag});
      if (it == sends.end()) {
        throw at_node(
            name_of(r.rank), n.id, "comm_tag", "a receive that no send matches",
            std::to_string(n.comm_tag),
            fmt::format("a send of rank {} to rank {} with this tag", n.comm_src, r.rank));
      }
      if (it->second.first != n.comm_size) {
        throw at_node(name_of(r.rank), n.id, "comm_size", "differs from its send's",
                      std::to_string(n.comm_size.count()),
                      std::to_string(it->second.first.count()));
      }
      sends.erase(it);
    }
  }
  if (!sends.empty()) {
    const auto& [key, value] = *sends.begin();
    throw at_node(
        name_of(static_cast<std::uint32_t>(std::get<0>(key))), value.second, "comm_tag",
        "a send that no receive matches", std::to_string(std::get<2>(key)),
        fmt::format("a receive of rank {} from rank {}", std::get<1>(key), std::get<0>(key)));
  }
  return trace;
}

Summary summarize(const Trace& trace) {
  Summary s;
  s.ranks = trace.ranks.size();
  s.groups = trace.groups.size();
  bool first = true;
  std::map<std::int32_t, Summary::Stage> stages;
  std::map<std::int32_t, std::pair<std::size_t, std::size_t>> counts;  // forwards, backwards
  std::map<std::int32_t, std::set<std::uint32_t>> ranks_of;
  for (const Rank& r : trace.ranks) {
    if (r.nodes.empty()) {
      ++s.empty_ranks;
      continue;
    }
    Time compute;
    for (const Node& n : r.nodes) {
      ++s.nodes[n.type];
      s.dependencies += n.data_deps.size() + n.ctrl_deps.size();
      s.end = std::max(s.end, n.start + n.duration);
      if (n.type == NodeType::kCompute) compute += n.duration;
      if (n.type == NodeType::kCollective) s.collective_bytes[n.comm_type] += n.comm_size;
      if (n.type == NodeType::kSend) s.send_bytes += n.comm_size;
      if (n.type != NodeType::kCompute || n.stage < 0 || n.microbatch < 0) continue;
      Summary::Stage& st = stages[n.stage];
      st.stage = n.stage;
      st.first_layer = n.first_layer;
      st.last_layer = n.last_layer;
      ranks_of[n.stage].insert(r.rank);
      const bool forward = n.name.rfind("forward", 0) == 0;
      (forward ? st.forward : st.backward) += n.duration;
      if (n.part <= 0) ++(forward ? counts[n.stage].first : counts[n.stage].second);
    }
    s.max_compute = first ? compute : std::max(s.max_compute, compute);
    s.min_compute = first ? compute : std::min(s.min_compute, compute);
    first = false;
  }
  for (auto& [stage, st] : stages) {
    const auto [forwards, backwards] = counts[stage];
    if (forwards > 0)
      st.forward = Time::picoseconds(st.forward.ps() / static_cast<std::int64_t>(forwards));
    if (backwards > 0) {
      st.backward = Time::picoseconds(st.backward.ps() / static_cast<std::int64_t>(backwards));
    }
    st.ranks = ranks_of[stage].size();
    s.stages.push_back(st);
  }
  return s;
}

}  // namespace nest::chakra
