#include "nest/core/catalog.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <system_error>
#include <utility>

#include "nest/core/error.h"

namespace nest {
namespace {

namespace fs = std::filesystem;

bool is_folder(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// The `.yaml` stems in `dir`, sorted.
std::vector<std::string> stems_in(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".yaml" && it->is_regular_file(ec)) {
      out.push_back(it->path().stem().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "(none found)" : out;
}

// Appends `candidate` when it is a folder not already listed (by identity, not spelling).
void add_root(std::vector<fs::path>& roots, const fs::path& candidate) {
  if (candidate.empty() || !is_folder(candidate)) return;
  for (const fs::path& r : roots) {
    std::error_code ec;
    if (fs::equivalent(r, candidate, ec)) return;
  }
  roots.push_back(candidate);
}

}  // namespace

std::string_view to_string(DataKind kind) noexcept {
  switch (kind) {
    case DataKind::kTopology:
      return "topology";
    case DataKind::kModel:
      return "model";
    case DataKind::kAccelerator:
      return "accelerator";
    case DataKind::kProfile:
      return "profile";
    case DataKind::kStudy:
      return "study";
  }
  return "";
}

std::string_view folder_of(DataKind kind) noexcept {
  switch (kind) {
    case DataKind::kTopology:
      return "topologies";
    case DataKind::kModel:
      return "workloads/models";
    case DataKind::kAccelerator:
      return "workloads/accelerators";
    case DataKind::kProfile:
      return "workloads/profiles";
    case DataKind::kStudy:
      return "studies";
  }
  return "";
}

Catalog::Catalog(std::vector<fs::path> roots) : roots_(std::move(roots)) {}

Catalog Catalog::standard() {
  std::vector<fs::path> roots;
  if (const char* home = std::getenv("NEST_HOME"); home != nullptr && *home != '\0') {
    add_root(roots, home);
  }
  add_root(roots, ".");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path bin = exe.parent_path();
    add_root(roots, bin.parent_path() / "share" / "nest");
    add_root(roots, bin.parent_path());
    add_root(roots, bin.parent_path().parent_path());
  }
#ifdef NEST_DATA_DIR
  add_root(roots, NEST_DATA_DIR);
#endif
  return Catalog(std::move(roots));
}

std::vector<std::string> Catalog::list(DataKind kind) const {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const fs::path& root : roots_) {
    for (std::string& stem : stems_in(root / folder_of(kind))) {
      if (seen.insert(stem).second) out.push_back(std::move(stem));
    }
  }
  return out;
}

fs::path Catalog::locate(const fs::path& relative) const {
  for (const fs::path& root : roots_) {
    std::error_code ec;
    if (fs::exists(root / relative, ec)) return root;
  }
  return {};
}

std::string Catalog::find(DataKind kind, const std::string& name_or_path,
                          const std::string& key) const {
  const std::string k = key.empty() ? std::string(to_string(kind)) : key;
  if (name_or_path.size() >= kMaxPathBytes) {
    throw Error::input("path too long",
                       {.key = k,
                        .value = name_or_path,
                        .expected = fmt::format("a path of at most {} bytes", kMaxPathBytes - 1)});
  }
  std::error_code ec;
  if (!name_or_path.empty() && fs::is_regular_file(name_or_path, ec)) return name_or_path;
  // What looks like a path is one: its loader reports it missing, not the catalog.
  if (name_or_path.find('/') != std::string::npos ||
      fs::path(name_or_path).extension() == ".yaml") {
    return name_or_path;
  }
  const std::string noun(to_string(kind));
  // Exact stems first, in root order; then unique prefixes over every root's names.
  std::vector<std::pair<std::string, fs::path>> prefixed;
  std::set<std::string> seen;
  for (const fs::path& root : roots_) {
    const fs::path dir = root / folder_of(kind);
    for (const std::string& stem : stems_in(dir)) {
      if (stem == name_or_path) return (dir / (stem + ".yaml")).string();
      if (!name_or_path.empty() && stem.rfind(name_or_path, 0) == 0 && seen.insert(stem).second) {
        prefixed.emplace_back(stem, dir / (stem + ".yaml"));
      }
    }
  }
  if (prefixed.size() == 1) return prefixed.front().second.string();
  if (prefixed.size() > 1) {
    std::vector<std::string> names;
    for (const auto& p : prefixed) names.push_back(p.first);
    std::sort(names.begin(), names.end());
    throw Error::input("ambiguous " + noun + " name",
                       {.key = k, .value = name_or_path, .expected = "one of " + joined(names)});
  }
  throw Error::input("unknown " + noun,
                     {.key = k,
                      .value = name_or_path,
                      .expected = "one of " + joined(list(kind)) + ", or the path of a YAML file"});
}

}  // namespace nest
