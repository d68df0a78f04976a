// The GPU transformer (model/cuda/gpu_model.h) against the CPU model (model/transformer.h).
//
// Models: the three fixture families (tests/data/fixtures/random-{llama,qwen2,qwen3}: their
// config.json with its family switches: Qwen2's qkv bias, Qwen3's q/k norm, rope theta), resized
// to head_dim 64 (the fixtures' own head dims 16 and 32 are below what the CUDA attention kernels
// compile, 64 and 128: that refusal is tested too) with random fp32 weights scaled to O(1)
// activations; the same host weights feed both models. Plus a llama with tied embeddings and
// llama3 RoPE scaling, and a linearized llama (default recipe, perturbed parameters).
//
// Tolerance: the GPU keeps weights and every activation except the residual stream in bf16
// (unit roundoff u = 2⁻⁹ ≈ 2e-3). Independent roundings add relative variance ≈ u²/3 ≈ 1.3e-6
// each; a two-layer forward has a few dozen rounding stages, so the logits' normalized MSE
// (Σ(g−c)²/Σc²) is expected near 1e-5…1e-4. We allow 2e-3 (3e-3 for the hybrid, whose gates,
// decays and state add stages): ≥ 10× margin, while a real defect (RoPE offset, a missing bias or
// norm, heads out of order) gives NMSE ≥ 1e-1. Argmax: ≥ 95% of rows agree (near-ties may flip).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>

#include "common/file.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_test_util.h"
#include "mixers/mixer_factory.h"
#include "mixers/softmax_mixer.h"
#include "model/cuda/gpu_model.h"
#include "model/cuda/random_models.h"
#include "model/linearization.h"
#include "model/transformer.h"

namespace golinear {
namespace {

using golinear::model::cuda::GpuLayerTrace;
using golinear::model::cuda::GpuModel;
using golinear::model::cuda::GpuSequenceCache;
using kernels::test::all_finite;
using kernels::test::bf16_to_float;
using kernels::test::compare;
using kernels::test::Comparison;

std::string fixtures_dir() {
  if (const char* env = std::getenv("GOLINEAR_GPU_FIXTURES")) return env;
  return std::string(GOLINEAR_TEST_DATA) + "/fixtures";
}

// A fixture family's config at head_dim 64: C 256, H 4, G 2, F 512, V 1024, L 2.
ModelConfig family_config(const std::string& fixture) {
  ModelConfig c;
  const std::string path = fixtures_dir() + "/" + fixture + "/config.json";
  auto read = model_config_read(path);
  if (read.ok()) {
    c = *read;
  } else {  // the fixture's switches, as in tests/data/fixtures (for runs without the folder)
    c.family = fixture == "random-qwen2" ? ModelFamily::qwen2
               : fixture == "random-qwen3" ? ModelFamily::qwen3 : ModelFamily::llama;
    c.qkv_bias = fixture == "random-qwen2";
    c.qk_norm = fixture == "random-qwen3";
    c.rope.theta = fixture == "random-llama" ? 1e4 : 1e6;
    c.rms_norm_eps = fixture == "random-llama" ? 1e-5 : 1e-6;
  }
  test::set_small_shape(c);
  return c;
}

void expect_logits_match(const Model& cpu, GpuModel& gpu, int T, double tol, const char* what) {
  const int V = cpu.config.vocab_size;
  const auto ids = test::test_tokens(T, V, 1);
  std::vector<float> want((size_t)T * V), got((size_t)T * V);
  model_forward(cpu, ids.data(), T, want.data());
  ASSERT_TRUE(gpu.forward(ids.data(), T, got.data(), false).ok());
  ASSERT_TRUE(all_finite(got)) << what;
  const Comparison e = compare(got.data(), want.data(), got.size());
  int agree = 0;
  for (int t = 0; t < T; ++t)
    agree += test::argmax_of(&got[(size_t)t * V], V) == test::argmax_of(&want[(size_t)t * V], V);
  std::printf("  %-34s logits nmse %.3e  max abs %.3e  argmax %d/%d\n", what, e.nmse, e.max_abs,
              agree, T);
  EXPECT_LT(e.nmse, tol) << what;
  EXPECT_GE(agree, (int)std::ceil(0.95 * T)) << what;
  // last_only returns the last row of the full forward.
  std::vector<float> last(V);
  ASSERT_TRUE(gpu.forward(ids.data(), T, last.data(), true).ok());
  EXPECT_LT(compare(last.data(), &got[(size_t)(T - 1) * V], V).nmse, 1e-8) << what;
}

class GpuModelFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuModelFamily, LogitsMatchCpu) {
  REQUIRE_GPU();
  const auto cpu = test::random_model(family_config(GetParam()), 11);
  auto gpu = golinear::model::cuda::gpu_model_upload(*cpu);
  ASSERT_TRUE(gpu.ok()) << gpu.error();
  expect_logits_match(*cpu, **gpu, 100, 2e-3, GetParam().c_str());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GpuModelFamily,
                         ::testing::Values("random-llama", "random-qwen2", "random-qwen3"));

TEST(GpuModel, TiedEmbeddingsLlama3Rope) {
  REQUIRE_GPU();
  ModelConfig c = family_config("random-llama");
  c.tie_word_embeddings = true;
  c.rope.type = "llama3";
  c.rope.theta = 500000.0;
  c.rope.factor = 8.0;
  c.rope.low_freq_factor = 1.0;
  c.rope.high_freq_factor = 4.0;
  c.rope.original_max_position = 64;  // small, so the scaled bands matter at these lengths
  const auto cpu = test::random_model(c, 12);
  auto gpu = golinear::model::cuda::gpu_model_upload(*cpu);
  ASSERT_TRUE(gpu.ok()) << gpu.error();
  expect_logits_match(*cpu, **gpu, 100, 2e-3, "llama tied + llama3 rope");
}

TEST(GpuModel, LinearizedLlamaMatchesCpu) {
  REQUIRE_GPU();
  for (const std::vector<int>& keep : {std::vector<int>{}, std::vector<int>{1}}) {
    auto cpu = test::random_model(family_config("random-llama"), 13);
    cpu->mixers = test::linearized_stack(*cpu, keep, 21);
    auto gpu = golinear::model::cuda::gpu_model_upload(*cpu);
    ASSERT_TRUE(gpu.ok()) << gpu.error();
    EXPECT_TRUE((*gpu)->has_hybrid_layers());
    EXPECT_EQ((*gpu)->has_softmax_layers(), !keep.empty());
    expect_logits_match(*cpu, **gpu, 100, 3e-3,
                        keep.empty() ? "linearized llama (all hybrid)" : "linearized llama (layer 1 full)");
  }
}

TEST(GpuModel, LinearizedQwen3MatchesCpu) {
  REQUIRE_GPU();
  auto cpu = test::random_model(family_config("random-qwen3"), 14);
  cpu->mixers = test::linearized_stack(*cpu, {}, 22);
  auto gpu = golinear::model::cuda::gpu_model_upload(*cpu);
  ASSERT_TRUE(gpu.ok()) << gpu.error();
  expect_logits_match(*cpu, **gpu, 90, 3e-3, "linearized qwen3");
}

// Greedy decode with the cache picks, at every step, the argmax of a full forward of the
// sequence so far (up to bf16 near-ties: the chosen token's full-forward logit is within 1% of
// the logits' spread of the maximum), and its logits match the full forward's last row.
void expect_greedy_matches(Model& cpu, const char* what) {
  auto gpu_r = golinear::model::cuda::gpu_model_upload(cpu);
  ASSERT_TRUE(gpu_r.ok()) << gpu_r.error();
  GpuModel& gpu = **gpu_r;
  // The prompt (P = 40 > sinks + window = 16) goes in by one forward that fills the cache.
  const int V = cpu.config.vocab_size, P = 40, steps = 26;
  auto cache_r = GpuSequenceCache::create(gpu, P + steps + 1);
  ASSERT_TRUE(cache_r.ok()) << cache_r.error();
  GpuSequenceCache& cache = **cache_r;
  std::vector<int32_t> seq = test::test_tokens(P, V, 5);
  std::vector<float> logits(V), full((size_t)V), cpu_last(V);
  ASSERT_TRUE(golinear::model::cuda::gpu_prefill(gpu, cache, seq.data(), P, logits.data()).ok());
  double worst = 0;
  int exact = 0;
  for (int step = 0; step < steps; ++step) {
    const int T = (int)seq.size();
    ASSERT_TRUE(gpu.forward(seq.data(), T, full.data(), true).ok());
    model_forward(cpu, seq.data(), T, cpu_last.data(), true);
    worst = std::max(worst, compare(logits.data(), cpu_last.data(), V).nmse);
    const int pick = test::argmax_of(logits.data(), V), best = test::argmax_of(full.data(), V);
    const auto [lo, hi] = std::minmax_element(full.begin(), full.end());
    EXPECT_GE(full[pick], full[best] - 0.01f * (*hi - *lo)) << what << " step " << step;
    exact += pick == best;
    int32_t next = -1;
    ASSERT_TRUE(golinear::model::cuda::gpu_decode(gpu, cache, pick, logits.data(), &next).ok());
    EXPECT_EQ(next, test::argmax_of(logits.data(), V));
    seq.push_back(pick);
  }
  EXPECT_EQ(cache.position(), (long)seq.size());
  std::printf("  %-34s greedy: %d/%d steps = full-forward argmax, worst step nmse vs CPU %.3e\n",
              what, exact, steps, worst);
  EXPECT_LT(worst, 3e-3) << what;
  EXPECT_GE(exact, steps - 2) << what;
}

// The hybrid prefill (chunked forward + hybrid_cache_fill) leaves the cache that T decode steps
// leave: the continuations from both caches agree with each other and with the CPU.
TEST(GpuModel, HybridPrefillFillsCacheAsSteps) {
  REQUIRE_GPU();
  for (const std::vector<int>& keep : {std::vector<int>{}, std::vector<int>{0}}) {
    auto cpu = test::random_model(family_config("random-llama"), 31);
    cpu->mixers = test::linearized_stack(*cpu, keep, 32);
    auto gpu_r = golinear::model::cuda::gpu_model_upload(*cpu);
    ASSERT_TRUE(gpu_r.ok()) << gpu_r.error();
    GpuModel& gpu = **gpu_r;
    const int V = cpu->config.vocab_size, steps = 8;
    for (int P : {2, 3, 15, 17, 53}) {  // around the sinks + window = 16 boundary and beyond
      const auto seq = test::test_tokens(P + steps, V, 7);
      auto fast = GpuSequenceCache::create(gpu, P + steps);
      auto slow = GpuSequenceCache::create(gpu, P + steps);
      ASSERT_TRUE(fast.ok() && slow.ok());
      std::vector<float> lf(V), ls(V), want((size_t)(P + steps) * V);
      Status st = golinear::model::cuda::gpu_prefill(gpu, **fast, seq.data(), P, lf.data());
      ASSERT_TRUE(st.ok()) << st.error();
      for (int t = 0; t < P; ++t)
        ASSERT_TRUE(golinear::model::cuda::gpu_decode(gpu, **slow, seq[t], ls.data(), nullptr).ok());
      model_forward(*cpu, seq.data(), P + steps, want.data());
      double worst_pair = compare(lf.data(), ls.data(), V).nmse, worst_cpu = 0;
      for (int t = P; t < P + steps; ++t) {
        ASSERT_TRUE(golinear::model::cuda::gpu_decode(gpu, **fast, seq[t], lf.data(), nullptr).ok());
        ASSERT_TRUE(golinear::model::cuda::gpu_decode(gpu, **slow, seq[t], ls.data(), nullptr).ok());
        worst_pair = std::max(worst_pair, compare(lf.data(), ls.data(), V).nmse);
        worst_cpu = std::max(worst_cpu, compare(lf.data(), &want[(size_t)t * V], V).nmse);
      }
      std::printf("  hybrid prefill P=%-3d (%s): fast vs steps nmse %.3e, vs CPU %.3e\n", P,
                  keep.empty() ? "all hybrid" : "layer 0 full", worst_pair, worst_cpu);
      EXPECT_LT(worst_pair, 1e-3) << "P " << P;
      EXPECT_LT(worst_cpu, 3e-3) << "P " << P;
    }
  }
}

TEST(GpuModel, GreedyDecodeSoftmax) {
  REQUIRE_GPU();
  auto cpu = test::random_model(family_config("random-qwen2"), 15);
  expect_greedy_matches(*cpu, "qwen2 (KV cache, flash prefill)");
}

TEST(GpuModel, GreedyDecodeHybridGraph) {
  REQUIRE_GPU();
  auto cpu = test::random_model(family_config("random-llama"), 16);
  cpu->mixers = test::linearized_stack(*cpu, {}, 23);
  expect_greedy_matches(*cpu, "linearized llama (graph step)");
}

TEST(GpuModel, GreedyDecodeMixed) {
  REQUIRE_GPU();
  auto cpu = test::random_model(family_config("random-qwen3"), 17);
  cpu->mixers = test::linearized_stack(*cpu, {0}, 24);
  expect_greedy_matches(*cpu, "qwen3, layer 0 full, layer 1 hybrid");
}

// The decode step of a model with softmax layers is a captured graph keyed by the split of the
// keys (attention_decode_split): steps across a change of the split (more keys than the
// first graph's splits cover) still match the CPU's full forward at every step. A stale graph
// would attend over the old split's keys only, leaving out the newest ones.
TEST(GpuModel, SoftmaxDecodeGraphFollowsTheKeySplit) {
  REQUIRE_GPU();
  auto cpu = test::random_model(family_config("random-llama"), 19);
  auto gpu_r = golinear::model::cuda::gpu_model_upload(*cpu);
  ASSERT_TRUE(gpu_r.ok()) << gpu_r.error();
  GpuModel& gpu = **gpu_r;
  const ModelConfig& c = cpu->config;
  const int V = c.vocab_size, P = 120, steps = 16;
  namespace kc = golinear::kernels::cuda;
  ASSERT_NE(kc::attention_decode_split(1, c.num_kv_heads, c.head_dim, P + 1),
            kc::attention_decode_split(1, c.num_kv_heads, c.head_dim, P + steps))
      << "the steps must cross a change of the split";
  auto cache_r = GpuSequenceCache::create(gpu, P + steps);
  ASSERT_TRUE(cache_r.ok()) << cache_r.error();
  const std::vector<int32_t> seq = test::test_tokens(P + steps, V, 9);
  std::vector<float> logits(V), want((size_t)(P + steps) * V);
  model_forward(*cpu, seq.data(), P + steps, want.data());
  ASSERT_TRUE(golinear::model::cuda::gpu_prefill(gpu, **cache_r, seq.data(), P, logits.data()).ok());
  double worst = compare(logits.data(), &want[(size_t)(P - 1) * V], V).nmse;
  for (int t = P; t < P + steps; ++t) {
    Status st = golinear::model::cuda::gpu_decode(gpu, **cache_r, seq[t], logits.data(), nullptr);
    ASSERT_TRUE(st.ok()) << st.error();
    const double e = compare(logits.data(), &want[(size_t)t * V], V).nmse;
    worst = std::max(worst, e);
    EXPECT_LT(e, 3e-3) << "position " << t;
  }
  std::printf("  softmax decode across the key split's change: worst nmse vs CPU %.3e\n", worst);
}

// gpu_decode_batch against gpu_decode of each sequence alone: four sequences at different
// positions (prompts of 3 to 40 tokens, across the sinks + window = 16 boundary), steps with the
// batch in several compositions and orders (all four, a reordered pair, one alone) so that the
// tables are rebuilt and several batch sizes' graphs are used. Each step's logits within
// normalized MSE 1e-4 of the lone step's (the products of B rows round differently from one
// row's; a row mixed up with another's cache or position gives ≥ 1e-1), the argmax token fed back.
TEST(GpuModel, BatchDecodeMatchesOneSequenceAtATime) {
  REQUIRE_GPU();
  for (const std::vector<int>& keep : {std::vector<int>{}, std::vector<int>{0}, std::vector<int>{0, 1}}) {
    auto cpu = test::random_model(family_config("random-qwen3"), 41);
    cpu->mixers = test::linearized_stack(*cpu, keep, 42);
    auto gpu_r = golinear::model::cuda::gpu_model_upload(*cpu);
    ASSERT_TRUE(gpu_r.ok()) << gpu_r.error();
    GpuModel& gpu = **gpu_r;
    const int V = cpu->config.vocab_size, N = 4;
    const int prompts[N] = {3, 17, 40, 9};
    std::vector<std::unique_ptr<GpuSequenceCache>> lone, batch;
    std::vector<int32_t> token(N);
    for (int b = 0; b < N; ++b) {
      auto a = GpuSequenceCache::create(gpu, 64), c = GpuSequenceCache::create(gpu, 64);
      ASSERT_TRUE(a.ok() && c.ok());
      lone.push_back(std::move(*a)), batch.push_back(std::move(*c));
      const auto prompt = test::test_tokens(prompts[b], V, 50 + b);
      std::vector<float> la(V), lb(V);
      ASSERT_TRUE(golinear::model::cuda::gpu_prefill(gpu, *lone[b], prompt.data(), prompts[b], la.data()).ok());
      ASSERT_TRUE(golinear::model::cuda::gpu_prefill(gpu, *batch[b], prompt.data(), prompts[b], lb.data()).ok());
      token[b] = test::argmax_of(la.data(), V);
    }
    const std::vector<std::vector<int>> steps = {{0, 1, 2, 3}, {0, 1, 2, 3}, {3, 1}, {2}, {1, 3, 0, 2}, {0, 1, 2, 3}};
    double worst = 0;
    for (const auto& rows : steps) {
      const int B = (int)rows.size();
      std::vector<GpuSequenceCache*> caches;
      std::vector<int32_t> ids, next(B);
      for (int b : rows) caches.push_back(batch[b].get()), ids.push_back(token[b]);
      std::vector<float> got((size_t)B * V), want(V);
      Status st = golinear::model::cuda::gpu_decode_batch(gpu, caches.data(), ids.data(), B, got.data(), next.data());
      ASSERT_TRUE(st.ok()) << st.error();
      for (int i = 0; i < B; ++i) {
        const int b = rows[i];
        ASSERT_TRUE(golinear::model::cuda::gpu_decode(gpu, *lone[b], token[b], want.data(), nullptr).ok());
        EXPECT_EQ(next[i], test::argmax_of(&got[(size_t)i * V], V));
        const double e = compare(&got[(size_t)i * V], want.data(), V).nmse;
        worst = std::max(worst, e);
        EXPECT_LT(e, 1e-4) << "sequence " << b << " at " << lone[b]->position();
        EXPECT_EQ(batch[b]->position(), lone[b]->position());
        token[b] = test::argmax_of(want.data(), V);
      }
    }
    std::printf("  batch decode (%zu layers softmax): worst nmse vs one at a time %.3e\n", keep.size(), worst);
    // The same cache twice in one batch is refused.
    GpuSequenceCache* twice[2] = {batch[0].get(), batch[0].get()};
    EXPECT_FALSE(golinear::model::cuda::gpu_decode_batch(gpu, twice, token.data(), 2, nullptr, nullptr).ok());
  }
}


// The bench's sequence (golinear bench --batches 1, both variants): a batch step of hybrid layers
// (graph captured, tables of its cache), that cache freed, the mixers changed, a new cache — which
// may take the freed one's address — decoded by gpu_decode_batch. Before the caches had serials
// and a mixer change dropped the graphs, the stale tables sent the full model's attention to the
// hybrid cache's rows (an illegal address on the H200). Each change's batch step is checked
// against gpu_decode of a cache of its own (within 1e-4 as above), and a cache made before a
// change is refused in one line, by both decodes and by a prefill.
TEST(GpuModel, BatchDecodeFollowsMixerChanges) {
  REQUIRE_GPU();
  auto cpu = test::random_model(family_config("random-qwen3"), 41);
  auto gpu_r = golinear::model::cuda::gpu_model_upload(*cpu);
  ASSERT_TRUE(gpu_r.ok()) << gpu_r.error();
  GpuModel& gpu = **gpu_r;
  const int V = cpu->config.vocab_size, T = 21;
  const auto prompt = test::test_tokens(T, V, 7);
  mixers::MixerOptions o;
  std::unique_ptr<GpuSequenceCache> stale;
  for (int change = 0; change < 4; ++change) {
    if (change % 2 == 0) {
      ASSERT_TRUE(gpu.set_all_hybrid_random(o, 11 + change).ok());
    } else {
      gpu.set_all_softmax();
    }
    if (stale) {
      int32_t id = 1;
      GpuSequenceCache* one[1] = {stale.get()};
      const Status batch = golinear::model::cuda::gpu_decode_batch(gpu, one, &id, 1, nullptr, nullptr);
      ASSERT_FALSE(batch.ok());
      EXPECT_NE(batch.error().find("changed"), std::string::npos) << batch.error();
      EXPECT_FALSE(golinear::model::cuda::gpu_decode(gpu, *stale, id, nullptr, nullptr).ok());
      auto fresh = GpuSequenceCache::create(gpu, 64);
      ASSERT_TRUE(fresh.ok());
      EXPECT_TRUE(golinear::model::cuda::gpu_prefill(gpu, **fresh, prompt.data(), T, nullptr).ok());
      stale.reset();
    }
    auto made_a = GpuSequenceCache::create(gpu, 64), made_b = GpuSequenceCache::create(gpu, 64);
    ASSERT_TRUE(made_a.ok() && made_b.ok());
    std::unique_ptr<GpuSequenceCache> lone = std::move(*made_a), batched = std::move(*made_b);
    std::vector<float> la(V), lb(V);
    ASSERT_TRUE(golinear::model::cuda::gpu_prefill(gpu, *lone, prompt.data(), T, la.data()).ok());
    ASSERT_TRUE(golinear::model::cuda::gpu_prefill(gpu, *batched, prompt.data(), T, lb.data()).ok());
    int32_t token = test::argmax_of(la.data(), V);
    for (int step = 0; step < 3; ++step) {
      GpuSequenceCache* one[1] = {batched.get()};
      std::vector<float> got(V), want(V);
      int32_t next = -1;
      Status st = golinear::model::cuda::gpu_decode_batch(gpu, one, &token, 1, got.data(), &next);
      ASSERT_TRUE(st.ok()) << "change " << change << ": " << st.error();
      ASSERT_TRUE(golinear::model::cuda::gpu_decode(gpu, *lone, token, want.data(), nullptr).ok());
      EXPECT_LT(compare(got.data(), want.data(), V).nmse, 1e-4) << "change " << change << " step " << step;
      EXPECT_EQ(next, test::argmax_of(got.data(), V));
      token = test::argmax_of(want.data(), V);
    }
    batched.reset();  // the tables' cache freed: the next change's caches may take its address
    stale = std::move(lone);
  }
}
// gpu_model_trace's x, q, k, v, y against the CPU ForwardTrace (capture_mixer_io).
TEST(GpuModel, TraceMatchesCpu) {
  REQUIRE_GPU();
  for (const char* fam : {"random-qwen2", "random-qwen3", "random-llama"}) {
    auto cpu = test::random_model(family_config(fam), 18);
    if (std::string(fam) == "random-llama") cpu->mixers = test::linearized_stack(*cpu, {1}, 25);
    auto gpu = golinear::model::cuda::gpu_model_upload(*cpu);
    ASSERT_TRUE(gpu.ok()) << gpu.error();
    const int T = 70;
    const auto ids = test::test_tokens(T, cpu->config.vocab_size, 3);
    ForwardTrace trace;
    trace.capture_mixer_io = true;
    model_forward(*cpu, ids.data(), T, nullptr, false, &trace);
    std::vector<GpuLayerTrace> layers;
    ASSERT_TRUE(golinear::model::cuda::gpu_model_trace(**gpu, ids.data(), T, &layers).ok());
    ASSERT_EQ(layers.size(), trace.layers.size());
    for (size_t l = 0; l < layers.size(); ++l) {
      const auto& want = trace.layers[l];
      const std::pair<const kernels::cuda::bf16*, const std::vector<float>*> parts[] = {
          {layers[l].x, &want.x}, {layers[l].q, &want.q}, {layers[l].k, &want.k},
          {layers[l].v, &want.v}, {layers[l].y, &want.y}};
      const char* names = "xqkvy";
      for (int i = 0; i < 5; ++i) {
        const auto got = bf16_to_float(parts[i].first, parts[i].second->size());
        ASSERT_TRUE(all_finite(got));
        const Comparison e = compare(got.data(), parts[i].second->data(), got.size());
        EXPECT_LT(e.nmse, 2e-3) << fam << " layer " << l << " " << names[i];
        if (i == 4) std::printf("  trace %-14s layer %zu y nmse %.3e\n", fam, l, e.nmse);
      }
    }
  }
}

TEST(GpuModel, RefusesWhatTheKernelsDoNotImplement) {
  REQUIRE_GPU();
  {  // a state kind the GPU does not run
    auto cpu = test::random_model(family_config("random-llama"), 19);
    mixers::MixerOptions o;
    o.kind = mixers::MixerKind::gla;
    auto stack = linearized_mixers(*cpu, o, {}, 1);
    ASSERT_TRUE(stack.ok());
    cpu->mixers = std::move(*stack);
    auto gpu = golinear::model::cuda::gpu_model_upload(*cpu);
    ASSERT_FALSE(gpu.ok());
    EXPECT_NE(gpu.error().find("CPU only"), std::string::npos) << gpu.error();
  }
  // The fixtures themselves (head_dim 16 and 32).
  const std::string dir = fixtures_dir() + "/random-llama";
  if (!file_exists(dir + "/config.json")) GTEST_SKIP() << "no fixtures at " << dir;
  auto cpu = model_load(dir);
  ASSERT_TRUE(cpu.ok()) << cpu.error();
  auto gpu = golinear::model::cuda::gpu_model_upload(**cpu);
  ASSERT_FALSE(gpu.ok());
  EXPECT_NE(gpu.error().find("head_dim"), std::string::npos) << gpu.error();
}

// The random-weight model of a config builds and runs (finite logits; greedy steps agree with
// full forwards) without host weights.
TEST(GpuModel, RandomConfigModelRuns) {
  REQUIRE_GPU();
  ModelConfig c = family_config("random-llama");
  c.rope.type = "llama3";
  c.rope.factor = 8.0;
  c.rope.original_max_position = 64;
  auto gpu = golinear::model::cuda::gpu_model_random(c, 3);
  ASSERT_TRUE(gpu.ok()) << gpu.error();
  const int T = 40, V = c.vocab_size;
  const auto ids = test::test_tokens(T, V, 9);
  std::vector<float> logits((size_t)T * V);
  Status st = (*gpu)->forward(ids.data(), T, logits.data(), false);
  ASSERT_TRUE(st.ok()) << st.error();
  ASSERT_TRUE(all_finite(logits));
  double ss = 0;
  for (float x : logits) ss += (double)x * x;
  EXPECT_GT(ss, 0.0);
  mixers::MixerOptions o;
  ASSERT_TRUE((*gpu)->set_all_hybrid_random(o, 5).ok());
  st = (*gpu)->forward(ids.data(), T, logits.data(), false);  // the scratch gains the hybrid workspace
  ASSERT_TRUE(st.ok()) << st.error();
  ASSERT_TRUE(all_finite(logits));
  auto cache = GpuSequenceCache::create(**gpu, 64);
  ASSERT_TRUE(cache.ok());
  std::vector<float> step(V);
  st = golinear::model::cuda::gpu_prefill(**gpu, **cache, ids.data(), T, step.data());
  ASSERT_TRUE(st.ok()) << st.error();
  EXPECT_LT(compare(step.data(), &logits[(size_t)(T - 1) * V], V).nmse, 3e-3);
}

// LoRA adapters (model/lora.h) run unmerged on the GPU (model/cuda/lora.h): a linearized model
// with adapters on q/k/v/o of its hybrid layers (B moved off 0, scale 2) gives the CPU's
// unmerged logits, by the whole forward and by greedy decode; with B = 0 the GPU logits equal
// those of the same model without adapters. The tolerance is the linearized model's (3e-3): the
// deltas add two thin bf16 GEMMs, u = x Aᵀ rounded to bf16; a dropped or mis-scaled delta (the
// deltas here move the CPU logits by nmse ≳ 1e-2) fails.
void add_lora(Model& cpu, uint64_t seed, bool zero_b = false) {
  std::vector<bool> adapted;
  for (const auto& m : cpu.mixers) adapted.push_back(m->kind() != "softmax");
  LoraOptions o;
  o.rank = 8;
  o.alpha = 16.0f;
  auto lora = lora_create(cpu, o, adapted, seed);
  ASSERT_TRUE(lora.ok()) << lora.error();
  cpu.lora = std::move(*lora);
  if (zero_b) return;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (mixers::Parameter* p : cpu.lora.parameters())
    if (p->name.back() == 'B')
      for (float& x : p->value) x = 0.1f * normal(rng);
}

TEST(GpuModel, LoraLogitsMatchTheCpu) {
  REQUIRE_GPU();
  for (const char* family : {"random-llama", "random-qwen3"}) {
    auto cpu = test::random_model(family_config(family), 41);
    cpu->mixers = test::linearized_stack(*cpu, {1}, 25);
    const int T = 90, V = cpu->config.vocab_size;
    const auto ids = test::test_tokens(T, V, 1);
    std::vector<float> without((size_t)T * V), with((size_t)T * V);
    model_forward(*cpu, ids.data(), T, without.data());
    add_lora(*cpu, 3);
    model_forward(*cpu, ids.data(), T, with.data());
    const double moved = compare(with.data(), without.data(), with.size()).nmse;
    std::printf("  %s: LoRA moves the CPU logits by nmse %.3e\n", family, moved);
    EXPECT_GT(moved, 1e-2);
    auto gpu = golinear::model::cuda::gpu_model_upload(*cpu);
    ASSERT_TRUE(gpu.ok()) << gpu.error();
    ASSERT_NE((*gpu)->lora(), nullptr);
    expect_logits_match(*cpu, **gpu, T, 3e-3, family);
    expect_greedy_matches(*cpu, family);
  }
}

TEST(GpuModel, LoraWithZeroBLeavesTheLogits) {
  REQUIRE_GPU();
  auto cpu = test::random_model(family_config("random-qwen2"), 42);
  cpu->mixers = test::linearized_stack(*cpu, {}, 26);
  const int T = 64, V = cpu->config.vocab_size;
  const auto ids = test::test_tokens(T, V, 2);
  std::vector<float> plain((size_t)T * V), adapted((size_t)T * V);
  auto base = golinear::model::cuda::gpu_model_upload(*cpu);
  ASSERT_TRUE(base.ok()) << base.error();
  ASSERT_TRUE((*base)->forward(ids.data(), T, plain.data(), false).ok());
  add_lora(*cpu, 4, /*zero_b=*/true);
  auto gpu = golinear::model::cuda::gpu_model_upload(*cpu);
  ASSERT_TRUE(gpu.ok()) << gpu.error();
  ASSERT_TRUE((*gpu)->forward(ids.data(), T, adapted.data(), false).ok());
  // + u·0ᵀ adds exact zeros into the fp32 accumulators: equal up to run-to-run noise, if any.
  EXPECT_LT(compare(adapted.data(), plain.data(), plain.size()).nmse, 1e-12);
}

}  // namespace
}  // namespace golinear
