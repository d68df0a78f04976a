#!/bin/bash
# Ready for session 13 (issue 17): racecheck of the 36 tests of the five binaries that session 12
# left (docs/results/racecheck_passed.txt has the 54 done), all five at once until 560 s; run it
# in as many calls as it takes, appending each call's $OUT/racecheck_passed.txt to the docs file.
cd "$(dirname "$0")/../.."
source scripts/device/setup.sh
export T0 R
taskset -c 0-15 scripts/device/racecheck_resume.sh 560 test_eval_cuda test_mixers_cuda \
  test_gated_delta_cuda test_model_cuda test_train_cuda
echo "total $(el) s" >> $R
