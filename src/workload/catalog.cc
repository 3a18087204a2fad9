#include "nest/workload/catalog.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "nest/core/error.h"

namespace nest::workload {
namespace {

namespace fs = std::filesystem;

const char* folder_of(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kModel:
      return "models";
    case WorkloadKind::kAccelerator:
      return "accelerators";
    case WorkloadKind::kProfile:
      return "profiles";
  }
  return "";
}

const char* noun_of(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kModel:
      return "model";
    case WorkloadKind::kAccelerator:
      return "accelerator";
    case WorkloadKind::kProfile:
      return "profile";
  }
  return "";
}

// The first root's workloads/<folder>, or empty.
fs::path folder_in(WorkloadKind kind, const std::vector<std::string>& roots) {
  for (const std::string& root : roots) {
    const fs::path dir = fs::path(root) / "workloads" / folder_of(kind);
    std::error_code ec;
    if (fs::is_directory(dir, ec)) return dir;
  }
  return {};
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "(none found)" : out;
}

}  // namespace

std::vector<std::string> list_workloads(WorkloadKind kind, const std::vector<std::string>& roots) {
  std::vector<std::string> names;
  const fs::path dir = folder_in(kind, roots);
  if (dir.empty()) return names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string find_workload_file(WorkloadKind kind, const std::string& name_or_path,
                               const std::vector<std::string>& roots) {
  std::error_code ec;
  if (fs::is_regular_file(name_or_path, ec)) return name_or_path;
  const std::vector<std::string> names = list_workloads(kind, roots);
  const fs::path dir = folder_in(kind, roots);
  std::vector<std::string> matches;
  for (const std::string& n : names) {
    if (n == name_or_path) return (dir / (n + ".yaml")).string();
    if (n.rfind(name_or_path, 0) == 0) matches.push_back(n);
  }
  const std::string noun = noun_of(kind);
  if (matches.size() == 1 && !name_or_path.empty()) return (dir / (matches[0] + ".yaml")).string();
  if (matches.size() > 1 && !name_or_path.empty()) {
    throw Error::input(
        "ambiguous " + noun + " name",
        {.key = noun, .value = name_or_path, .expected = "one of " + joined(matches)});
  }
  throw Error::input("unknown " + noun,
                     {.key = noun,
                      .value = name_or_path,
                      .expected = "one of " + joined(names) + ", or the path of a YAML file"});
}

}  // namespace nest::workload
