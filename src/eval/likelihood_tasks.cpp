#include "eval/likelihood_tasks.h"
#include "eval/text_util.h"

#include <map>
#include <utf8proc.h>

namespace golinear::eval {

std::optional<LikelihoodTask> likelihood_task_from_name(const std::string& name) {
  static const std::map<std::string, LikelihoodTask> tasks = {
      {"lambada", LikelihoodTask::lambada},       {"piqa", LikelihoodTask::piqa},
      {"arc_easy", LikelihoodTask::arc_easy},     {"arc_challenge", LikelihoodTask::arc_challenge},
      {"hellaswag", LikelihoodTask::hellaswag},   {"winogrande", LikelihoodTask::winogrande},
      {"mmlu", LikelihoodTask::mmlu}};
  auto it = tasks.find(name);
  if (it == tasks.end()) return std::nullopt;
  return it->second;
}

const char* likelihood_task_name(LikelihoodTask task) {
  switch (task) {
    case LikelihoodTask::lambada: return "lambada";
    case LikelihoodTask::piqa: return "piqa";
    case LikelihoodTask::arc_easy: return "arc_easy";
    case LikelihoodTask::arc_challenge: return "arc_challenge";
    case LikelihoodTask::hellaswag: return "hellaswag";
    case LikelihoodTask::winogrande: return "winogrande";
    case LikelihoodTask::mmlu: return "mmlu";
  }
  return "?";
}

namespace {

Result<std::string> string_field(const TaskRow& row, const std::string& key) {
  return json_get<std::string>(row.value, key, row.where);
}

// An index field given as a number or as a string of digits ("label": 1 or "label": "1").
Result<int> index_field(const TaskRow& row, const std::string& key, int count) {
  if (!row.value.is_object()) return make_error(row.where, ": expected a JSON object");
  auto it = row.value.find(key);
  if (it == row.value.end() || it->is_null()) return make_error(row.where, ": missing field '", key, "'");
  long value = -1;
  if (it->is_number_integer()) {
    value = it->get<long>();
  } else if (it->is_string()) {
    const std::string text = it->get<std::string>();
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9)
      return make_error(row.where, ": field '", key, "' is not an index ('", text, "')");
    value = std::stol(text);
  } else {
    return make_error(row.where, ": field '", key, "' has the wrong type (", it->type_name(), ")");
  }
  if (value < 0 || value >= count)
    return make_error(row.where, ": field '", key, "' is ", value, ", outside [0, ", count, ")");
  return (int)value;
}

Result<std::vector<std::string>> string_list_field(const Json& object, const std::string& key,
                                                   const std::string& where) {
  GL_ASSIGN_OR_RETURN(Json list, json_get<Json>(object, key, where));
  if (!list.is_array() || list.empty())
    return make_error(where, ": field '", key, "' must be a non-empty list of strings");
  std::vector<std::string> out;
  for (const Json& item : list) {
    if (!item.is_string()) return make_error(where, ": field '", key, "' must hold strings only");
    out.push_back(item.get<std::string>());
  }
  return out;
}

// Requests (context, " " + choice) for every choice: lm-eval's target_delimiter " ".
LikelihoodDocument choice_document(const std::string& context, std::vector<std::string> choices,
                                   int label) {
  LikelihoodDocument doc;
  for (const std::string& choice : choices) doc.requests.push_back({context, " " + choice});
  doc.choices = std::move(choices);
  doc.label = label;
  return doc;
}

}  // namespace

std::string python_strip(const std::string& text) {
  const char* space = " \t\n\r\v\f\x1c\x1d\x1e\x1f";
  const size_t begin = text.find_first_not_of(space);
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(space) - begin + 1);
}

std::string python_capitalize(const std::string& text) {
  std::string out;
  const auto* bytes = (const utf8proc_uint8_t*)text.data();
  utf8proc_ssize_t at = 0, size = (utf8proc_ssize_t)text.size();
  bool first = true;
  while (at < size) {
    utf8proc_int32_t code;
    utf8proc_ssize_t n = utf8proc_iterate(bytes + at, size - at, &code);
    if (n <= 0) {  // invalid byte: keep it as is
      out.push_back(text[at++]);
      first = false;
      continue;
    }
    code = first ? utf8proc_totitle(code) : utf8proc_tolower(code);
    utf8proc_uint8_t encoded[4];
    out.append((const char*)encoded, utf8proc_encode_char(code, encoded));
    at += n;
    first = false;
  }
  return out;
}

std::string hellaswag_preprocess(const std::string& text) {
  std::string stripped = replace_all(python_strip(text), " [title]", ". ");
  // re.sub("\\[.*?\\]", "", text): "." does not match a newline.
  std::string unbracketed;
  for (size_t i = 0; i < stripped.size(); ++i) {
    if (stripped[i] == '[') {
      const size_t close = stripped.find_first_of("]\n", i + 1);
      if (close != std::string::npos && stripped[close] == ']') {
        i = close;
        continue;
      }
    }
    unbracketed.push_back(stripped[i]);
  }
  return replace_all(unbracketed, "  ", " ");
}

Result<LikelihoodDocument> piqa_document(const TaskRow& row) {
  GL_ASSIGN_OR_RETURN(std::string goal, string_field(row, "goal"));
  GL_ASSIGN_OR_RETURN(std::string sol1, string_field(row, "sol1"));
  GL_ASSIGN_OR_RETURN(std::string sol2, string_field(row, "sol2"));
  GL_ASSIGN_OR_RETURN(int label, index_field(row, "label", 2));
  return choice_document("Question: " + goal + "\nAnswer:", {sol1, sol2}, label);
}

Result<LikelihoodDocument> arc_document(const TaskRow& row) {
  GL_ASSIGN_OR_RETURN(std::string question, string_field(row, "question"));
  GL_ASSIGN_OR_RETURN(Json choices, json_get<Json>(row.value, "choices", row.where));
  GL_ASSIGN_OR_RETURN(std::vector<std::string> texts, string_list_field(choices, "text", row.where + ": choices"));
  GL_ASSIGN_OR_RETURN(std::vector<std::string> labels, string_list_field(choices, "label", row.where + ": choices"));
  if (texts.size() != labels.size())
    return make_error(row.where, ": choices.text has ", texts.size(), " entries but choices.label ",
                      labels.size());
  GL_ASSIGN_OR_RETURN(std::string key, string_field(row, "answerKey"));
  // lm-eval: doc_to_target = choices.label.index(answerKey), so "1"–"4" keys work as "A"–"D".
  int label = -1;
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] == key) {
      label = (int)i;
      break;
    }
  if (label < 0) return make_error(row.where, ": field 'answerKey' is '", key, "', not one of choices.label");
  return choice_document("Question: " + question + "\nAnswer:", texts, label);
}

Result<LikelihoodDocument> hellaswag_document(const TaskRow& row) {
  GL_ASSIGN_OR_RETURN(std::string activity, string_field(row, "activity_label"));
  GL_ASSIGN_OR_RETURN(std::string ctx_a, string_field(row, "ctx_a"));
  GL_ASSIGN_OR_RETURN(std::string ctx_b, string_field(row, "ctx_b"));
  GL_ASSIGN_OR_RETURN(std::vector<std::string> endings, string_list_field(row.value, "endings", row.where));
  GL_ASSIGN_OR_RETURN(int label, index_field(row, "label", (int)endings.size()));
  const std::string query =
      hellaswag_preprocess(activity + ": " + ctx_a + " " + python_capitalize(ctx_b));
  for (std::string& ending : endings) ending = hellaswag_preprocess(ending);
  return choice_document(query, endings, label);
}

Result<LikelihoodDocument> winogrande_document(const TaskRow& row) {
  GL_ASSIGN_OR_RETURN(std::string sentence, string_field(row, "sentence"));
  GL_ASSIGN_OR_RETURN(std::string option1, string_field(row, "option1"));
  GL_ASSIGN_OR_RETURN(std::string option2, string_field(row, "option2"));
  // answer "1" / "2" → 0 / 1.
  GL_ASSIGN_OR_RETURN(int answer, index_field(row, "answer", 3));
  if (answer == 0) return make_error(row.where, ": field 'answer' must be 1 or 2");
  const size_t blank = sentence.find('_');
  if (blank == std::string::npos) return make_error(row.where, ": field 'sentence' has no '_'");
  // Partial scoring: the contexts differ by the option, the continuation after the blank is
  // shared, and only it is scored.
  const std::string continuation = " " + python_strip(sentence.substr(blank + 1));
  LikelihoodDocument doc;
  for (const std::string& option : {option1, option2}) {
    doc.requests.push_back({sentence.substr(0, blank) + option, continuation});
    doc.choices.push_back(sentence.substr(0, blank) + option);
  }
  doc.label = answer - 1;
  return doc;
}

Result<LikelihoodDocument> lambada_document(const TaskRow& row) {
  GL_ASSIGN_OR_RETURN(std::string text, string_field(row, "text"));
  // lm-eval: context = " ".join(text.split(" ")[:-1]), target = " " + text.split(" ")[-1].
  const size_t space = text.rfind(' ');
  LikelihoodDocument doc;
  if (space == std::string::npos)
    doc.requests.push_back({"", " " + text});
  else
    doc.requests.push_back({text.substr(0, space), " " + text.substr(space + 1)});
  doc.choices.push_back(doc.requests[0].continuation.substr(1));
  doc.label = 0;
  return doc;
}

Result<MmluRow> mmlu_row_parse(const TaskRow& row) {
  MmluRow out;
  GL_ASSIGN_OR_RETURN(out.question, string_field(row, "question"));
  GL_ASSIGN_OR_RETURN(out.subject, string_field(row, "subject"));
  GL_ASSIGN_OR_RETURN(out.choices, string_list_field(row.value, "choices", row.where));
  if (out.choices.size() != 4)
    return make_error(row.where, ": field 'choices' has ", out.choices.size(), " entries, expected 4");
  auto it = row.value.find("answer");
  if (it != row.value.end() && it->is_string() && it->get<std::string>().size() == 1 &&
      it->get<std::string>()[0] >= 'A' && it->get<std::string>()[0] <= 'D') {
    out.answer = it->get<std::string>()[0] - 'A';
  } else {
    GL_ASSIGN_OR_RETURN(out.answer, index_field(row, "answer", 4));
  }
  return out;
}

std::string mmlu_prompt(const std::vector<MmluRow>& shots, const MmluRow& question) {
  auto body = [](const MmluRow& row) {
    return python_strip(row.question) + "\nA. " + row.choices[0] + "\nB. " + row.choices[1] +
           "\nC. " + row.choices[2] + "\nD. " + row.choices[3] + "\nAnswer:";
  };
  std::string prompt = "The following are multiple choice questions (with answers) about " +
                       replace_all(question.subject, "_", " ") + ".\n\n";
  for (const MmluRow& shot : shots)
    prompt += body(shot) + " " + std::string(1, (char)('A' + shot.answer)) + "\n\n";
  return prompt + body(question);
}

Result<std::vector<LikelihoodDocument>> mmlu_documents(const std::vector<TaskRow>& test_rows,
                                                       const std::vector<TaskRow>& dev_rows,
                                                       int num_fewshot) {
  std::map<std::string, std::vector<MmluRow>> dev_by_subject;
  for (const TaskRow& row : dev_rows) {
    GL_ASSIGN_OR_RETURN(MmluRow dev, mmlu_row_parse(row));
    dev_by_subject[dev.subject].push_back(std::move(dev));
  }
  std::vector<LikelihoodDocument> docs;
  for (const TaskRow& row : test_rows) {
    GL_ASSIGN_OR_RETURN(MmluRow test, mmlu_row_parse(row));
    const std::vector<MmluRow>& dev = dev_by_subject[test.subject];
    if ((int)dev.size() < num_fewshot)
      return make_error(row.where, ": subject '", test.subject, "' has ", dev.size(),
                        " dev rows, ", num_fewshot, "-shot needs ", num_fewshot, " (pass them with --dev FILE)");
    const std::vector<MmluRow> shots(dev.begin(), dev.begin() + num_fewshot);
    LikelihoodDocument doc = choice_document(mmlu_prompt(shots, test), {"A", "B", "C", "D"}, test.answer);
    doc.subject = test.subject;
    docs.push_back(std::move(doc));
  }
  return docs;
}

Result<std::vector<LikelihoodDocument>> likelihood_documents(LikelihoodTask task,
                                                             const std::vector<TaskRow>& rows) {
  std::vector<LikelihoodDocument> docs;
  for (const TaskRow& row : rows) {
    Result<LikelihoodDocument> doc = make_error("unreachable");
    switch (task) {
      case LikelihoodTask::lambada: doc = lambada_document(row); break;
      case LikelihoodTask::piqa: doc = piqa_document(row); break;
      case LikelihoodTask::arc_easy:
      case LikelihoodTask::arc_challenge: doc = arc_document(row); break;
      case LikelihoodTask::hellaswag: doc = hellaswag_document(row); break;
      case LikelihoodTask::winogrande: doc = winogrande_document(row); break;
      case LikelihoodTask::mmlu: return make_error("mmlu documents need the dev rows (mmlu_documents)");
    }
    if (!doc.ok()) return std::move(doc).take_error();
    docs.push_back(std::move(*doc));
  }
  return docs;
}

}  // namespace golinear::eval
