// Causal softmax attention on the GPU with grouped kv heads and the hybrid's sink + window mask
// (same semantics as kernels/cpu/attention.h: window < 0 is full causal attention, otherwise query
// t sees E_t = {j < sinks} ∪ {t − window < j ≤ t}).
//
// Full causal (D 64, 128): Hopper kernels (attention_wgmma.cu: wgmma, TMA, a producer warpgroup
// and two consumer warpgroups), forward and backward. The sink + window mask: flash-style (64
// queries × 64 keys tiles, mma.sync on tensor cores with scores and accumulators in registers,
// online softmax in fp32), visiting only the key blocks (and, per warp, the 16-key sub-blocks) the
// mask allows, so the sink + window branch costs O(T·(s+w)); the mixed epilogue likewise.
// Backward: deterministic, no atomics: one kernel for dq (query-parallel), one for dk, dv
// (key-parallel, summing the group's heads), sink keys split over query chunks and reduced in order.
// Decode: one query per head over a KV cache, split over the keys and combined (flash decoding),
// each key row read once per kv head for its group of query heads; one sequence or a batch.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_common.h"

namespace golinear::kernels::cuda {

struct AttentionMaskSpec {
  int sinks = 0;
  int window = -1;  // < 0: full causal
};

// y (T, H, D) bf16 = softmax(q kᵀ/√D) v; q (T, H, D), k, v (T, G, D) bf16, already RoPE'd;
// lse (T, H) fp32 or null receives the log-sum-exp of each row (for a backward).
Status attention_forward(bf16* y, float* lse, const bf16* q, const bf16* k, const bf16* v, int T,
                         int H, int G, int D, AttentionMaskSpec mask, cudaStream_t stream);

// A gate that needs the attention's own lse (the hybrid's gate-lse and split mixes): λ =
// σ(z − c_lse[h]·lse_t,h [+ a_far[h]·log n_far(t)]) with z the λ-logit (+ b_λ) given per row,
// n_far(t) = t − far_start + 1 and λ = 0 where that is ≤ 0 (far_start < 0: no far term). The
// lse goes to `lse` (T, H) too.
struct AttentionMixGate {
  const float* c_lse = nullptr;  // (H); null: the rows hold λ itself
  const float* a_far = nullptr;  // (H), with far_start ≥ 0
  int far_start = -1;
  float* lse = nullptr;          // (T, H) scratch for the rows' lse
};

// The hybrid's exact branch with its mix gate fused into the epilogue: y (T, H, D) bf16 holds
// y_lin on entry for rows t ≥ lin_from (rows before are not read: y_lin = 0 there) and leaves
// with (1 − λ) · attn + λ · y_lin, λ = lambda (T, H) fp32 (or computed from it as `gate` says);
// attn rounded to bf16 before the mix (the arithmetic of the unfused exact branch → mix gate).
// In place, row by row.
Status attention_forward_mixed(bf16* y, const float* lambda, int lin_from, const bf16* q,
                               const bf16* k, const bf16* v, int T, int H, int G, int D,
                               AttentionMaskSpec mask, cudaStream_t stream,
                               const AttentionMixGate& gate = {});

// The backward of attention_forward with the same mask. dy (T, H, D) fp32 is the gradient of y; y and
// lse are what the forward returned. dq (T, H, D), dk, dv (T, G, D) fp32 are WRITTEN (=), dk/dv
// summed over the query heads of each group. Flash-style: recomputes the probabilities from lse,
// visits only the key blocks the mask allows (O(T·(s+w)) for the sink + window mask).
// dlse (T, H) fp32 or null: a gradient of the lse output too (∂lse/∂s_j = p_j; the hybrid's
// gate-lse mix reads the lse).
size_t attention_backward_workspace_bytes(int T, int H, int G, int D);
Status attention_backward(float* dq, float* dk, float* dv, const float* dy, const bf16* y,
                          const float* lse, const bf16* q, const bf16* k, const bf16* v, int T,
                          int H, int G, int D, AttentionMaskSpec mask, void* workspace,
                          size_t workspace_bytes, cudaStream_t stream,
                          const float* dlse = nullptr);

// Bytes of scratch attention_decode(_batch) needs for B sequences of up to max_length keys.
size_t attention_decode_workspace_bytes(int B, int H, int G, int D, long max_length);

// How attention_decode(_batch) splits the keys of B sequences of up to max_length keys: every
// launch it makes is a function of B, the heads and this split alone (the lengths are read on the
// device), so a captured graph of a decode step stays valid while the split does.
struct AttentionDecodeSplit {
  int splits = 0, split_keys = 0;
  bool operator==(const AttentionDecodeSplit&) const = default;
};
AttentionDecodeSplit attention_decode_split(int B, int G, int D, long max_length);

// One query per head over a KV cache: y (H, D) bf16 from q (H, D), k, v (context, G, D) bf16.
// H / G ≤ 8.
Status attention_decode(bf16* y, const bf16* q, const bf16* k, const bf16* v, long context, int H,
                        int G, int D, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream);

// The same for B sequences in one launch pair: y (B, H, D) from q (B, H, D), sequence b over
// keys [0, lengths[b]) of its cache k_rows[b], v_rows[b] ((·, G, D) bf16 each). k_rows, v_rows,
// lengths (B): device arrays; max_length ≥ every length (it sizes the split of the keys, so the
// result of a sequence depends on it and on B only through the order of the splits' sums).
Status attention_decode_batch(bf16* y, const bf16* q, const bf16* const* k_rows,
                              const bf16* const* v_rows, const long* lengths, int B,
                              long max_length, int H, int G, int D, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream);

// Row b of k, v (B, G, D) bf16 written to row positions[b] of k_rows[b], v_rows[b] (the decode
// step's new key and value of each sequence; positions a device array).
Status kv_cache_append(bf16* const* k_rows, bf16* const* v_rows, const bf16* k, const bf16* v,
                       const long* positions, int B, int G, int D, cudaStream_t stream);

}  // namespace golinear::kernels::cuda
