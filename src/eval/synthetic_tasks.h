// The long-context synthetic tasks of RULER (Hsieh et al. 2024), generated deterministically
// from a seed (eval/synthetic_random.h) and sized in tokens:
//   S-NIAH-1 (noise haystack, 7-digit number), S-NIAH-2 (essay, number), S-NIAH-3 (essay, uuid);
//   multikey (4 keys, 1 asked), multivalue (1 key, 4 values), multiquery (4 keys, all asked),
//   variable tracking (one chain "VAR ABCDE = 12345", 4 hops "VAR X = VAR Y"),
//   frequent words (coded words with Zipf counts, alpha 2: the three most frequent).
// Needle: "One of the special magic {numbers|uuids} for {adjective-noun} is: {value}."; noise
// haystack: "The grass is green. ... There and back again." one line per repetition; essay
// haystack: the first N words of user text, needles inserted between sentences. Prompts are
// RULER's templates followed by their answer prefixes (singular forms when one value is asked).
// The haystack is the largest for which tokens(prompt) + max_new_tokens <= length.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "eval/synthetic_random.h"

namespace golinear::eval {

struct SyntheticSample {
  std::string task;                     // "niah_single_1", "niah_multikey_1", "vt", "fwe", ...
  std::string prompt;                   // template + answer prefix: what the model reads
  std::string context;                  // the haystack with its needles (inside prompt)
  std::vector<std::string> needles;     // inserted needle sentences (variable tracking: chain)
  std::vector<std::string> references;  // every one must appear in the generation
  std::vector<double> depths;           // percent depth of each needle (needle tasks)
  int max_new_tokens = 128;
  long prompt_tokens = 0;               // as counted by the TokenCounter
};

// Tokens the model reads for `text` (the tokenizer, with BOS when the model gets one).
using TokenCounter = std::function<long(const std::string&)>;

struct NeedleTaskConfig {
  std::string task = "niah_single_1";
  bool essay_haystack = false;   // false: the noise haystack
  std::string essay;             // essay haystack text (required when essay_haystack)
  bool uuid_values = false;      // false: 7-digit numbers
  int num_keys = 1;              // needles with distinct keys
  int num_values = 1;            // values per key (one needle each)
  int num_queries = 1;           // keys asked for
  // Depth in percent of each needle; empty: drawn without replacement from RULER's
  // round(linspace(0, 100, 40)).
  std::vector<double> depths;
  int max_new_tokens = 128;
};

// RULER's task names for the variants and subtasks.
Result<NeedleTaskConfig> niah_config(int variant);  // 1, 2, 3
Result<NeedleTaskConfig> ruler_needle_config(const std::string& subtask);  // multikey, multivalue, multiquery

Result<SyntheticSample> needle_sample_generate(const NeedleTaskConfig& config, long length,
                                               const TokenCounter& count, SyntheticRandom& random);
Result<SyntheticSample> variable_tracking_sample_generate(long length, const TokenCounter& count,
                                                          SyntheticRandom& random,
                                                          int num_chains = 1, int num_hops = 4);
Result<SyntheticSample> frequent_words_sample_generate(long length, const TokenCounter& count,
                                                       SyntheticRandom& random);

// The noise sentence block of the noise haystack.
extern const char* const kNoiseHaystack;

// Pieces shared with the tests.
std::string needle_key_generate(SyntheticRandom& random);    // "adjective-noun"
std::string needle_number_generate(SyntheticRandom& random); // 7 digits, no leading zero
std::string needle_uuid_generate(SyntheticRandom& random);   // uuid4 text
// Sentences of prose: split after '.', '!' or '?' followed by whitespace.
std::vector<std::string> sentences_split(const std::string& text);

}  // namespace golinear::eval
