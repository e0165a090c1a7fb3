# CUDA is optional: AUTO uses it when the toolkit is found, ON requires it, OFF
# never looks. With it, the host side links the runtime and the kernels
# (collectives/cuda, the stream gate's in base/device) are compiled by nvcc
# for Ampere and Hopper (sm_80, sm_90) plus PTX for later GPUs;
# CMAKE_CUDA_ARCHITECTURES overrides that.
set(LOOM_HAVE_CUDA OFF)
set(LOOM_CUDA_LIBS "")
if(NOT LOOM_CUDA STREQUAL "OFF")
  if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  if(LOOM_CUDA STREQUAL "ON")
    find_package(CUDAToolkit REQUIRED)
  else()
    find_package(CUDAToolkit QUIET)
  endif()
  if(CUDAToolkit_FOUND)
    set(LOOM_HAVE_CUDA ON)
    set(LOOM_CUDA_LIBS CUDA::cudart)
    if(NOT CMAKE_CUDA_COMPILER)
      set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
    endif()
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 90-virtual)
    endif()
    enable_language(CUDA)
    # C++20 as the rest: CMake 3.25 does not know nvcc's flag for it, so it is told.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_EXTENSIONS OFF)
    # base/half.hpp's conversions, which the kernels call too, use
    # std::bit_cast (constexpr); no fused multiply-add, so a device reduction
    # rounds as the host's does (bitwise equal results).
    string(APPEND CMAKE_CUDA_FLAGS " --expt-relaxed-constexpr --fmad=false")
  endif()
endif()
message(STATUS "Loom: CUDA support ${LOOM_HAVE_CUDA} (LOOM_CUDA=${LOOM_CUDA})")
