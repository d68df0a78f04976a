// The GPU twin of tests/model/trained_student_test.cpp: every linearized layer of the shipped
// student (models/tiny-llama3-25m-linear, the default recipe), on the GPU mixer with its trained
// parameters, gives at t < s + w exactly what mixer `none` (its exact branch, same conv taps)
// gives, bit for bit, in the inference forward and in decode. Label `gpu`.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/cuda/cuda_test_util.h"  // tests/kernels/cuda
#include "mixers/cuda/hybrid_mixer.h"
#include "mixers/hybrid_mixer.h"
#include "model/linearization.h"
#include "model/transformer.h"
#include "../trained_student.h"

namespace golinear {
namespace {

namespace kc = kernels::cuda;
using kc::bf16;
using mixers::cuda::GpuHybridMixer;
using mixers::cuda::HybridIO;
using mixers::cuda::HybridScratch;


template <class T>
T* device_copy(const std::vector<T>& host) {
  T* p = nullptr;
  cudaMalloc(&p, host.size() * sizeof(T));
  cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  return p;
}

// The inference forward and the decode steps of `cpu` run on the GPU over the same inputs.
void run_on_gpu(mixers::HybridMixer& cpu, const std::vector<float>& inv_freq, int T, bf16* x,
                bf16* q, bf16* k, bf16* v, std::vector<float>& forward, std::vector<float>& decode) {
  const mixers::AttentionShape shape = cpu.shape();
  const long P = mixers::cuda::hybrid_parameter_count(cpu.options(), shape);
  float *value = nullptr, *grad = nullptr;
  cudaMalloc(&value, std::max(P, 1L) * 4);
  cudaMalloc(&grad, std::max(P, 1L) * 4);
  auto mixer = GpuHybridMixer::create(cpu.options(), shape, inv_freq, value, grad);
  ASSERT_TRUE(mixer.ok()) << mixer.error();
  ASSERT_TRUE(mixer->upload(cpu, 0).ok());
  HybridScratch scratch;
  ASSERT_TRUE(scratch.reserve(HybridScratch::bytes(cpu.options(), shape, T, false)).ok());
  cublasHandle_t cublas;
  ASSERT_EQ(cublasCreate(&cublas), CUBLAS_STATUS_SUCCESS);
  const long row = (long)shape.H * shape.D;
  bf16 *y = nullptr, *ys = nullptr;
  cudaMalloc(&y, T * row * 2);
  cudaMalloc(&ys, T * row * 2);
  ASSERT_TRUE(mixer->forward(scratch, HybridIO{T, x, q, k, v}, y, nullptr, cublas, 0).ok());
  char* cache_memory = nullptr;
  cudaMalloc(&cache_memory, mixer->cache_bytes());
  auto view = mixer->cache_create(cache_memory, 0);
  ASSERT_TRUE(view.ok()) << view.error();
  kc::HybridCacheView* views = device_copy(std::vector<kc::HybridCacheView>{*view});
  for (int t = 0; t < T; ++t)
    ASSERT_TRUE(mixer->decode_step(ys + t * row, views, 1, x + (long)t * shape.C, q + t * row,
                                   k + (long)t * shape.G * shape.D, v + (long)t * shape.G * shape.D, 0)
                    .ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  forward = kernels::test::bf16_to_float(y, T * row);
  decode = kernels::test::bf16_to_float(ys, T * row);
  cublasDestroy(cublas);
  for (void* p : {(void*)value, (void*)grad, (void*)y, (void*)ys, (void*)cache_memory, (void*)views}) cudaFree(p);
}

TEST(GpuTrainedStudent, OutputIsTheExactBranchUntilATokenLeavesTheExactSet) {
  REQUIRE_GPU();
  auto model = model_load(test::kShippedStudent, ModelLoadParts::without_backbone);
  ASSERT_TRUE(model.ok()) << model.error();
  const mixers::AttentionShape shape = (*model)->attention_shape();
  int checked = 0;
  for (size_t l = 0; l < (*model)->mixers.size(); ++l) {
    auto* student = dynamic_cast<mixers::HybridMixer*>((*model)->mixers[l].get());
    if (!student) continue;
    const mixers::MixerOptions& o = student->options();
    auto exact_mixer = test::exact_branch_of(*student);
    mixers::HybridMixer& exact = *exact_mixer;
    const int n_exact = o.sinks + o.window, T = n_exact + 40;
    const long row = (long)shape.H * shape.D, kv = (long)shape.G * shape.D;
    std::mt19937_64 engine(100 + l);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    auto random_bf16 = [&](size_t n) {
      std::vector<float> v(n);
      for (float& e : v) e = normal(engine);
      return device_copy(kernels::test::to_bf16(v));
    };
    bf16 *x = random_bf16((size_t)T * shape.C), *q = random_bf16(T * row), *k = random_bf16(T * kv),
         *v = random_bf16(T * kv);
    std::vector<float> fs, ds, fe, de;
    run_on_gpu(*student, (*model)->inv_freq, T, x, q, k, v, fs, ds);
    run_on_gpu(exact, (*model)->inv_freq, T, x, q, k, v, fe, de);
    for (void* p : {(void*)x, (void*)q, (void*)k, (void*)v}) cudaFree(p);
    ASSERT_EQ(fs.size(), (size_t)T * row);
    ASSERT_EQ(fe.size(), (size_t)T * row);
    for (long i = 0; i < (long)n_exact * row; ++i) {
      ASSERT_EQ(fs[i], fe[i]) << "layer " << l << ", forward, position " << i / row;
      ASSERT_EQ(ds[i], de[i]) << "layer " << l << ", decode, position " << i / row;
    }
    double after = 0;
    for (long i = (long)n_exact * row; i < T * row; ++i) after = std::max(after, (double)std::fabs(fs[i] - fe[i]));
    EXPECT_GT(after, 1e-3) << "layer " << l << ": the linear branch never contributes";
    std::printf("layer %zu: s %d, w %d: exact to the bit at t < %d\n", l, o.sinks, o.window, n_exact);
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no linearized layer";
}

}  // namespace
}  // namespace golinear
