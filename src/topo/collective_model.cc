#include "nest/topo/collective_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "nest/config/node.h"
#include "nest/core/error.h"

namespace nest::topo {
namespace {

constexpr std::array kProtocolNames = {"LL", "LL128", "Simple"};
constexpr std::array kLinkClassNames = {"scale_up", "nic", "fabric"};
constexpr std::array<std::string_view, 10> kOperationNames = {
    "allreduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast",
    "send",      "reduce",         "gather",     "scatter",    "sendrecv"};

// Which file gave each field of a merged model, so that a second file giving it is an error.
using Owners = std::map<std::string, std::string>;

void claim(Owners& owners, const std::string& field, const config::Node& node) {
  const auto [it, fresh] = owners.emplace(field, node.file());
  if (!fresh) {
    throw node.error("given by two collective model files (also in " + it->second + ")",
                     "each field in one file of the list");
  }
}

double efficiency_of(const config::Node& node) {
  const double e = node.as_double(0, 1);
  if (!(e > 0)) throw node.error("efficiency must be positive", "a fraction in (0, 1]");
  return e;
}

LinkCalibration link_calibration(const config::Node& node) {
  node.expect_keys({"efficiency", "latency"});
  LinkCalibration c;
  c.efficiency = efficiency_of(node.at("efficiency"));
  if (const auto l = node.find("latency")) c.latency = l->as_time();
  return c;
}

void read_base_latency(const config::Node& node, ProtocolModel& p) {
  if (node.is_scalar()) {
    p.base_latency = node.as_time(true);
    return;
  }
  if (!node.is_map()) {
    throw node.error("expected a time or a map of operations to times", "e.g. 8.4 us");
  }
  const auto names = collective_operation_names();
  for (const auto& [key, value] : node.entries()) {
    if (key == "default") {
      p.base_latency = value.as_time(true);
      continue;
    }
    if (std::find(names.begin(), names.end(), key) == names.end()) {
      std::string list = "default";
      for (const auto n : names) list += ", " + std::string(n);
      throw value.error("unknown operation " + key, list);
    }
    p.operation_latency.emplace_back(key, value.as_time(true));
  }
}

void read_protocol(const config::Node& node, std::size_t index, CollectiveModel& m,
                   Owners& owners) {
  node.expect_keys({"up_to", "base_latency", "scale_up", "nic", "fabric"});
  ProtocolModel& p = m.protocols[index];
  p.enabled = true;
  const std::string prefix = std::string("protocols.") + kProtocolNames[index] + ".";
  if (const auto n = node.find("up_to")) {
    claim(owners, prefix + "up_to", *n);
    p.up_to = n->as_bytes();
  }
  if (const auto n = node.find("base_latency")) {
    claim(owners, prefix + "base_latency", *n);
    read_base_latency(*n, p);
  }
  for (std::size_t c = 0; c < kLinkClasses; ++c) {
    if (const auto n = node.find(kLinkClassNames[c])) {
      claim(owners, prefix + kLinkClassNames[c], *n);
      p.links[c] = link_calibration(*n);
    }
  }
}

// One map of model keys (a file's root or an inline map) into `m`.
void read_map(const config::Node& root, CollectiveModel& m, Owners& owners) {
  root.expect_keys({"kind", "name", "description", "channels", "nvls", "protocols"});
  if (const auto k = root.find("kind")) (void)k->as_choice({"collective_model"});
  if (const auto d = root.find("description")) (void)d->as_string();
  if (const auto n = root.find("name")) {
    m.name += (m.name.empty() ? "" : "+") + n->as_string();
  }
  if (const auto n = root.find("channels")) {
    claim(owners, "channels", *n);
    m.channels = static_cast<int>(n->as_int(1, 64));
  }
  if (const auto n = root.find("nvls")) {
    claim(owners, "nvls", *n);
    n->expect_keys({"efficiency", "base_latency"});
    m.nvls = NvlsModel{efficiency_of(n->at("efficiency")), n->at("base_latency").as_time(true)};
  }
  if (const auto n = root.find("protocols")) {
    if (!n->is_map()) throw n->error("expected a map", "protocols: {LL: ..., Simple: ...}");
    std::size_t last = 0;
    bool any = false;
    for (const auto& [key, value] : n->entries()) {
      const auto it = std::find(kProtocolNames.begin(), kProtocolNames.end(), key);
      if (it == kProtocolNames.end()) {
        throw value.error("unknown protocol " + key, "LL, LL128 or Simple");
      }
      const auto index = static_cast<std::size_t>(it - kProtocolNames.begin());
      if (any && index <= last) {
        throw value.error("protocols out of order", "LL, LL128, Simple in this order");
      }
      any = true;
      last = index;
      read_protocol(value, index, m, owners);
    }
  }
}

void read_file(const std::filesystem::path& path, const config::Node& where, CollectiveModel& m,
               Owners& owners) {
  if (!std::filesystem::is_regular_file(path)) {
    throw where.error("collective model file not found: " + path.string(),
                      "a kind: collective_model file, relative to the topology's folder");
  }
  const config::Node root = config::Node::load_file(path.string());
  if (!root.is_map()) throw root.error("expected a map", "a kind: collective_model file");
  (void)root.at("kind").as_choice({"collective_model"});
  const std::size_t before = m.name.size();
  read_map(root, m, owners);
  if (m.name.size() == before) {
    m.name += (m.name.empty() ? "" : "+") + path.stem().string();
  }
  m.sources.push_back(path.string());
}

// The merged model must be usable: at least one protocol, switch points on every protocol but
// the last, increasing.
void check(const CollectiveModel& m, const config::Node& where) {
  std::optional<Bytes> previous;
  std::size_t enabled = 0;
  std::size_t last = 0;
  for (std::size_t p = 0; p < kProtocols; ++p) {
    if (!m.protocols[p].enabled) continue;
    ++enabled;
    last = p;
  }
  if (enabled == 0) {
    throw where.error("a collective model needs at least one protocol",
                      "protocols: with LL, LL128 or Simple");
  }
  for (std::size_t p = 0; p < kProtocols; ++p) {
    const ProtocolModel& pm = m.protocols[p];
    if (!pm.enabled) continue;
    if (p == last && pm.up_to) {
      throw where.error(
          fmt::format("the last protocol ({}) must take every larger size", kProtocolNames[p]),
          "no up_to on the last protocol");
    }
    if (p == last) continue;
    if (!pm.up_to) {
      throw where.error(fmt::format("protocol {} needs a switch point", kProtocolNames[p]),
                        "up_to: SIZE on every protocol but the last");
    }
    if (previous && *pm.up_to <= *previous) {
      throw where.error(fmt::format("switch points must increase ({} up_to)", kProtocolNames[p]),
                        "each up_to above the previous protocol's");
    }
    previous = pm.up_to;
  }
}

}  // namespace

const char* protocol_name(Protocol protocol) noexcept {
  return kProtocolNames[static_cast<std::size_t>(protocol)];
}

const char* link_class_name(LinkClass link_class) noexcept {
  return kLinkClassNames[static_cast<std::size_t>(link_class)];
}

std::span<const std::string_view> collective_operation_names() noexcept { return kOperationNames; }

Protocol CollectiveModel::protocol_for(Bytes size) const noexcept {
  std::size_t chosen = kProtocols - 1;
  for (std::size_t p = 0; p < kProtocols; ++p) {
    if (!protocols[p].enabled) continue;
    chosen = p;
    if (!protocols[p].up_to || size <= *protocols[p].up_to) break;
  }
  return static_cast<Protocol>(chosen);
}

Time CollectiveModel::base_latency(Protocol protocol, std::string_view operation) const {
  const ProtocolModel& p = protocols[static_cast<std::size_t>(protocol)];
  for (const auto& [op, latency] : p.operation_latency) {
    if (op == operation) return latency;
  }
  return p.base_latency.value_or(Time::zero());
}

CollectiveModel parse_collective_model(const config::Node& value, const std::string& base_dir) {
  CollectiveModel m;
  Owners owners;
  const std::filesystem::path base(base_dir);
  if (value.is_map()) {
    read_map(value, m, owners);
    if (m.name.empty()) m.name = "inline";
  } else if (value.is_sequence()) {
    const auto elements = value.elements();
    if (elements.empty()) throw value.error("empty list", "one or more collective model files");
    for (const config::Node& e : elements) read_file(base / e.as_string(), e, m, owners);
  } else {
    read_file(base / value.as_string(), value, m, owners);
  }
  check(m, value);
  return m;
}

CollectiveModel load_collective_model(const std::string& path) {
  const config::Node root = config::Node::load_file(path);
  CollectiveModel m;
  Owners owners;
  if (!root.is_map()) throw root.error("expected a map", "a kind: collective_model file");
  (void)root.at("kind").as_choice({"collective_model"});
  read_map(root, m, owners);
  if (m.name.empty()) m.name = std::filesystem::path(path).stem().string();
  m.sources.push_back(path);
  check(m, root);
  return m;
}

}  // namespace nest::topo
