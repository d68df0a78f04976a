// The GPU model's forward for the log-likelihood tasks (eval/loglikelihood.h RowsForward): one
// forward of a request group's input from position 0, logits on the device, and only the rows
// that predict continuation tokens downloaded.
#pragma once

#include "eval/loglikelihood.h"
#include "model/cuda/gpu_model.h"

namespace golinear::eval::cuda {

// `model` must outlive the returned forward.
eval::RowsForward gpu_rows_forward(golinear::model::cuda::GpuModel& model);

}  // namespace golinear::eval::cuda
