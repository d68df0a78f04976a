// Request construction of the lm-eval tasks from hand-written rows in each dataset's format
// (tests/data/eval/*.jsonl), compared with the strings lm-eval's task configs produce.
#include <gtest/gtest.h>

#include "eval/likelihood_tasks.h"

namespace golinear::eval {
namespace {

const std::string kData = std::string(GOLINEAR_TEST_DATA) + "/eval/";

std::vector<LikelihoodDocument> documents_of(LikelihoodTask task, const std::string& file) {
  auto rows = task_rows_read(kData + file);
  EXPECT_TRUE(rows.ok()) << rows.error();
  auto docs = likelihood_documents(task, *rows);
  EXPECT_TRUE(docs.ok()) << docs.error();
  return docs.ok() ? *docs : std::vector<LikelihoodDocument>{};
}

TEST(Piqa, QuestionAnswerPromptAndSpacedChoices) {
  auto docs = documents_of(LikelihoodTask::piqa, "piqa.jsonl");
  ASSERT_EQ(docs.size(), 3u);
  const LikelihoodDocument& doc = docs[1];
  ASSERT_EQ(doc.requests.size(), 2u);
  EXPECT_EQ(doc.requests[0].context, "Question: To keep bread fresh longer,\nAnswer:");
  EXPECT_EQ(doc.requests[0].continuation, " store it in the oven.");
  EXPECT_EQ(doc.requests[1].continuation, " store it in a bread box.");
  EXPECT_EQ(doc.choices[1], "store it in a bread box.");  // acc_norm length without the space
  EXPECT_EQ(doc.label, 1);
}

TEST(Arc, LetterAndNumericAnswerKeys) {
  auto docs = documents_of(LikelihoodTask::arc_easy, "arc_easy.jsonl");
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].label, 2);  // "C" of A–D
  EXPECT_EQ(docs[1].label, 0);  // "1" of 1–4
  EXPECT_EQ(docs[1].requests[0].context,
            "Question: Which form of energy is needed to change water from a liquid to a gas?\nAnswer:");
  EXPECT_EQ(docs[1].requests[0].continuation, " heat");
  EXPECT_EQ(docs[2].requests.size(), 3u);  // three choices
  EXPECT_EQ(docs[2].label, 1);
}

TEST(Arc, AnswerKeyNotAmongLabelsNamesTheRow) {
  TaskRow row{Json::parse(R"({"question": "q", "choices": {"text": ["a", "b"], "label": ["A", "B"]},
                              "answerKey": "3"})"), "arc.jsonl line 7"};
  auto doc = arc_document(row);
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.error().find("arc.jsonl line 7"), std::string::npos) << doc.error();
  EXPECT_NE(doc.error().find("answerKey"), std::string::npos) << doc.error();
}

TEST(Hellaswag, PreprocessingAsLmEval) {
  EXPECT_EQ(hellaswag_preprocess("  A [title] B  "), "A. B");
  EXPECT_EQ(hellaswag_preprocess("x [header] y"), "x y");   // "x  y" → one pass of "  " → " "
  EXPECT_EQ(hellaswag_preprocess("a    b"), "a  b");         // one pass, as str.replace
  EXPECT_EQ(hellaswag_preprocess("keep [open"), "keep [open"); // no closing bracket
  EXPECT_EQ(hellaswag_preprocess("a [x\ny] b"), "a [x\ny] b"); // "." does not cross lines
  EXPECT_EQ(hellaswag_preprocess("a [x] [y] b"), "a  b");      // "a   b" → "a  b"
  EXPECT_EQ(python_capitalize("tomatoes NEED  light"), "Tomatoes need  light");
  EXPECT_EQ(python_capitalize("élan VITAL"), "Élan vital");

  auto docs = documents_of(LikelihoodTask::hellaswag, "hellaswag.jsonl");
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].requests[0].context, "Roof shingle removal: A man is sitting on a roof. He");
  EXPECT_EQ(docs[0].requests[3].continuation, " starts pulling up roofing on a roof.");
  EXPECT_EQ(docs[0].label, 3);  // "label": "3"
  const LikelihoodDocument& wiki = docs[1];
  EXPECT_EQ(wiki.requests[0].context,
            "Home and Garden: How to grow tomatoes. Pick a sunny spot. Tomatoes need light");
  // Stripped before "[step]" is dropped: the leading space stays, as in lm-eval.
  EXPECT_EQ(wiki.choices[0], " Water them every day.");
  EXPECT_EQ(wiki.requests[0].continuation, "  Water them every day.");
  EXPECT_EQ(wiki.choices[1], "They grow fast.");
  EXPECT_EQ(wiki.choices[2], "Plant them in the shade. Done.");
  EXPECT_EQ(wiki.choices[3], "Forget [them.");
  EXPECT_EQ(wiki.label, 0);
}

TEST(Winogrande, OptionInContextSharedSuffixScored) {
  auto docs = documents_of(LikelihoodTask::winogrande, "winogrande.jsonl");
  ASSERT_EQ(docs.size(), 3u);
  const LikelihoodDocument& doc = docs[0];
  ASSERT_EQ(doc.requests.size(), 2u);
  EXPECT_EQ(doc.requests[0].context, "Sarah was a much better surgeon than Maria so Sarah");
  EXPECT_EQ(doc.requests[1].context, "Sarah was a much better surgeon than Maria so Maria");
  EXPECT_EQ(doc.requests[0].continuation, " always got the harder cases.");
  EXPECT_EQ(doc.requests[1].continuation, doc.requests[0].continuation);
  EXPECT_EQ(doc.label, 0);
  EXPECT_EQ(docs[2].label, 1);  // answer "2"
  EXPECT_EQ(docs[2].requests[1].context, "The cup fell on the floor but the floor");
  EXPECT_EQ(docs[2].requests[1].continuation, " did not break.");
}

TEST(Lambada, ContextUpToTheLastSpaceTargetWithSpace) {
  auto docs = documents_of(LikelihoodTask::lambada, "lambada.jsonl");
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].requests[0].context, "In the beginning God created the heaven and the");
  EXPECT_EQ(docs[0].requests[0].continuation, " earth");
  auto twice = lambada_document({Json{{"text", "a  b"}}, "x"});  // "a  b".split(" ") = [a, "", b]
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice->requests[0].context, "a ");
  EXPECT_EQ(twice->requests[0].continuation, " b");
}

TEST(Mmlu, FiveShotPromptTextExactly) {
  auto test_rows = task_rows_read(kData + "mmlu_test.jsonl");
  auto dev_rows = task_rows_read(kData + "mmlu_dev.jsonl");
  ASSERT_TRUE(test_rows.ok() && dev_rows.ok());
  auto docs = mmlu_documents(*test_rows, *dev_rows, 2);
  ASSERT_TRUE(docs.ok()) << docs.error();
  ASSERT_EQ(docs->size(), 3u);
  const std::string expected =
      "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
      "Find all c in Z_3 such that Z_3[x]/(x^2 + c) is a field.\nA. 0\nB. 1\nC. 2\nD. 3\nAnswer: B\n\n"
      "Statement 1 | If aH is an element of a factor group, then |aH| divides |a|.\nA. True, True\n"
      "B. False, False\nC. True, False\nD. False, True\nAnswer: B\n\n"
      "Find the degree for the given field extension Q(sqrt(2)) over Q.\nA. 0\nB. 2\nC. 1\nD. 4\nAnswer:";
  const LikelihoodDocument& doc = (*docs)[0];
  EXPECT_EQ(doc.requests[0].context, expected);
  ASSERT_EQ(doc.requests.size(), 4u);
  EXPECT_EQ(doc.requests[0].continuation, " A");
  EXPECT_EQ(doc.requests[3].continuation, " D");
  EXPECT_EQ(doc.label, 1);
  EXPECT_EQ(doc.subject, "abstract_algebra");
  // Letter answers ("answer": "C") and shots drawn from the question's own subject.
  EXPECT_EQ((*docs)[1].label, 0);
  EXPECT_NE((*docs)[1].requests[0].context.find("about astronomy.\n\nWhat is the sea level?"), std::string::npos);
  EXPECT_NE((*docs)[1].requests[0].context.find("D. d\nAnswer: C\n\nWhich planet is red?"), std::string::npos);
  // 5-shot needs five dev rows of each subject.
  auto five = mmlu_documents(*test_rows, *dev_rows, 5);
  ASSERT_FALSE(five.ok());
  EXPECT_NE(five.error().find("abstract_algebra"), std::string::npos);
}

TEST(TaskRows, MalformedRowsNameFileLineAndField) {
  auto rows = task_rows_read(kData + "piqa_malformed.jsonl");
  ASSERT_TRUE(rows.ok());
  auto docs = likelihood_documents(LikelihoodTask::piqa, *rows);
  ASSERT_FALSE(docs.ok());
  EXPECT_NE(docs.error().find("piqa_malformed.jsonl line 3"), std::string::npos) << docs.error();
  EXPECT_NE(docs.error().find("'sol2'"), std::string::npos) << docs.error();

  auto bad_json = task_rows_read(kData + "piqa_badjson.jsonl");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_NE(bad_json.error().find("piqa_badjson.jsonl line 2"), std::string::npos) << bad_json.error();

  auto bad_label = piqa_document({Json{{"goal", "g"}, {"sol1", "a"}, {"sol2", "b"}, {"label", 2}}, "p line 1"});
  ASSERT_FALSE(bad_label.ok());
  EXPECT_NE(bad_label.error().find("'label'"), std::string::npos) << bad_label.error();
}

}  // namespace
}  // namespace golinear::eval
