#include "nest/topo/astra_sim.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "nest/config/node.h"
#include "nest/core/error.h"

namespace nest::topo {
namespace {

std::string stem(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::size_t dot = base.find_last_of('.');
  if (dot != std::string::npos && dot > 0) base.resize(dot);
  return base;
}

// A YAML double-quoted scalar.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// "[a, b, c]" from the entries as YAML flow items.
std::string flow_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : ", ") + items[i];
  return out + "]";
}

std::vector<double> positive_numbers(const config::Node& list, const char* unit) {
  std::vector<double> out;
  for (const config::Node& e : list.elements()) {
    if (!e.is_scalar()) throw e.error("expected a number", fmt::format("a number > 0 ({})", unit));
    double v = 0;
    try {
      v = e.as_double(0);
    } catch (const Error&) {
      throw e.error("not a number", fmt::format("a number > 0 ({}, ASTRA-sim's unit)", unit));
    }
    if (!(v > 0)) throw e.error("out of range", fmt::format("a number > 0 ({})", unit));
    out.push_back(v);
  }
  return out;
}

}  // namespace

std::string import_astra_sim_network(const config::Node& root) {
  if (!root.is_map()) {
    throw root.error("expected a map", "an ASTRA-sim network config (topology, npus_count, ...)");
  }
  root.expect_keys({"topology", "npus_count", "bandwidth", "latency"});
  const config::Node kinds_node = root.at("topology");
  if (!kinds_node.is_sequence()) throw kinds_node.error("expected a list", "[Ring, Switch, ...]");
  std::vector<std::string> kinds;
  for (const config::Node& e : kinds_node.elements()) {
    kinds.push_back(e.as_choice({"Ring", "FullyConnected", "Switch"}));
  }
  if (kinds.empty()) throw kinds_node.error("no dimension", "at least one dimension");
  const config::Node npus_node = root.at("npus_count");
  if (!npus_node.is_sequence()) throw npus_node.error("expected a list", "[8, 4, ...]");
  const std::vector<std::int64_t> npus = npus_node.as_int_list(1, std::int64_t{1} << 26);
  const std::vector<double> bandwidth = positive_numbers(root.at("bandwidth"), "GB/s");
  const std::vector<double> latency = positive_numbers(root.at("latency"), "ns");
  const auto same_length = [&](const char* key, std::size_t size) {
    if (size == kinds.size()) return;
    const config::Node list = root.at(key);
    throw Error::input(
        "wrong length",
        {.file = list.file(),
         .line = list.line(),
         .key = list.path(),
         .value = fmt::format("{} entries", size),
         .expected = fmt::format("{} entries, one per dimension of topology", kinds.size())});
  };
  same_length("npus_count", npus.size());
  same_length("bandwidth", bandwidth.size());
  same_length("latency", latency.size());

  std::vector<std::string> counts;
  std::vector<std::string> rates;
  std::vector<std::string> delays;
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    counts.push_back(std::to_string(npus[i]));
    rates.push_back(fmt::format("\"{} GiB/s\"", bandwidth[i]));
    delays.push_back(fmt::format("\"{} ns\"", latency[i]));
  }
  const std::string base = stem(root.file());
  std::string out;
  out += fmt::format("# Imported by `nest topology import` from {} (an ASTRA-sim analytical\n",
                     base.empty() ? std::string("an ASTRA-sim config") : base + ".yml");
  out +=
      "# network config). ASTRA-sim's units: bandwidth in GB/s of 2^30 B "
      "(astra-network-analytical\n"
      "# bw_GBps_to_Bpns), latency in ns; devices numbered with dimension 0 fastest.\n";
  out += "kind: dimensions\n";
  if (!base.empty()) out += fmt::format("name: {}\n", quoted(base));
  out += fmt::format("topology: {}\n", flow_list(kinds));
  out += fmt::format("npus_count: {}\n", flow_list(counts));
  out += fmt::format("bandwidth: {}\n", flow_list(rates));
  out += fmt::format("latency: {}\n", flow_list(delays));
  return out;
}

}  // namespace nest::topo
