# `cmake --install build --prefix P`: the `nest` executable in P/bin; the bundled topologies,
# workloads, studies, validation data and plot scripts in P/share/nest (where the installed
# `nest` finds them without NEST_HOME); the libraries and headers with a CMake package, so that
# `find_package(nest)` and `target_link_libraries(app nest::nest)` build against them.
include(CMakePackageConfigHelpers)

install(TARGETS nest_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY topologies workloads studies DESTINATION ${CMAKE_INSTALL_DATADIR}/nest)
install(DIRECTORY tests/validation/reference
        DESTINATION ${CMAKE_INSTALL_DATADIR}/nest/validation)
install(FILES scripts/nest_h5.py scripts/check_run.py scripts/plot_timeline.py
              scripts/plot_memory.py scripts/plot_sweep.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/nest/scripts)
install(DIRECTORY include/nest DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(_nest_targets nest)
foreach(m IN LISTS NEST_MODULES)
  list(APPEND _nest_targets nest_${m})
endforeach()
install(TARGETS ${_nest_targets} EXPORT nestTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT nestTargets NAMESPACE nest:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/nest)
configure_package_config_file(cmake/nestConfig.cmake.in ${PROJECT_BINARY_DIR}/nestConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/nest
                              PATH_VARS CMAKE_INSTALL_DATADIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/nestConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/nestConfig.cmake ${PROJECT_BINARY_DIR}/nestConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/nest)
