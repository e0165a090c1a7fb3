# Link-time optimization of what users run: libloom.so (and so libnccl.so.2 and
# loom_torch, which load it) and loom-perf. A small collective's call runs through
# api/, collectives/ and comm/, each compiled apart, and its instructions are spread
# thin over the calls between them: optimized across them at link, a 2-rank 8-byte
# call took 11-16 % fewer instructions and 10-23 % less time (bench/RESULTS.md,
# "link-time optimization").
#
# The layers' objects carry GCC's intermediate code beside their machine code
# (-ffat-lto-objects): the LTO links read the former (with GNU ld, whose plugin
# reads it; lld cannot), every other program (the tests) links the latter as
# before, with lld and no LTO's link time. LOOM_LTO: AUTO (on where GCC builds
# Release or RelWithDebInfo without sanitizers), ON, OFF.
set(LOOM_LTO AUTO CACHE STRING "Link-time optimization of libloom.so and loom-perf: AUTO, ON or OFF")
set_property(CACHE LOOM_LTO PROPERTY STRINGS AUTO ON OFF)

set(LOOM_HAVE_LTO OFF)
if(LOOM_LTO STREQUAL "AUTO")
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND NOT LOOM_SANITIZE AND CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo)$")
    set(LOOM_HAVE_LTO ON)
  endif()
elseif(LOOM_LTO STREQUAL "ON")
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    message(FATAL_ERROR "LOOM_LTO=ON needs GCC (its fat LTO objects); this is ${CMAKE_CXX_COMPILER_ID}")
  endif()
  set(LOOM_HAVE_LTO ON)
elseif(NOT LOOM_LTO STREQUAL "OFF")
  message(FATAL_ERROR "LOOM_LTO is AUTO, ON or OFF, not '${LOOM_LTO}'")
endif()
if(LOOM_HAVE_LTO)
  include(CheckCXXSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS "-flto=auto -ffat-lto-objects")
  set(CMAKE_REQUIRED_LINK_OPTIONS "-flto=auto;-fuse-ld=bfd")
  check_cxx_source_compiles("int main() { return 0; }" LOOM_LTO_LINKS)
  unset(CMAKE_REQUIRED_FLAGS)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  if(NOT LOOM_LTO_LINKS)
    if(LOOM_LTO STREQUAL "ON")
      message(FATAL_ERROR "LOOM_LTO=ON, but GCC cannot link with -flto through GNU ld here")
    endif()
    set(LOOM_HAVE_LTO OFF)
  endif()
endif()

# Inside libloom.so the layers' calls bind to the library's own functions
# (-fno-semantic-interposition): in position-independent code the compiler may
# otherwise inline none of them into another, LTO or not, in case a program
# replaced one by preloading its own, which no program may do with Loom's
# internals. It took a 2-rank 8-byte call through libloom.so from 1,913 to 1,712
# instructions, near the static library's 1,650.
include(CheckCXXCompilerFlag)
check_cxx_compiler_flag(-fno-semantic-interposition LOOM_HAVE_NO_INTERPOSITION)

# The objects of `target` bind their calls to each other within the library,
# and carry intermediate code for the LTO links (C++ only: nvcc's objects stay
# as they are).
function(loom_lto_objects target)
  if(LOOM_HAVE_NO_INTERPOSITION)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fno-semantic-interposition>)
  endif()
  if(LOOM_HAVE_LTO)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-flto=auto -ffat-lto-objects>)
  endif()
endfunction()

# `target` is linked with link-time optimization (GNU ld, after the tree's lld),
# its own objects too.
function(loom_lto_link target)
  if(LOOM_HAVE_LTO)
    loom_lto_objects(${target})
    target_link_options(${target} PRIVATE $<$<LINK_LANGUAGE:CXX>:-flto=auto -fuse-ld=bfd>)
  endif()
endfunction()
