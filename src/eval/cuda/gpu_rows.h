// The GPU model's forward for the log-likelihood tasks (eval/loglikelihood.h RowsForward): a
// pass's inputs packed into one forward (GpuForwardOptions::sequences: the per-token stages over
// all of them at once, each mixer per input), logits only of the rows that predict continuation
// tokens (GpuForwardOptions::logit_rows), downloaded in one copy.
#pragma once

#include "eval/loglikelihood.h"
#include "model/cuda/gpu_model.h"

namespace golinear::eval::cuda {

// `model` must outlive the returned forward.
eval::RowsForward gpu_rows_forward(golinear::model::cuda::GpuModel& model);

}  // namespace golinear::eval::cuda
