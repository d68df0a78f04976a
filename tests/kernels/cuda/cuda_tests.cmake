# GPU tests of kernels/cuda against the CPU reference, labelled `gpu` (`ctest -L gpu` on the GPU
# machine; CI without a GPU runs `ctest -LE gpu`). GOLINEAR_CUDA_TEST_KERNELS and
# GOLINEAR_CUDA_TEST_MIXERS name the libraries holding kernels/cpu and mixers.
# (name source libraries-variable) per test binary.
foreach(test IN ITEMS "kernels;cuda_kernels_test;GOLINEAR_CUDA_TEST_KERNELS"
                      "gated_delta;cuda_gated_delta_test;GOLINEAR_CUDA_TEST_KERNELS"
                      "attention;cuda_attention_test;GOLINEAR_CUDA_TEST_KERNELS"
                      "gated_linear;cuda_gated_linear_test;GOLINEAR_CUDA_TEST_KERNELS"
                      "ops;cuda_ops_test;GOLINEAR_CUDA_TEST_KERNELS")
  list(GET test 0 name)
  list(GET test 1 source)
  list(GET test 2 libraries)
  add_executable(test_${name}_cuda ${CMAKE_SOURCE_DIR}/tests/kernels/cuda/${source}.cpp)
  target_link_libraries(test_${name}_cuda PRIVATE golinear_cuda ${${libraries}}
    GTest::gtest GTest::gtest_main)
  gtest_discover_tests(test_${name}_cuda DISCOVERY_TIMEOUT 60 PROPERTIES LABELS gpu)
endforeach()
# The op table's optimizer row compares with train/optimizer.cpp's AdamW (plain C++, no library of
# its own on the GPU machine's build): compiled into the test.
target_sources(test_ops_cuda PRIVATE ${CMAKE_SOURCE_DIR}/src/train/optimizer.cpp)
