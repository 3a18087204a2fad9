#pragma once
/// \file
/// The bundled data files and how names find them: `--topology h100_rail_1024`, `--model
/// gpt3-175b`, `--accelerator h100` (a unique prefix of a file's stem is enough), `--profile
/// gpt3-175b-h100`, a study name. A path to an existing file is always taken as it is.
///
/// A catalog is a list of data roots, each a folder that may hold `topologies/`,
/// `workloads/models/`, `workloads/accelerators/`, `workloads/profiles/` and `studies/`. The
/// standard roots, first match wins: `$NEST_HOME`; the working directory; beside the running
/// executable, `../share/nest` (an installed tree: `P/bin/nest` with `P/share/nest`), `..` and
/// `../..` (a build folder inside the source tree); and the install data folder this library was
/// configured with (`CMAKE_INSTALL_PREFIX/share/nest`).

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace nest {

/// Paths of this many bytes or more are refused (Linux's PATH_MAX).
inline constexpr std::size_t kMaxPathBytes = 4096;

/// The kinds of bundled file.
enum class DataKind : unsigned char { kTopology, kModel, kAccelerator, kProfile, kStudy };

/// "topology", "model", "accelerator", "profile", "study".
[[nodiscard]] std::string_view to_string(DataKind kind) noexcept;
/// The folder of a kind below a root: "topologies", "workloads/models", ...
[[nodiscard]] std::string_view folder_of(DataKind kind) noexcept;

/// Data roots and lookups in them. A value type; cheap to copy.
class Catalog {
 public:
  /// A catalog of exactly these roots (no standard ones).
  explicit Catalog(std::vector<std::filesystem::path> roots);
  /// The standard roots (see the file comment), existing folders only.
  [[nodiscard]] static Catalog standard();

  [[nodiscard]] const std::vector<std::filesystem::path>& roots() const noexcept { return roots_; }

  /// `name_or_path` when it names an existing file or looks like a path (holds a '/' or ends in
  /// `.yaml`: its loader then says it is missing); otherwise the `.yaml` file of `kind` whose
  /// stem equals it, or failing that the only one whose stem starts with it, in the first root
  /// that has the kind's folder and such a file. Throws `Error` (input) "unknown <kind>" or
  /// "ambiguous <kind> name" with `key` (default: the kind's name) and the names there are.
  [[nodiscard]] std::string find(DataKind kind, const std::string& name_or_path,
                                 const std::string& key = {}) const;

  /// The stems of the `.yaml` files of `kind` in every root (first root first, each name once),
  /// sorted within a root.
  [[nodiscard]] std::vector<std::string> list(DataKind kind) const;

  /// The first root that holds `relative` (a file or folder), or an empty path.
  [[nodiscard]] std::filesystem::path locate(const std::filesystem::path& relative) const;

 private:
  std::vector<std::filesystem::path> roots_;
};

}  // namespace nest
