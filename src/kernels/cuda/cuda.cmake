# The CUDA backend (included by the top-level CMakeLists.txt once nvcc is found, and by
# device_build.cmake on the GPU machine). Hopper only: sm_90a.
set(CMAKE_CUDA_ARCHITECTURES 90a)  # wmma bf16 needs sm_80+; the kernels are tuned for Hopper
enable_language(CUDA)
# C++20 as the rest (CMAKE_CXX_STANDARD), once for every CUDA source. CMake 3.25 knows no C++20
# flag for nvcc (it would refuse to configure, and without CMAKE_CUDA_STANDARD it takes the C++
# standard for CUDA too): it is told nvcc's own, -std=c++20 (nvcc ≥ 12).
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
find_package(CUDAToolkit REQUIRED)
file(GLOB GOLINEAR_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/kernels/cuda/*.cu)
add_library(golinear_cuda STATIC ${GOLINEAR_CUDA_SOURCES})
target_include_directories(golinear_cuda PUBLIC ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(golinear_cuda PUBLIC CUDA::cudart CUDA::cublas)
target_compile_options(golinear_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall --expt-relaxed-constexpr>)
target_compile_definitions(golinear_cuda PUBLIC GOLINEAR_HAVE_CUDA=1)

# The GPU parts of the higher boxes of DESIGN.md §8: src/<module>/cuda/*.{cu,cpp} becomes
# golinear_<module>_cuda on top of golinear_<module>, the kernels and the GPU boxes it may use
# (the dependency rule of DESIGN.md §8, as the CPU modules' links): (module GPU-boxes-below…).
# Full builds only, but for the mixers (the device build has no io/tokenizer dependencies).
set(GOLINEAR_CUDA_MODULE_LIBS "")
foreach(entry IN ITEMS "mixers" "model;mixers" "analysis;model;mixers" "train;model;mixers"
                       "runtime;model;mixers" "eval;runtime;model;mixers")
  list(POP_FRONT entry module)
  file(GLOB module_cuda_sources CONFIGURE_DEPENDS
       ${CMAKE_SOURCE_DIR}/src/${module}/cuda/*.cu ${CMAKE_SOURCE_DIR}/src/${module}/cuda/*.cpp)
  if(module_cuda_sources AND TARGET golinear_${module})
    set(below "")
    foreach(dep IN LISTS entry)
      if(TARGET golinear_${dep}_cuda)
        list(APPEND below golinear_${dep}_cuda)
      endif()
    endforeach()
    add_library(golinear_${module}_cuda STATIC ${module_cuda_sources})
    target_link_libraries(golinear_${module}_cuda PUBLIC golinear_${module} golinear_cuda ${below})
    target_compile_options(golinear_${module}_cuda PRIVATE
                           $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall --expt-relaxed-constexpr>)
    list(PREPEND GOLINEAR_CUDA_MODULE_LIBS golinear_${module}_cuda)
  endif()
endforeach()

# The benchmarks, a box apart from the boxes they measure: src/bench/cuda becomes
# golinear_benchmarks_cuda on top of the GPU boxes above, called by `golinear bench` (src/cli
# parses the options). The device build has only the kernels and the mixers: there it holds the
# mixer benchmark.
file(GLOB GOLINEAR_BENCH_CUDA_SOURCES CONFIGURE_DEPENDS
     ${CMAKE_SOURCE_DIR}/src/bench/cuda/*.cu ${CMAKE_SOURCE_DIR}/src/bench/cuda/*.cpp)
if(NOT TARGET golinear_model_cuda)
  list(FILTER GOLINEAR_BENCH_CUDA_SOURCES INCLUDE REGEX "/mixer_bench\\.cu$")
endif()
add_library(golinear_benchmarks_cuda STATIC ${GOLINEAR_BENCH_CUDA_SOURCES})
target_link_libraries(golinear_benchmarks_cuda PUBLIC golinear_cuda ${GOLINEAR_CUDA_MODULE_LIBS})
target_compile_options(golinear_benchmarks_cuda PRIVATE
                       $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall --expt-relaxed-constexpr>)

# The mixer table of ANCHORS.md without the rest of the CLI (same code as `golinear bench`).
add_executable(golinear_bench_cuda ${CMAKE_SOURCE_DIR}/bench/cuda/golinear_bench_cuda.cpp)
target_link_libraries(golinear_bench_cuda PRIVATE golinear_benchmarks_cuda)
