// The diagnostics of DESIGN.md §5 as plain reference functions on raw pointers: key
// concentration, projection residual, teacher attention mass on the sinks, normalized MSE of a
// mixer against the teacher, Spearman rank correlation, the per-layer hardness score and the
// choice of the layers a hybrid keeps as full softmax.
//
// Layout: row-major, time first. Dimension letters: T time, H query heads, G kv heads, D head
// dim, L layers. Positions are 0-based in code: "t" below is the row index, and the running mean
// at row t averages the t + 1 keys of rows 0..t (DESIGN.md's 1-based (1/t)Σ_{j≤t}).
//
// Which keys: the diagnostics read the teacher's unit keys k̂ = k/sqrt(‖k‖² + ε) of the frozen
// k_proj output (after bias and Qwen3's k_norm, before RoPE), one stream per kv head. The hybrid's
// linear branch reads the same quantity after its short convolution, which is the identity at
// initialisation; using the teacher's keys makes the diagnostics a property of the teacher alone,
// available before any student is trained (what `--select hard` needs).
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace golinear::analysis {

// ε of the unit norm, as the hybrid's linear branch (mixers/hybrid_mixer.h).
inline constexpr double kUnitNormEps = 1e-6;

// k_hat (T, G, D) = k / sqrt(‖k‖² + ε) per token and kv head; k (T, G, D). May alias.
void unit_keys(float* k_hat, const float* k, int T, int G, int D);

// Key concentration c (T, G): c_t = ‖(1/(t+1)) Σ_{j≤t} k̂_j‖ ∈ [0, 1], the length of the
// running mean of the unit keys. 1 when every key points the same way, 1/sqrt(t+1) for
// orthonormal keys. k_hat (T, G, D) unit keys.
void key_concentration(float* concentration, const float* k_hat, int T, int G, int D);

// Projection residual r (T, G), DESIGN.md §5 taken literally:
//
//   r_t = ‖(k̂_t − k̄_t) − (I − Π_{k̄_t}) k̂_t‖ / ‖k̂_t − k̄_t‖,   Π_u = u uᵀ / ‖u‖²,
//
// with k̄_t = (1/(t+1)) Σ_{j≤t} k̂_j the running mean (current key included).
// What it measures: (I − Π_{k̄}) k̂_t is the part of the key that the rank-1 projection away from
// the mean direction keeps; since (I − Π)k̄ = 0 it equals (I − Π)(k̂_t − k̄_t), the component of
// the key's deviation from the mean orthogonal to k̄. The numerator is what that rank-1 picture
// misses, Π(k̂_t − k̄_t) = Πk̂_t − k̄_t, the deviation along the mean direction itself, so
// r_t = |cos ∠(k̂_t − k̄_t, k̄_t)| ∈ [0, 1]: 0 when the key departs from the mean only sideways
// (a cone of keys around the mean, orthonormal keys), 1 when it moves only along the mean
// (keys that differ by how much they agree with the mean, e.g. two opposite clusters).
// Conventions for the degenerate cases: Π = 0 when ‖k̄_t‖ < 1e-12 (no mean direction), and
// r_t = 0 when ‖k̂_t − k̄_t‖ < 1e-9 (the key is the mean: nothing to explain, e.g. t = 0 or all
// keys equal). k_hat (T, G, D) unit keys.
void projection_residual(float* residual, const float* k_hat, int T, int G, int D);

// The teacher's attention probabilities of causal softmax(RoPE(q)·RoPE(k)/√D), summed per query
// over two key sets: sink_mass (T, H) over the first `sinks` keys j < sinks (the sink tokens of
// the hybrid), far_mass (T, H) over the keys the hybrid's exact branch does not see,
// {sinks ≤ j ≤ t − window} (the mass its linear branch and gate must carry); far_mass may be null.
// q (T, H, D) and k (T, G, D) before RoPE, as a ForwardTrace records them; inv_freq (D/2);
// query head h reads kv head h / (H / G).
void attention_mass(float* sink_mass, float* far_mass, const float* q, const float* k,
                    const float* inv_freq, int T, int H, int G, int D, int sinks, int window);

// Normalized MSE Σ(s − t)² / Σ t² over n values (0 when the teacher is all zeros and s equals it).
double nmse(const float* student, const float* teacher, long n);

// Per row of `width` values: squared_error[i] += Σ(s − t)², reference[i] += Σ t², for
// `rows` rows; student, teacher (rows, width). Tokenwise NMSE is squared_error / reference
// after summing over sequences (and over heads, when a row is one head).
void accumulate_squared_error(double* squared_error, double* reference, const float* student,
                              const float* teacher, long rows, long width);

// Ranks 1..n of x, ties given the mean of the ranks they span (x = {10, 20, 20, 5} → {2, 3.5,
// 3.5, 1}).
std::vector<double> ranks_with_ties(const std::vector<double>& x);

// Spearman's rank correlation: Pearson correlation of ranks_with_ties(a) and ranks_with_ties(b).
// NaN when the sizes differ, n < 2, or either side is constant.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

// (rank − 1) / (n − 1) ∈ [0, 1] with tied ranks averaged: the smallest value 0, the largest 1;
// 0.5 for every element when n == 1.
std::vector<double> rank_normalize(const std::vector<double>& x);

// Hardness of each layer (L): the mean of rank-normalized terms, each oriented so that larger is
// harder:
//   teacher only (nmse empty):  h_l = ( rn(−c̄)_l + rn(r̄)_l ) / 2
//   with a student:             h_l = ( rn(−c̄)_l + rn(r̄)_l + rn(nmse)_l ) / 3
// c̄, r̄ (L): the layer's mean key concentration and projection residual (over sequences, kv heads
// and positions), nmse (L): the layer's NMSE of a student against the teacher; rn =
// rank_normalize. Ranks make the terms comparable whatever their scales. ∈ [0, 1].
std::vector<double> layer_hardness(const std::vector<double>& concentration,
                                   const std::vector<double>& residual,
                                   const std::vector<double>& nmse = {});

// The K layers a hybrid keeps as full softmax, in ascending order, for L = hardness.size():
//   "hard":    the K largest hardness values (ties: the lower layer index first);
//   "uniform": evenly spaced, layer floor((i + 0.5) · L / K) for i = 0..K−1, the layer holding the
//              midpoint of the i-th of K equal parts of [0, L) (L = 8: K = 1 → {4}, K = 2 → {2, 6},
//              K = 3 → {1, 4, 6}, K = 4 → {1, 3, 5, 7}); hardness is not read.
// Errors: K < 0 or K > L, an unknown method, NaN hardness with "hard".
Result<std::vector<int>> select_full_layers(const std::vector<double>& hardness, int K,
                                            const std::string& method);

}  // namespace golinear::analysis
