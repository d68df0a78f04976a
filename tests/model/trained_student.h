// The shipped student of the bundled model (models/tiny-llama3-25m-linear) as the exactness
// tests of tests/model/trained_student_test.cpp and its GPU twin read it.
#pragma once

#include <memory>
#include <string>

#include "mixers/hybrid_mixer.h"

namespace golinear::test {

inline const std::string kShippedStudent = std::string(GOLINEAR_MODEL_DIR) + "/tiny-llama3-25m-linear";

// Mixer `none` with the conv taps of `student`: its exact branch alone.
inline std::unique_ptr<mixers::HybridMixer> exact_branch_of(mixers::HybridMixer& student) {
  mixers::MixerOptions o = student.options();
  o.kind = mixers::MixerKind::none;
  auto exact = std::make_unique<mixers::HybridMixer>(o, student.shape(), 0);
  for (mixers::Parameter* p : exact->parameters())
    for (mixers::Parameter* q : student.parameters())
      if (q->name == p->name) p->value = q->value;
  return exact;
}

}  // namespace golinear::test
