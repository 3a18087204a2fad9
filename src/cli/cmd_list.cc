// `nest list [topologies|models|accelerators|profiles|studies] [--json]`: what the catalog
// holds (nest/core/catalog.h), name and file, so that every name the other commands accept is
// one command away.

#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "nest/core/catalog.h"
#include "nest/core/error.h"

namespace nest::cli {
namespace {

constexpr std::pair<const char*, DataKind> kKinds[] = {{"topologies", DataKind::kTopology},
                                                       {"models", DataKind::kModel},
                                                       {"accelerators", DataKind::kAccelerator},
                                                       {"profiles", DataKind::kProfile},
                                                       {"studies", DataKind::kStudy}};

}  // namespace

int run_list(std::span<char* const> args, const Context&) {
  std::string kind;
  bool json = false;
  Options o("nest list [topologies|models|accelerators|profiles|studies] [--json]");
  o.positional("kind", &kind, "what to list (default: everything)", false)
      .add("json", &json, "print one JSON object: kind -> [{name, file}]");
  if (!o.parse(args)) return 0;
  std::vector<std::pair<const char*, DataKind>> kinds;
  for (const auto& k : kKinds) {
    if (kind.empty() || kind == k.first) kinds.push_back(k);
  }
  if (kinds.empty()) {
    throw Error::input("unknown kind", {.key = "kind",
                                        .value = kind,
                                        .expected = "topologies, models, accelerators, profiles "
                                                    "or studies"});
  }
  const Catalog data = catalog();
  nlohmann::ordered_json j;
  for (const auto& [name, k] : kinds) {
    nlohmann::ordered_json entries = nlohmann::ordered_json::array();
    for (const std::string& stem : data.list(k)) {
      entries.push_back({{"name", stem}, {"file", data.find(k, stem)}});
    }
    j[name] = std::move(entries);
  }
  if (json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  for (const auto& [name, entries] : j.items()) {
    std::cout << name << ":\n";
    for (const auto& e : entries) {
      std::cout << fmt::format("  {:<28} {}\n", e["name"].get<std::string>(),
                               e["file"].get<std::string>());
    }
  }
  return 0;
}

}  // namespace nest::cli
