// A LAMBADA-format cloze set built from plain documents ({"text": passage} rows whose last word
// is the target), for models whose training text is not English fiction:
//   1. each document is cut into paragraphs at blank lines;
//   2. a leading number on a line ("  12 And he ...", Bible verses) is dropped, the lines are
//      joined and whitespace runs collapse to one space;
//   3. paragraphs with any character other than ASCII letters, digits, space and , . ; : ' " ! ? - ( )
//      are skipped (code, markup, dictionary entries);
//   4. the sentences of a paragraph are grouped in order, a group closed before it would pass
//      max_words words;
//   5. a group is kept when it has at least min_words words and ends in "<word>." with a word of
//      at least min_letters ASCII letters; its final "." is removed, so the text ends in the target;
//   6. duplicates are dropped; the first max_items in document order are returned.
#pragma once

#include <string>
#include <vector>

namespace golinear::eval {

struct ClozeOptions {
  int min_words = 30;
  int max_words = 100;
  int min_letters = 4;
  long max_items = 1000;
};

std::vector<std::string> cloze_passages_build(const std::vector<std::string>& documents,
                                              const ClozeOptions& options);

}  // namespace golinear::eval
