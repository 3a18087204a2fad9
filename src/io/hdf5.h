#pragma once
// The io module's one set of HDF5 helpers, used by the run writer (hdf5_writer.cc) and the
// table writer behind results.h5 (hdf5_table.cc). Private to src/io/: no public header
// includes HDF5.
//
// How a file is made: HDF5 builds it in memory (the core driver, no backing store) and the
// finished image goes to disk through nest::OutputFile, so every disk error (a full disk, a
// file-size limit) surfaces in one place as an input error naming the file, and HDF5 itself
// never holds a half-written file on disk (its exit handler once crashed flushing one after a
// failed close). Every identifier is closed explicitly on the success path and the result
// checked; a destructor closes only what an exception left open, while that exception is
// already being reported. A failing HDF5 call throws `Error` (internal: the file is built in
// memory, so a refusal is NEST's own mistake) with the cause from HDF5's error stack
// ("H5Acreate2: object header message is too large"), never a guess about the path.
//
// Conventions: strings are variable-length UTF-8 (h5py reads attributes as str, datasets with
// `.asstr()`); object time tracking is off, so the same content gives the same bytes; compound
// tables are packed, so no padding byte (whose content is arbitrary) reaches the file.

#include <hdf5.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "nest/core/atomic_file.h"

namespace nest::io::h5 {

/// The cause of the last HDF5 failure: the function at the top of the error stack and the
/// description at its bottom ("H5Acreate2: object header message is too large").
[[nodiscard]] std::string error_cause();

/// Throws `Error` (internal) "`call` failed: <cause>".
[[noreturn]] void fail(const char* call);

/// Throws (see `fail`) when `status` < 0.
inline void check(herr_t status, const char* call) {
  if (status < 0) fail(call);
}

/// An owned HDF5 identifier.
class Id {
 public:
  using Closer = herr_t (*)(hid_t);
  Id() = default;
  /// Takes `id` (returned by `call`; throws with the cause when it is negative).
  Id(hid_t id, Closer closer, const char* call);
  Id(Id&& other) noexcept;
  Id& operator=(Id&& other) noexcept;
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  /// Closes what is still open, ignoring the result: reached with an open id only while an
  /// exception unwinds (the success path calls `close()`).
  ~Id();

  [[nodiscard]] hid_t get() const noexcept { return id_; }
  /// Closes, checking the result.
  void close();

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

/// A new HDF5 file in memory.
class MemoryFile {
 public:
  MemoryFile();
  [[nodiscard]] hid_t get() const noexcept { return file_.get(); }
  /// Flushes, copies the image out, closes the file (checked) and writes the image to `out`
  /// (which the caller commits). Every object of the file must be closed before.
  void write_to(OutputFile& out);

 private:
  Id file_;
};

/// A variable-length UTF-8 string type.
[[nodiscard]] Id utf8_type();
/// A dataset creation property list with object time tracking off.
[[nodiscard]] Id no_times();
/// A 1-D dataspace of `n` elements (0 allowed).
[[nodiscard]] Id vector_space(std::size_t n);

/// Creates the group `name` in `parent`, without time tracking.
[[nodiscard]] Id make_group(hid_t parent, const char* name);

/// A scalar UTF-8 string attribute.
void string_attribute(hid_t object, const std::string& name, std::string_view value);
/// A 1-D UTF-8 string attribute (an empty list is an attribute of 0 elements).
void string_list_attribute(hid_t object, const char* name, const std::vector<std::string>& values);
/// A scalar numeric attribute of HDF5 type `type` whose memory is `*value`.
void scalar_attribute(hid_t object, const char* name, hid_t type, const void* value);

/// A scalar UTF-8 string dataset: for texts of any size (attributes are limited to 64 KiB).
void text_dataset(hid_t parent, const char* name, std::string_view text);

/// A 1-D dataset of `n` elements of `memory_type` read from `data` (may be null when n is 0),
/// stored as the packed copy of `memory_type`. Returns the open dataset (for attributes).
[[nodiscard]] Id table_dataset(hid_t parent, const char* name, hid_t memory_type, std::size_t n,
                               const void* data);

/// `<field>.unit` string attributes of a dataset.
void unit_attributes(hid_t dataset,
                     std::initializer_list<std::pair<const char*, const char*>> units);

}  // namespace nest::io::h5
