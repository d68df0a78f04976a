// The teacher's forward of `golinear analyze --device cuda`: golinear::model::cuda::gpu_model_trace (model/cuda/
// gpu_model.h) on the GPU in bf16, each layer's q and k (and x, v, y when students are compared)
// downloaded to the host as fp32 for analysis_run's diagnostics and the students' CPU mixers.
#pragma once

#include "analysis/analyze.h"
#include "model/cuda/gpu_model.h"

namespace golinear::analysis::cuda {

// `model` (every layer softmax attention, the teacher) must outlive the returned trace.
analysis::TeacherTrace gpu_teacher_trace(golinear::model::cuda::GpuModel& model);

}  // namespace golinear::analysis::cuda
