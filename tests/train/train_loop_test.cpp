// The one training loop: schedule, tail mean, checkpoints, interruption and resume, with a fake
// trainer whose loss at step s is s + 1.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "train/train_loop.h"

namespace golinear::train {
namespace {

struct FakeTrainer {
  long resume_from = 0;
  std::vector<long> steps_run, saves;
  std::vector<float> lrs;
  TrainLoop loop() {
    TrainLoop l;
    l.label = "fake";
    l.loss_name = "loss";
    l.tokens_per_step = 8;
    l.num_layers = 3;
    l.trained_layers = {{0, 2}};
    l.resume = [this]() -> Result<long> { return resume_from; };
    l.step = [this](long step, float lr) -> Result<std::vector<StepLoss>> {
      steps_run.push_back(step);
      lrs.push_back(lr);
      StepLoss loss;
      loss.loss = (double)(step + 1);
      loss.layer_loss = {2.0 * (step + 1), -5.0, 0.5};
      return std::vector<StepLoss>{loss};
    };
    l.save = [this](long done) -> Status {
      saves.push_back(done);
      return ok_status();
    };
    return l;
  }
};

TEST(TrainLoop, ScheduleTailAndCheckpoints) {
  TrainOptions options;
  options.steps = 20;
  options.warmup = 2;
  options.lr = 1e-2f;
  options.checkpoint_every = 5;
  FakeTrainer fake;
  auto reports = train_loop_run(options, fake.loop());
  ASSERT_TRUE(reports.ok()) << reports.error();
  const TrainReport& r = (*reports)[0];
  EXPECT_EQ(r.steps_done, 20);
  ASSERT_EQ(r.loss_curve.size(), 20u);
  EXPECT_EQ(r.loss_curve[19], 20.0);
  // Tail: the last 2 steps (losses 19, 20); layer 1 is not trained.
  EXPECT_DOUBLE_EQ(r.final_loss, 19.5);
  EXPECT_EQ(r.layer_nmse, (std::vector<double>{39.0, -1.0, 0.5}));
  EXPECT_EQ(fake.saves, (std::vector<long>{5, 10, 15, 20}));
  for (long s = 0; s < 20; ++s) EXPECT_EQ(fake.lrs[s], learning_rate_at(s, 20, 2, 1e-2f));
}

TEST(TrainLoop, StopAfterThenResumeRunsEveryStepOnce) {
  TrainOptions options;
  options.steps = 6;
  options.stop_after = 4;
  FakeTrainer first;
  auto stopped = train_loop_run(options, first.loop());
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ((*stopped)[0].steps_done, 4);
  EXPECT_EQ(first.saves.back(), 4);  // the interruption checkpoints
  FakeTrainer second;
  second.resume_from = 4;
  auto resumed = train_loop_run(options, second.loop());
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ((*resumed)[0].steps_done, 6);
  EXPECT_EQ(second.steps_run, (std::vector<long>{4, 5}));
  EXPECT_DOUBLE_EQ((*resumed)[0].final_loss, 6.0);  // tail: step 5 only
}

TEST(TrainLoop, AStepErrorEndsTheRun) {
  TrainOptions options;
  options.steps = 3;
  FakeTrainer fake;
  TrainLoop loop = fake.loop();
  loop.step = [](long step, float) -> Result<std::vector<StepLoss>> {
    return make_error("the loss became nan at step ", step + 1);
  };
  auto r = train_loop_run(options, loop);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "the loss became nan at step 1");
}

// A non-finite loss stops the run in the loop itself, for every trainer, before any save.
TEST(TrainLoop, ANonFiniteLossEndsTheRunBeforeItIsSaved) {
  TrainOptions options;
  options.steps = 4;
  options.checkpoint_every = 1;
  FakeTrainer fake;
  TrainLoop loop = fake.loop();
  loop.step = [](long step, float) -> Result<std::vector<StepLoss>> {
    return std::vector<StepLoss>{{step == 1 ? std::nan("") : 1.0, {}}};
  };
  auto r = train_loop_run(options, loop);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("became nan at step 2"), std::string::npos) << r.error();
  EXPECT_EQ(fake.saves, (std::vector<long>{1}));  // step 1 saved, step 2 never
}

}  // namespace
}  // namespace golinear::train

namespace golinear::train {
namespace {

// A non-finite gradient (reported by the trainer, which skipped the update) or a non-finite
// per-layer loss ends the run with one message naming step, layer and the checkpoint kept.
TEST(TrainLoop, ANonFiniteGradientNamesStepLayerAndTheKeptCheckpoint) {
  TrainOptions options;
  options.steps = 6;
  options.checkpoint_every = 2;
  options.state_path = "/runs/out.partial/transfer_state.safetensors";
  FakeTrainer fake;
  TrainLoop loop = fake.loop();
  loop.step = [](long step, float) -> Result<std::vector<StepLoss>> {
    StepLoss loss{1.0, {1.0, 1.0, 1.0}};
    if (step == 4) loss.nonfinite_gradient_layer = 2;
    return std::vector<StepLoss>{loss};
  };
  auto r = train_loop_run(options, loop);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "fake: the gradient of layer 2 became non-finite at step 5 (loss 1); the last "
                       "good checkpoint, step 4, is kept in /runs/out.partial/transfer_state.safetensors");
  EXPECT_EQ(fake.saves, (std::vector<long>{2, 4}));

  FakeTrainer overflow;  // every gradient finite, their norm not (GPU trainers)
  loop = overflow.loop();
  loop.step = [](long step, float) -> Result<std::vector<StepLoss>> {
    StepLoss loss{1.0, {1.0, 1.0, 1.0}};
    if (step == 2) loss.nonfinite_gradient_layer = kNonfiniteGradientNorm;
    return std::vector<StepLoss>{loss};
  };
  r = train_loop_run(options, loop);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "fake: the gradient norm overflowed at step 3 (every gradient finite, loss 1); "
                       "the last good checkpoint, step 2, is kept in "
                       "/runs/out.partial/transfer_state.safetensors");
  EXPECT_EQ(overflow.saves, (std::vector<long>{2}));

  FakeTrainer per_layer;
  loop = per_layer.loop();
  loop.step = [](long step, float) -> Result<std::vector<StepLoss>> {
    const double bad = step == 0 ? std::numeric_limits<double>::infinity() : 1.0;
    return std::vector<StepLoss>{{bad, {1.0, 1.0, bad}}};
  };
  r = train_loop_run(options, loop);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "fake: the loss of layer 2 became inf at step 1; no checkpoint was written before it");
  EXPECT_TRUE(per_layer.saves.empty());
}

}  // namespace
}  // namespace golinear::train
