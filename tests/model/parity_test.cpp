// Parity with Hugging Face transformers: the fixtures' reference_fp32.safetensors hold
// transformers' fp32 forward (input_ids, logits of the last positions, every hidden state of
// sequence 0). Both sides compute in fp32; they differ only in summation order (BLAS blocking,
// exp/pow implementations). Observed: max |ours − ref| ≤ 5e-7 · max |ref| on all four fixtures.
// Tolerance: 1e-5 · max(1, max |ref|) per tensor — 20× above what we observe, 400× below one
// bf16 rounding (4e-3), so a wrong op (a missing bias, a transposed weight, the wrong RoPE
// pairing or scaling) cannot pass.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include "io/safetensors.h"
#include "model/transformer.h"

namespace golinear {
namespace {

struct Reference {
  std::vector<int64_t> ids_shape;
  std::vector<int32_t> ids;
  std::vector<int64_t> logits_shape;
  std::vector<float> logits_tail;
  std::vector<std::vector<float>> hidden;
};

// Reads the fixture's reference tensors; a missing tensor or an unexpected dtype fails the test.
std::optional<Reference> read_reference(const std::string& path) {
  auto file = SafetensorsFile::open(path);
  if (!file.ok()) {
    ADD_FAILURE() << file.error();
    return std::nullopt;
  }
  Reference ref;
  const TensorView* ids = (*file)->find("input_ids");
  const TensorView* logits = (*file)->find("logits_tail");
  if (!ids || !logits || ids->dtype != DType::I64 || ids->shape.size() != 2 || logits->shape.size() != 3) {
    ADD_FAILURE() << path << ": input_ids (I64, [B, T]) or logits_tail ([B, n, V]) missing";
    return std::nullopt;
  }
  ref.ids_shape = ids->shape;
  for (int64_t i = 0; i < ids->numel(); ++i) {
    int64_t value;
    std::memcpy(&value, ids->data + 8 * i, 8);
    ref.ids.push_back((int32_t)value);
  }
  ref.logits_shape = logits->shape;
  ref.logits_tail.resize(logits->numel());
  if (!tensor_to_f32(*logits, ref.logits_tail.data(), path).ok()) return std::nullopt;
  for (int l = 0;; ++l) {
    const TensorView* hidden = (*file)->find(str_cat("hidden.", l));
    if (!hidden) break;
    ref.hidden.emplace_back(hidden->numel());
    if (!tensor_to_f32(*hidden, ref.hidden.back().data(), path).ok()) return std::nullopt;
  }
  return ref;
}

double max_abs(const float* a, long n) {
  double m = 0;
  for (long i = 0; i < n; ++i) m = std::max(m, (double)std::fabs(a[i]));
  return m;
}

void expect_close(const float* ours, const float* ref, long n, const std::string& what) {
  double worst = 0;
  for (long i = 0; i < n; ++i) {
    ASSERT_TRUE(std::isfinite(ours[i])) << what << " has a non-finite value at " << i;
    worst = std::max(worst, (double)std::fabs(ours[i] - ref[i]));
  }
  const double tolerance = 1e-5 * std::max(1.0, max_abs(ref, n));
  EXPECT_LE(worst, tolerance) << what;
  std::printf("  %-12s max|diff| %.3g (tolerance %.3g)\n", what.c_str(), worst, tolerance);
}

void check_parity(const std::string& model_dir, const std::string& reference_path) {
  auto model = model_load(model_dir);
  ASSERT_TRUE(model.ok()) << model.error();
  const Model& m = **model;
  std::optional<Reference> read = read_reference(reference_path);
  ASSERT_TRUE(read.has_value());
  const Reference& ref = *read;
  const int B = (int)ref.ids_shape[0], T = (int)ref.ids_shape[1];
  const int tail = (int)ref.logits_shape[1], V = (int)ref.logits_shape[2];
  ASSERT_EQ(V, m.config.vocab_size);
  ASSERT_EQ(ref.hidden.size(), (size_t)m.config.num_layers + 1);
  for (int b = 0; b < B; ++b) {
    std::vector<float> logits((long)T * V);
    ForwardTrace trace;
    trace.capture_hidden = (b == 0);
    model_forward(m, &ref.ids[(long)b * T], T, logits.data(), false, &trace);
    expect_close(&logits[(long)(T - tail) * V], &ref.logits_tail[(long)b * tail * V],
                 (long)tail * V, str_cat("logits[", b, "]"));
    if (b == 0) {
      ASSERT_EQ(trace.hidden.size(), ref.hidden.size());
      for (size_t l = 0; l < ref.hidden.size(); ++l)
        expect_close(trace.hidden[l].data(), ref.hidden[l].data(), (long)ref.hidden[l].size(),
                     str_cat("hidden.", l));
    }
  }
}

const std::string kFixtures = std::string(GOLINEAR_TEST_DATA) + "/fixtures/";

TEST(ModelParity, RandomLlama) {
  check_parity(kFixtures + "random-llama", kFixtures + "random-llama/reference_fp32.safetensors");
}
TEST(ModelParity, RandomQwen2) {
  check_parity(kFixtures + "random-qwen2", kFixtures + "random-qwen2/reference_fp32.safetensors");
}
TEST(ModelParity, RandomQwen3) {
  check_parity(kFixtures + "random-qwen3", kFixtures + "random-qwen3/reference_fp32.safetensors");
}
TEST(ModelParity, TinyLlama3Default) {
  check_parity(std::string(GOLINEAR_MODEL_DIR) + "/tiny-llama3-25m",
               kFixtures + "tiny-llama3-25m/reference_fp32.safetensors");
}

}  // namespace
}  // namespace golinear
