# The modules of libnest, bottom-up (docs/architecture.md). A module may use only those listed before it.
# A module whose src/<module>/ has no sources yet is skipped, so the tree builds at every step.
set(NEST_MODULES "")
macro(nest_add_module name)
  file(GLOB _probe CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cc)
  if(_probe)
    nest_module(${name} ${ARGN})
    list(APPEND NEST_MODULES ${name})
  endif()
endmacro()

nest_add_module(core DEPS fmt::fmt)
nest_add_module(config DEPS nest_core PRIVATE_DEPS yaml-cpp::yaml-cpp)
nest_add_module(topo DEPS nest_config PRIVATE_DEPS Boost::graph)
nest_add_module(net DEPS nest_topo)
nest_add_module(coll DEPS nest_net)
nest_add_module(workload DEPS nest_config PRIVATE_DEPS Boost::graph)
nest_add_module(placer DEPS nest_coll nest_workload)
nest_add_module(replay DEPS nest_placer nest_coll nest_net)
nest_add_module(io DEPS nest_replay nest_placer nest_config
                PRIVATE_DEPS hdf5::hdf5_cpp hdf5::hdf5 nlohmann_json::nlohmann_json yaml-cpp::yaml-cpp
                             ZLIB::ZLIB)
# Chakra execution traces (include/nest/chakra/chakra.h): protobuf code generated from the vendored
# schema (third_party/chakra/et_def.proto) is compiled once, into this module, and its headers stay
# in src/chakra/.
nest_add_module(chakra DEPS nest_replay
                PRIVATE_DEPS protobuf::libprotobuf nlohmann_json::nlohmann_json)
if(TARGET nest_chakra)
  set(_chakra_gen ${PROJECT_BINARY_DIR}/generated/chakra)
  set(_chakra_proto ${PROJECT_SOURCE_DIR}/third_party/chakra/et_def.proto)
  file(MAKE_DIRECTORY ${_chakra_gen})
  add_custom_command(
    OUTPUT ${_chakra_gen}/et_def.pb.cc ${_chakra_gen}/et_def.pb.h
    COMMAND protobuf::protoc --cpp_out=${_chakra_gen} -I ${PROJECT_SOURCE_DIR}/third_party/chakra
            ${_chakra_proto}
    DEPENDS ${_chakra_proto} protobuf::protoc
    COMMENT "protoc: Chakra ET schema")
  target_sources(nest_chakra PRIVATE ${_chakra_gen}/et_def.pb.cc)
  # Generated code is not held to the project's warnings.
  set_source_files_properties(${_chakra_gen}/et_def.pb.cc PROPERTIES COMPILE_OPTIONS "-w")
  target_include_directories(nest_chakra SYSTEM PRIVATE ${_chakra_gen})
endif()
nest_add_module(job DEPS nest_io nest_replay nest_placer Threads::Threads)
nest_add_module(validate DEPS nest_replay nest_placer nest_coll nest_workload)
nest_add_module(sweep DEPS nest_job nest_io nest_replay Threads::Threads)
# Sweeps over MPI ranks (docs/architecture.md, "Sweeps"): Boost.MPI stays private to src/sweep/; the definition
# is public so that the CLI knows too.
if(NEST_WITH_MPI AND TARGET nest_sweep)
  target_link_libraries(nest_sweep PRIVATE Boost::mpi Boost::serialization MPI::MPI_CXX)
  target_compile_definitions(nest_sweep PUBLIC NEST_WITH_MPI)
endif()

add_library(nest INTERFACE)
foreach(m IN LISTS NEST_MODULES)
  target_link_libraries(nest INTERFACE nest_${m})
endforeach()
