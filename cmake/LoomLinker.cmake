# LLVM's lld links wherever the compiler can drive it: in a third of GNU ld's
# time for the seventy-odd test and tool executables that each link libloom.a
# with its debug info, the tail of every build. LOOM_LINKER=default keeps the
# toolchain's own linker.
set(LOOM_LINKER AUTO CACHE STRING "Linker: AUTO (lld where the compiler accepts -fuse-ld=lld) or default")
set_property(CACHE LOOM_LINKER PROPERTY STRINGS AUTO default)
if(LOOM_LINKER STREQUAL "AUTO")
  include(CheckLinkerFlag)
  check_linker_flag(CXX -fuse-ld=lld LOOM_HAVE_LLD)
  if(LOOM_HAVE_LLD)
    # Not for nvcc's links: CUDA executables are linked by the C++ driver.
    add_link_options($<$<OR:$<LINK_LANGUAGE:CXX>,$<LINK_LANGUAGE:C>>:-fuse-ld=lld>)
  endif()
elseif(NOT LOOM_LINKER STREQUAL "default")
  message(FATAL_ERROR "LOOM_LINKER is AUTO or default, not '${LOOM_LINKER}'")
endif()
