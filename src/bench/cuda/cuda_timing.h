// Timing of GPU work for the benchmarks (mixer_bench, model_bench): CUDA events
// recorded on a stream around each call, medians of the per-call milliseconds.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_common.h"

namespace golinear::bench::cuda {

// Milliseconds of each of `repeats` calls of f after `warmups` untimed calls, with CUDA events
// recorded on `stream` before and after each call. An error of f is returned once its stop event
// has completed (the stream is idle again, e.g. after an out-of-memory refusal).
inline Result<std::vector<double>> time_runs(const std::function<Status()>& f, int warmups,
                                             int repeats, cudaStream_t stream) {
  if (repeats < 1) return make_error("time_runs: repeats must be at least 1, got ", repeats);
  for (int i = 0; i < warmups; ++i) GL_TRY(f());
  GL_CUDA_CHECK(cudaStreamSynchronize(stream));
  struct Events {
    cudaEvent_t start = nullptr, stop = nullptr;
    ~Events() {  // nothing to report from a destructor
      if (start) cudaEventDestroy(start);
      if (stop) cudaEventDestroy(stop);
    }
  } ev;
  GL_CUDA_CHECK(cudaEventCreate(&ev.start));
  GL_CUDA_CHECK(cudaEventCreate(&ev.stop));
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    GL_CUDA_CHECK(cudaEventRecord(ev.start, stream));
    Status st = f();
    GL_CUDA_CHECK(cudaEventRecord(ev.stop, stream));
    GL_CUDA_CHECK(cudaEventSynchronize(ev.stop));
    GL_TRY(st);
    float t = 0;
    GL_CUDA_CHECK(cudaEventElapsedTime(&t, ev.start, ev.stop));
    ms.push_back(t);
  }
  return ms;
}

// The median of v (the upper one of an even count); v must not be empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median milliseconds of `repeats` timed calls of f after `warmups` (time_runs).
inline Result<double> time_median(const std::function<Status()>& f, int warmups, int repeats,
                                  cudaStream_t stream) {
  GL_ASSIGN_OR_RETURN(std::vector<double> ms, time_runs(f, warmups, repeats, stream));
  return median(std::move(ms));
}

}  // namespace golinear::bench::cuda
