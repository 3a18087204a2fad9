#pragma once
/// \file
/// Finding workload files by name: `--model gpt3-175b` or `--accelerator h100` name files of
/// `workloads/models/` and `workloads/accelerators/` (a unique prefix of a file's stem is
/// enough: h100 → h100-sxm.yaml); a path to an existing file is taken as is.

#include <string>
#include <vector>

namespace nest::workload {

/// The folder kinds under `workloads/`.
enum class WorkloadKind { kModel, kAccelerator, kProfile };

/// Stems of the `.yaml` files of `kind` in the first of `roots` (folders that contain
/// `workloads/`) that has such a folder, sorted; empty when none has.
[[nodiscard]] std::vector<std::string> list_workloads(WorkloadKind kind,
                                                      const std::vector<std::string>& roots);

/// `name_or_path` when it is an existing file; otherwise the file of `kind` whose stem equals
/// it, or failing that the only one that starts with it, in the first root that has the
/// folder. Throws `Error` (input) "unknown <kind>" or "ambiguous <kind> name", listing the
/// names there are; the error's key is "model", "accelerator" or "profile".
[[nodiscard]] std::string find_workload_file(WorkloadKind kind, const std::string& name_or_path,
                                             const std::vector<std::string>& roots);

}  // namespace nest::workload
