#include "io/hdf5.h"

#include <fmt/format.h>

#include <memory>
#include <utility>

#include "nest/core/error.h"

namespace nest::io::h5 {
namespace {

struct Walk {
  std::string top;
  std::string bottom;
};

herr_t visit(unsigned n, const H5E_error2_t* e, void* data) {
  auto* walk = static_cast<Walk*>(data);
  if (n == 0 && e->func_name != nullptr) walk->top = e->func_name;
  if (e->desc != nullptr && e->desc[0] != 0) {
    walk->bottom = e->desc;
  } else {
    char text[256] = {};
    H5E_type_t type{};
    if (H5Eget_msg(e->min_num, &type, text, sizeof text) > 0) walk->bottom = text;
  }
  return 0;
}

}  // namespace

std::string error_cause() {
  Walk walk;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, visit, &walk);
  H5Eclear2(H5E_DEFAULT);
  if (walk.bottom.empty()) return "no cause on HDF5's error stack";
  return walk.top.empty() ? walk.bottom : walk.top + ": " + walk.bottom;
}

void fail(const char* call) {
  throw Error::internal(fmt::format("HDF5 {} failed: {}", call, error_cause()));
}

Id::Id(hid_t id, Closer closer, const char* call) : id_(id), closer_(closer) {
  if (id < 0) {
    id_ = H5I_INVALID_HID;
    fail(call);
  }
}

Id::Id(Id&& other) noexcept
    : id_(std::exchange(other.id_, H5I_INVALID_HID)), closer_(other.closer_) {}

Id& Id::operator=(Id&& other) noexcept {
  if (this != &other) {
    if (id_ >= 0) closer_(id_);
    id_ = std::exchange(other.id_, H5I_INVALID_HID);
    closer_ = other.closer_;
  }
  return *this;
}

Id::~Id() {
  if (id_ >= 0) closer_(id_);  // only while an exception unwinds: see the class comment
}

void Id::close() {
  if (id_ < 0) return;
  const hid_t id = std::exchange(id_, H5I_INVALID_HID);
  check(closer_(id), "close");
}

MemoryFile::MemoryFile() {
  // Errors are read from the stack and reported by the caller, never printed.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate");
  // Grows 256 KiB at a time; no backing store: nothing touches the disk until write_to.
  check(H5Pset_fapl_core(fapl.get(), std::size_t{256} << 10, false), "H5Pset_fapl_core");
  // The name only tells open in-memory files apart inside the library.
  const std::string name = fmt::format("nest-memory-{}.h5", static_cast<const void*>(this));
  file_ =
      Id(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose, "H5Fcreate");
  fapl.close();
}

void MemoryFile::write_to(OutputFile& out) {
  const ssize_t open = H5Fget_obj_count(file_.get(), H5F_OBJ_ALL & ~H5F_OBJ_FILE);
  if (open != 0) {
    throw Error::internal(fmt::format("{} HDF5 objects left open before the file's close", open));
  }
  check(H5Fflush(file_.get(), H5F_SCOPE_GLOBAL), "H5Fflush");
  const ssize_t size = H5Fget_file_image(file_.get(), nullptr, 0);
  if (size < 0) fail("H5Fget_file_image");
  const auto bytes = static_cast<std::size_t>(size);
  const auto image = std::make_unique_for_overwrite<char[]>(bytes);
  if (H5Fget_file_image(file_.get(), image.get(), bytes) != size) fail("H5Fget_file_image");
  file_.close();
  out.write({image.get(), bytes});
}

Id utf8_type() {
  Id type(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy");
  check(H5Tset_size(type.get(), H5T_VARIABLE), "H5Tset_size");
  check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "H5Tset_cset");
  return type;
}

Id no_times() {
  Id p(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate");
  check(H5Pset_obj_track_times(p.get(), false), "H5Pset_obj_track_times");
  return p;
}

Id vector_space(std::size_t n) {
  const hsize_t dims = n;
  return Id(H5Screate_simple(1, &dims, nullptr), H5Sclose, "H5Screate_simple");
}

Id make_group(hid_t parent, const char* name) {
  Id gcpl(H5Pcreate(H5P_GROUP_CREATE), H5Pclose, "H5Pcreate");
  check(H5Pset_obj_track_times(gcpl.get(), false), "H5Pset_obj_track_times");
  Id group(H5Gcreate2(parent, name, H5P_DEFAULT, gcpl.get(), H5P_DEFAULT), H5Gclose, "H5Gcreate2");
  gcpl.close();
  return group;
}

void string_attribute(hid_t object, const std::string& name, std::string_view value) {
  Id type = utf8_type();
  Id space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
  Id attribute(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
               H5Aclose, "H5Acreate2");
  const std::string text(value);
  const char* pointer = text.c_str();
  check(H5Awrite(attribute.get(), type.get(), &pointer), "H5Awrite");
  attribute.close();
  space.close();
  type.close();
}

void string_list_attribute(hid_t object, const char* name, const std::vector<std::string>& values) {
  Id type = utf8_type();
  Id space = vector_space(values.size());
  Id attribute(H5Acreate2(object, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
               H5Aclose, "H5Acreate2");
  // An empty list has no buffer to write (HDF5 refuses a null one): the attribute of 0
  // elements is complete as created.
  if (!values.empty()) {
    std::vector<const char*> pointers;
    pointers.reserve(values.size());
    for (const auto& v : values) pointers.push_back(v.c_str());
    check(H5Awrite(attribute.get(), type.get(), pointers.data()), "H5Awrite");
  }
  attribute.close();
  space.close();
  type.close();
}

void scalar_attribute(hid_t object, const char* name, hid_t type, const void* value) {
  Id space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
  Id attribute(H5Acreate2(object, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
               "H5Acreate2");
  check(H5Awrite(attribute.get(), type, value), "H5Awrite");
  attribute.close();
  space.close();
}

void text_dataset(hid_t parent, const char* name, std::string_view text) {
  Id type = utf8_type();
  Id space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
  Id dcpl = no_times();
  Id dataset(
      H5Dcreate2(parent, name, type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
      H5Dclose, "H5Dcreate2");
  const std::string copy(text);
  const char* pointer = copy.c_str();
  check(H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &pointer), "H5Dwrite");
  dataset.close();
  dcpl.close();
  space.close();
  type.close();
}

Id table_dataset(hid_t parent, const char* name, hid_t memory_type, std::size_t n,
                 const void* data) {
  Id file_type(H5Tcopy(memory_type), H5Tclose, "H5Tcopy");
  if (H5Tget_class(memory_type) == H5T_COMPOUND) check(H5Tpack(file_type.get()), "H5Tpack");
  Id space = vector_space(n);
  Id dcpl = no_times();
  Id dataset(
      H5Dcreate2(parent, name, file_type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
      H5Dclose, "H5Dcreate2");
  if (n > 0) {
    check(H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "H5Dwrite");
  }
  dcpl.close();
  space.close();
  file_type.close();
  return dataset;
}

void unit_attributes(hid_t dataset,
                     std::initializer_list<std::pair<const char*, const char*>> units) {
  for (const auto& [field, unit] : units)
    string_attribute(dataset, std::string(field) + ".unit", unit);
}

}  // namespace nest::io::h5
