// The log-likelihood tasks of lm-evaluation-harness: each dataset row becomes one document of
// requests (context, continuation), built exactly as lm-eval's task configs build them
// (../shared/docs/EVAL.md). Nothing here touches a model.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "eval/task_rows.h"

namespace golinear::eval {

enum class LikelihoodTask { lambada, piqa, arc_easy, arc_challenge, hellaswag, winogrande, mmlu };

std::optional<LikelihoodTask> likelihood_task_from_name(const std::string& name);
const char* likelihood_task_name(LikelihoodTask task);

// One request: the model scores log p(continuation | context).
struct LikelihoodRequest {
  std::string context;
  std::string continuation;
};

// One dataset row: a request per choice (lambada: one request, the target).
struct LikelihoodDocument {
  std::vector<LikelihoodRequest> requests;
  std::vector<std::string> choices;  // choice texts without the leading space (acc_norm lengths)
  int label = 0;                     // index of the right choice
  std::string subject;               // mmlu only
};

// Row → document for one task; errors name the row ("FILE line N: field 'sol1' ...").
// piqa: goal/sol1/sol2/label. arc: question/choices{text,label}/answerKey (A–E or 1–4).
// hellaswag: activity_label/ctx_a/ctx_b/endings/label. winogrande: sentence/option1/option2/answer.
// lambada: text.
Result<LikelihoodDocument> piqa_document(const TaskRow& row);
Result<LikelihoodDocument> arc_document(const TaskRow& row);
Result<LikelihoodDocument> hellaswag_document(const TaskRow& row);
Result<LikelihoodDocument> winogrande_document(const TaskRow& row);
Result<LikelihoodDocument> lambada_document(const TaskRow& row);

// HellaSwag's text cleanup: strip, " [title]" → ". ", drop every "[...]" (no newline inside,
// shortest match), then one pass of "  " → " " (Python's str.replace).
std::string hellaswag_preprocess(const std::string& text);
// Python's str.capitalize: the first character upper-cased (title case), the rest lower-cased.
std::string python_capitalize(const std::string& text);
// Python's str.strip() for ASCII whitespace.
std::string python_strip(const std::string& text);

// MMLU (question/subject/choices[4]/answer as 0–3 or "A"–"D").
struct MmluRow {
  std::string question;
  std::string subject;              // e.g. "abstract_algebra"
  std::vector<std::string> choices; // 4
  int answer = 0;
};
Result<MmluRow> mmlu_row_parse(const TaskRow& row);

// lm-eval's MMLU prompt: the description naming the subject (underscores → spaces), the shots
// "{q}\nA. ..\nB. ..\nC. ..\nD. ..\nAnswer: X\n\n", then the question ending in "Answer:".
std::string mmlu_prompt(const std::vector<MmluRow>& shots, const MmluRow& question);

// Documents of the test rows, each with the first `num_fewshot` dev rows of its subject (file
// order, lm-eval's first_n sampler); continuations " A" .. " D". An error names a subject with
// too few dev rows.
Result<std::vector<LikelihoodDocument>> mmlu_documents(const std::vector<TaskRow>& test_rows,
                                                       const std::vector<TaskRow>& dev_rows,
                                                       int num_fewshot);

// Every row of a task other than mmlu, in data order.
Result<std::vector<LikelihoodDocument>> likelihood_documents(LikelihoodTask task,
                                                             const std::vector<TaskRow>& rows);

}  // namespace golinear::eval
