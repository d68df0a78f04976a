// The linearize pipeline (DESIGN.md §4): from a base checkpoint and a data file to a linearized
// checkpoint directory. Layers kept full (listed, or the K hardest / evenly spaced), the students
// (fresh, or --init from a linearized directory), attention transfer and/or end-to-end
// distillation, the report (linearization.json's "training"), all written in OUT.partial and
// renamed to OUT only when complete; an interrupted run resumes from OUT.partial. OUT holds the
// base checkpoint's files (copied, weights hard-linked) or, as an adapter, only the two
// linearization files and a reference to the base. A sweep trains
// several recipes against one teacher pass, each written as OUT/<name>. A recipe with nothing
// to train (e.g. --mixer none --no-conv) is written without any training loop.
//
// The trainers come from the caller (Trainers: the CPU ones, or the GPU ones of train/cuda,
// which this library does not link).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/json.h"
#include "io/packed_dataset.h"
#include "mixers/mixer_factory.h"
#include "model/linearization.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"
#include "train/train_loop.h"

namespace golinear::train {

// One recipe of a sweep (OUT/<name>).
struct SweepRecipe {
  std::string name;
  mixers::MixerOptions options;
  LayerBudgets budgets;           // per-layer sinks/windows (empty: the options' uniform ones)
  std::vector<int> keep_full_layers;
  int keep_full = 0;
  std::string select;
};

struct LinearizeOptions {
  std::string base, data, out;    // base checkpoint, training text, output directory
  mixers::MixerOptions mixer;
  LayerBudgets budgets;           // per-layer sinks/windows (empty: mixer.sinks, mixer.window)
  // Per-layer windows at the uniform total (train/exact_budget.h), allocated by a measured
  // signal: "sensitivity" (a probe of the uniform recipe, a quarter of the transfer steps then
  // half that end-to-end, and each of its layers' perplexity cost linearized alone:
  // analysis::layer_sensitivity), "probe" (the per-layer NMSE of a short uniform transfer run
  // first, an eighth of the steps), "hardness" (the teacher's), a finished run's directory (its
  // per-layer NMSE), or an analysis's summary.json (its first student's leave-one-layer-linearized
  // sensitivity).
  std::string window_signal;
  std::vector<int> keep_full;     // layers kept as softmax attention
  int keep_full_count = 0;        // K more layers kept as softmax, chosen by
  std::string select = "hard";    // "hard" (teacher hardness) | "uniform" (evenly spaced)
  long steps = 0;                 // attention-transfer steps (0: no transfer stage)
  int seq_len = 0, batch = 1;
  float lr = 3e-3f;
  uint64_t seed = 0;
  bool resume = false;            // continue OUT.partial from its last checkpoint
  std::string stage = "both";     // "transfer" | "e2e" | "both" (as recorded in the report)
  long e2e_steps = 0;             // end-to-end distillation steps (0: no distillation stage)
  float e2e_lr = 1e-3f;
  std::string init;               // start from the new parameters of this linearized directory
  LoraOptions lora;               // LoRA on q/k/v/o of the linearized layers, trained by the
                                  // end-to-end stage only (rank 0: none)
  std::string device = "cpu";     // recorded in the report; the trainers decide where they run
  bool adapter = false;           // OUT holds only linearization.{json,safetensors} and names
                                  // the base (model/linearization.h), no copy of its files
  long stop_after = 0;            // stop after this many steps as an interruption would (tests; 0: off)
  NanFault nan_fault;             // tests: a NaN gradient at a step and layer of each stage
  std::string sweep_path;         // the sweep file (recorded in the reports), with
  std::vector<SweepRecipe> sweep; // its recipes (empty: one run of the recipe above)
};

// The two stages' trainers, e.g. attention_transfer and distill_end_to_end (cpu_trainers()), and
// the measurement of a probe on the same device.
struct Trainers {
  std::function<Result<TrainReport>(const Model& teacher, MixerStack& students, const PackedDataset& data,
                                    const TrainOptions& options)>
      transfer;
  // `model` holds the teacher's mixers (restored on return); `lora`: the student's LoRA
  // adapters, trained with the mixers, or null.
  std::function<Result<TrainReport>(Model& model, MixerStack& students, const PackedDataset& data,
                                    const TrainOptions& options, LoraAdapters* lora)>
      end_to_end;
  // The probe's per-layer perplexity cost for --window-by sensitivity, with the trainers' device
  // (analysis::layer_sensitivity on the CPU, or its GPU twin analysis/cuda/analyze.h on the
  // trainers' GPU model): `teacher` holds the teacher's mixers (as they were on return).
  std::function<Result<std::vector<double>>(Model& teacher, MixerStack& student, const int32_t* tokens,
                                            long N, int T)>
      layer_sensitivity;
  std::string device = "cpu";  // where they run, for the messages
};
Trainers cpu_trainers();

struct LinearizeOutcome {
  bool finished = false;  // false: stopped by stop_after; OUT.partial holds the resume state
  std::string stopped;    // then what stopped where ("stopped after step 2 of 4; resume with --resume")
  Json summary;           // finished: {"out", "transfer", "e2e"} or, for a sweep, {"out", "recipes"}
};

// OUT must not exist, nor OUT.partial unless resuming (and then, for an adapter, not one begun
// without --adapter): checked by linearize too, and callable before loading the model to fail
// early.
Status linearize_check_output(const LinearizeOptions& options);

// Runs the pipeline on `model` (the base checkpoint options.base, its teacher mixers, which are
// back in place on return) and its tokenizer.
Result<LinearizeOutcome> linearize(const LinearizeOptions& options, Model& model, const Tokenizer& tokenizer,
                                   const Trainers& trainers);

}  // namespace golinear::train
