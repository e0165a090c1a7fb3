# Installs libloom (shared and static), its headers, a CMake package
# (find_package(loom) -> loom::loom, loom::loom_static) and loom.pc; and
# beside it libnccl.so.2 with its nccl.h (include/loom/nccl/) and
# loom-nccl.pc, for programs written for NCCL.
include(CMakePackageConfigHelpers)

install(TARGETS loom loom_static EXPORT loomTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/loom DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT loomTargets NAMESPACE loom:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/loom)

configure_package_config_file(cmake/loomConfig.cmake.in ${PROJECT_BINARY_DIR}/loomConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/loom)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/loomConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/loomConfig.cmake ${PROJECT_BINARY_DIR}/loomConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/loom)

# Relocatable: the prefix is found from the .pc file's own place.
file(RELATIVE_PATH LOOM_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
set(LOOM_PC_REQUIRES_PRIVATE "hwloc")
if(LOOM_HAVE_UCX)
  string(APPEND LOOM_PC_REQUIRES_PRIVATE " ucx")
endif()
if(LOOM_HAVE_IBVERBS)
  string(APPEND LOOM_PC_REQUIRES_PRIVATE " libibverbs")
endif()
configure_file(cmake/loom.pc.in ${PROJECT_BINARY_DIR}/loom.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/loom.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(TARGETS loom_nccl LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES shim/nccl/include/nccl.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/loom/nccl)
configure_file(cmake/loom-nccl.pc.in ${PROJECT_BINARY_DIR}/loom-nccl.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/loom-nccl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
