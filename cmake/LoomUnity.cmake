# Unity builds for the targets of many sources: CMake compiles their sources
# in batches of 8, each batch one translation unit, so each batch parses the
# standard and Loom's headers once instead of eight times. On CI's 2 cores a
# clean release build's libraries took about half the CPU time, in each of
# the three builds (bench/RESULTS.md, "Build time").
#
# The rule this sets: within one target, no two sources define the same name
# in an anonymous namespace; name what a file keeps to itself for what it is
# (ringAllReduceCost, not cost). A source with options of its own (the
# training layer's -O3 loops) is compiled alone, as CMake does for any such.
# LOOM_UNITY=OFF compiles file by file, e.g. to check a source's includes.
option(LOOM_UNITY "Compile the libraries' sources in batches (unity builds)" ON)

function(loom_unity target)
  if(LOOM_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()
