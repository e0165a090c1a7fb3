# rdma-core's libibverbs is optional: AUTO uses it when pkg-config finds
# libibverbs, ON requires it, OFF never looks. Without it the verbs transport
# still builds with its in-process fake (tests), and reaches no device.
# scripts/setup installs Debian's libibverbs-dev, so the README's commands
# always build the real one.
set(LOOM_IBVERBS AUTO CACHE STRING "InfiniBand verbs: AUTO, ON or OFF")
set_property(CACHE LOOM_IBVERBS PROPERTY STRINGS AUTO ON OFF)
set(LOOM_HAVE_IBVERBS OFF)
set(LOOM_IBVERBS_LIBRARIES "")
if(NOT LOOM_IBVERBS STREQUAL "OFF")
  find_package(PkgConfig REQUIRED)
  if(LOOM_IBVERBS STREQUAL "ON")
    pkg_check_modules(IBVERBS REQUIRED libibverbs)
  else()
    pkg_check_modules(IBVERBS QUIET libibverbs)
  endif()
  if(IBVERBS_FOUND)
    set(LOOM_HAVE_IBVERBS ON)
    set(LOOM_IBVERBS_LIBRARIES ${IBVERBS_LIBRARIES})
  endif()
endif()
message(STATUS "Loom: verbs transport on libibverbs ${LOOM_HAVE_IBVERBS} (LOOM_IBVERBS=${LOOM_IBVERBS})")
