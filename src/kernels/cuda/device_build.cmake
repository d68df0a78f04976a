# -DGOLINEAR_DEVICE_BUILD=ON: the GPU machine's build. It has nvcc, cmake and ninja but none of the
# pkg-config libraries of the CPU modules, so build only the CUDA backend, the CPU reference it is
# tested against (kernels/cpu without the BLAS linear layer, and mixers) and the gpu tests.
# GoogleTest comes from source: -DGOLINEAR_GTEST_SOURCE=<copy of /usr/src/googletest>.
find_package(Threads REQUIRED)
find_package(OpenMP)

file(GLOB kernel_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/kernels/cpu/*.cpp)
list(FILTER kernel_sources EXCLUDE REGEX "/kernels/cpu/linear\\.cpp$")
add_library(golinear_reference_kernels STATIC ${kernel_sources})
target_include_directories(golinear_reference_kernels PUBLIC ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(golinear_reference_kernels PUBLIC Threads::Threads)
if(OpenMP_CXX_FOUND)
  target_link_libraries(golinear_reference_kernels PUBLIC OpenMP::OpenMP_CXX)
endif()
# The CPU reference uses CBLAS: the system's OpenBLAS, or a carried copy
# (-DGOLINEAR_DEPS=<dir with include/cblas.h and lib/libopenblas.so.0>).
find_path(GOLINEAR_CBLAS_INCLUDE cblas.h PATHS ${GOLINEAR_DEPS}/include /usr/include/x86_64-linux-gnu/openblas-pthread)
find_library(GOLINEAR_OPENBLAS NAMES openblas libopenblas.so.0 PATHS ${GOLINEAR_DEPS}/lib)
target_include_directories(golinear_reference_kernels PUBLIC ${GOLINEAR_CBLAS_INCLUDE})
target_link_libraries(golinear_reference_kernels PUBLIC ${GOLINEAR_OPENBLAS})
target_link_directories(golinear_reference_kernels PUBLIC ${GOLINEAR_DEPS}/lib)
file(GLOB mixer_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/mixers/*.cpp)
add_library(golinear_reference_mixers STATIC ${mixer_sources})
target_link_libraries(golinear_reference_mixers PUBLIC golinear_reference_kernels)
set(GOLINEAR_CUDA_TEST_KERNELS golinear_reference_kernels)
set(GOLINEAR_CUDA_TEST_MIXERS golinear_reference_mixers)
# The GPU mixer (src/mixers/cuda) builds on the CPU mixers: here the reference ones.
add_library(golinear_mixers ALIAS golinear_reference_mixers)
include(${CMAKE_SOURCE_DIR}/src/kernels/cuda/cuda.cmake)

find_package(GTest QUIET)
if(NOT GTest_FOUND)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
  add_subdirectory(${GOLINEAR_GTEST_SOURCE} ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
  add_library(GTest::gtest ALIAS gtest)
  add_library(GTest::gtest_main ALIAS gtest_main)
endif()
include(GoogleTest)
enable_testing()
include(${CMAKE_SOURCE_DIR}/tests/kernels/cuda/cuda_tests.cmake)
