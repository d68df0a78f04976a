# GPU tests of kernels/cuda against the CPU reference, labelled `gpu` (`ctest -L gpu` on the GPU
# machine; CI without a GPU runs `ctest -LE gpu`). GOLINEAR_CUDA_TEST_KERNELS and
# GOLINEAR_CUDA_TEST_MIXERS name the libraries holding kernels/cpu and mixers.
add_executable(test_kernels_cuda ${CMAKE_SOURCE_DIR}/tests/kernels/cuda/cuda_kernels_test.cpp)
target_link_libraries(test_kernels_cuda PRIVATE golinear_cuda ${GOLINEAR_CUDA_TEST_KERNELS}
  GTest::gtest GTest::gtest_main)
gtest_discover_tests(test_kernels_cuda DISCOVERY_TIMEOUT 60 PROPERTIES LABELS gpu)

add_executable(test_hybrid_cuda ${CMAKE_SOURCE_DIR}/tests/kernels/cuda/cuda_hybrid_test.cpp)
target_link_libraries(test_hybrid_cuda PRIVATE golinear_cuda ${GOLINEAR_CUDA_TEST_MIXERS}
  GTest::gtest GTest::gtest_main)
gtest_discover_tests(test_hybrid_cuda DISCOVERY_TIMEOUT 60 PROPERTIES LABELS gpu)

add_executable(test_gated_delta_cuda ${CMAKE_SOURCE_DIR}/tests/kernels/cuda/cuda_gated_delta_test.cpp)
target_link_libraries(test_gated_delta_cuda PRIVATE golinear_cuda ${GOLINEAR_CUDA_TEST_KERNELS}
  GTest::gtest GTest::gtest_main)
gtest_discover_tests(test_gated_delta_cuda DISCOVERY_TIMEOUT 60 PROPERTIES LABELS gpu)

add_executable(test_attention_cuda ${CMAKE_SOURCE_DIR}/tests/kernels/cuda/cuda_attention_test.cpp)
target_link_libraries(test_attention_cuda PRIVATE golinear_cuda ${GOLINEAR_CUDA_TEST_KERNELS}
  GTest::gtest GTest::gtest_main)
gtest_discover_tests(test_attention_cuda DISCOVERY_TIMEOUT 60 PROPERTIES LABELS gpu)

add_executable(test_gated_linear_cuda ${CMAKE_SOURCE_DIR}/tests/kernels/cuda/cuda_gated_linear_test.cpp)
target_link_libraries(test_gated_linear_cuda PRIVATE golinear_cuda ${GOLINEAR_CUDA_TEST_KERNELS}
  GTest::gtest GTest::gtest_main)
gtest_discover_tests(test_gated_linear_cuda DISCOVERY_TIMEOUT 60 PROPERTIES LABELS gpu)
