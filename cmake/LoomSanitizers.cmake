# LOOM_SANITIZE applies to every target, so that one preset builds a fully
# instrumented tree (a half-instrumented TSan build reports false races).
# Line tables only (-g1, after the build type's -g): a report names file and
# line, which is all these builds are for (the debug preset is for gdb).
if(LOOM_SANITIZE)
  add_compile_options(-fsanitize=${LOOM_SANITIZE} -fno-omit-frame-pointer -g1)
  add_link_options(-fsanitize=${LOOM_SANITIZE})
  if(LOOM_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()

# Fuzzing: the layers that parse bytes from the network (base's readers,
# transport's handshakes and slots, comm's bootstrap and stores) are built
# with coverage instrumentation for libFuzzer; the collectives are not, so the
# rest of the suite keeps its speed.
if(LOOM_FUZZ AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "LOOM_FUZZ needs Clang (libFuzzer); this is ${CMAKE_CXX_COMPILER_ID}")
endif()
function(loom_fuzz_instrument target)
  if(LOOM_FUZZ)
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
endfunction()
