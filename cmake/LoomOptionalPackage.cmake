# An optional dependency that pkg-config finds: the cache option LOOM_<NAME>
# (AUTO uses it when found, ON requires it, OFF never looks) sets
# LOOM_HAVE_<NAME> and LOOM_<NAME>_LIBRARIES, and pkg-config's <NAME>_*
# variables (<NAME>_INCLUDE_DIRS). A macro: it sets them where it is called.
macro(loom_optional_package name module what)
  set(LOOM_${name} AUTO CACHE STRING "${what}: AUTO, ON or OFF")
  set_property(CACHE LOOM_${name} PROPERTY STRINGS AUTO ON OFF)
  set(LOOM_HAVE_${name} OFF)
  set(LOOM_${name}_LIBRARIES "")
  if(NOT LOOM_${name} STREQUAL "OFF")
    find_package(PkgConfig REQUIRED)
    if(LOOM_${name} STREQUAL "ON")
      pkg_check_modules(${name} REQUIRED ${module})
    else()
      pkg_check_modules(${name} QUIET ${module})
    endif()
    if(${name}_FOUND)
      set(LOOM_HAVE_${name} ON)
      set(LOOM_${name}_LIBRARIES ${${name}_LIBRARIES})
    endif()
  endif()
  message(STATUS "Loom: ${what} ${LOOM_HAVE_${name}} (LOOM_${name}=${LOOM_${name}})")
endmacro()
