#include "eval/synthetic_tasks.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "eval/wordlist.h"
#include "eval/text_util.h"

namespace golinear::eval {

const char* const kNoiseHaystack =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

namespace {

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? separator : "") + parts[i];
  return out;
}

template <class T>
void shuffle(std::vector<T>& items, SyntheticRandom& random) {
  for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[random.uniform_index(i)]);
}

// The largest haystack size n in [1, max_units] whose sample fits `length` tokens with its
// generation budget; build(n) must be deterministic.
Result<SyntheticSample> fit_to_length(const std::function<SyntheticSample(long)>& build,
                                      long max_units, long length, const TokenCounter& count) {
  auto fits = [&](long n, SyntheticSample* out) {
    SyntheticSample sample = build(n);
    sample.prompt_tokens = count(sample.prompt);
    const bool ok = sample.prompt_tokens + sample.max_new_tokens <= length;
    if (out) *out = std::move(sample);
    return ok;
  };
  SyntheticSample smallest;
  if (!fits(1, &smallest))
    return make_error("--length ", length, " is too short for ", smallest.task, ": the prompt alone takes ",
                      smallest.prompt_tokens, " tokens and ", smallest.max_new_tokens,
                      " are kept for the answer");
  long lo = 1, hi = 2;  // fits(lo), hi unknown
  while (hi <= max_units && fits(hi, nullptr)) {
    lo = hi;
    hi *= 2;
  }
  hi = std::min(hi, max_units + 1);  // !fits(hi) or hi beyond the units
  while (hi - lo > 1) {
    const long mid = lo + (hi - lo) / 2;
    if (fits(mid, nullptr)) lo = mid;
    else hi = mid;
  }
  SyntheticSample best;
  fits(lo, &best);
  return best;
}

// RULER's DEPTHS: np.round(np.linspace(0, 100, 40)).
std::vector<double> ruler_depths() {
  std::vector<double> depths;
  for (int i = 0; i < 40; ++i) depths.push_back(std::nearbyint(100.0 * i / 39.0));
  return depths;
}

}  // namespace

std::string needle_key_generate(SyntheticRandom& random) {
  const auto& adjectives = needle_adjectives();
  const auto& nouns = needle_nouns();
  const std::string& adjective = adjectives[random.uniform_index(adjectives.size())];
  return adjective + "-" + nouns[random.uniform_index(nouns.size())];
}

std::string needle_number_generate(SyntheticRandom& random) {
  return std::to_string(random.uniform_int(1000000, 9999999));
}

std::string needle_uuid_generate(SyntheticRandom& random) {
  const uint64_t hi = (random.next() & ~0xF000ull) | 0x4000ull;                   // version 4
  const uint64_t lo = (random.next() & 0x3FFFFFFFFFFFFFFFull) | 0x8000000000000000ull;  // variant
  char text[40];
  std::snprintf(text, sizeof text, "%08llx-%04llx-%04llx-%04llx-%012llx",
                (unsigned long long)(hi >> 32), (unsigned long long)((hi >> 16) & 0xFFFF),
                (unsigned long long)(hi & 0xFFFF), (unsigned long long)(lo >> 48),
                (unsigned long long)(lo & 0xFFFFFFFFFFFFull));
  return text;
}

std::vector<std::string> sentences_split(const std::string& text) {
  std::vector<std::string> sentences;
  size_t begin = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool end = (text[i] == '.' || text[i] == '!' || text[i] == '?') &&
                     (i + 1 == text.size() || std::isspace((unsigned char)text[i + 1]));
    if (!end) continue;
    sentences.push_back(text.substr(begin, i + 1 - begin));
    begin = text.find_first_not_of(" \t\r\n", i + 1);
    if (begin == std::string::npos) return sentences;
    i = begin - 1;
  }
  if (begin < text.size()) sentences.push_back(text.substr(begin));
  return sentences;
}

Result<NeedleTaskConfig> niah_config(int variant) {
  NeedleTaskConfig config;
  config.task = "niah_single_" + std::to_string(variant);
  switch (variant) {
    case 1: break;
    case 2: config.essay_haystack = true; break;
    case 3: config.essay_haystack = true; config.uuid_values = true; break;
    default: return make_error("--variant must be 1, 2 or 3 (S-NIAH-1/2/3), got ", variant);
  }
  return config;
}

Result<NeedleTaskConfig> ruler_needle_config(const std::string& subtask) {
  NeedleTaskConfig config;
  if (subtask == "multikey") {
    config.task = "niah_multikey_1";
    config.num_keys = 4;
  } else if (subtask == "multivalue") {
    config.task = "niah_multivalue";
    config.num_values = 4;
  } else if (subtask == "multiquery") {
    config.task = "niah_multiquery";
    config.num_keys = 4;
    config.num_queries = 4;
  } else {
    return make_error("unknown needle subtask '", subtask, "'");
  }
  return config;
}

Result<SyntheticSample> needle_sample_generate(const NeedleTaskConfig& config, long length,
                                               const TokenCounter& count, SyntheticRandom& random) {
  const int num_needles = config.num_keys * config.num_values;
  if (config.num_queries > config.num_keys)
    return make_error(config.task, ": more queries than keys");
  if (!config.depths.empty() && (int)config.depths.size() != num_needles)
    return make_error(config.task, ": ", config.depths.size(), " depths for ", num_needles, " needles");
  std::vector<std::string> essay_words;
  if (config.essay_haystack) {
    for (size_t at = 0; (at = config.essay.find_first_not_of(" \t\r\n\v\f", at)) != std::string::npos;) {
      const size_t end = config.essay.find_first_of(" \t\r\n\v\f", at);
      essay_words.push_back(config.essay.substr(at, end == std::string::npos ? end : end - at));
      at = end;
    }
    if (essay_words.empty())
      return make_error(config.task, " needs an essay haystack: pass prose with --haystack FILE");
  }
  // Keys (distinct), values and needles; RULER shuffles the needles, then asks for some keys.
  const std::string kind = config.uuid_values ? "uuids" : "numbers";
  std::vector<std::string> keys;
  std::set<std::string> seen;
  while ((int)keys.size() < config.num_keys) {
    std::string key = needle_key_generate(random);
    if (seen.insert(key).second) keys.push_back(key);
  }
  std::vector<std::vector<std::string>> values(config.num_keys);
  std::vector<std::string> needles;
  for (int k = 0; k < config.num_keys; ++k)
    for (int v = 0; v < config.num_values; ++v) {
      values[k].push_back(config.uuid_values ? needle_uuid_generate(random)
                                             : needle_number_generate(random));
      needles.push_back("One of the special magic " + kind + " for " + keys[k] + " is: " +
                        values[k].back() + ".");
    }
  shuffle(needles, random);
  std::vector<int> key_order(config.num_keys);
  for (int k = 0; k < config.num_keys; ++k) key_order[k] = k;
  shuffle(key_order, random);
  std::vector<std::string> queries, references;
  for (int q = 0; q < config.num_queries; ++q) {
    queries.push_back(keys[key_order[q]]);
    for (const std::string& value : values[key_order[q]]) references.push_back(value);
  }
  std::vector<double> depths = config.depths;
  if (depths.empty()) {
    std::vector<double> pool = ruler_depths();
    shuffle(pool, random);
    depths.assign(pool.begin(), pool.begin() + num_needles);
  }
  std::sort(depths.begin(), depths.end());
  const std::string query = queries.size() == 1
                                ? queries[0]
                                : join(std::vector<std::string>(queries.begin(), queries.end() - 1), ", ") +
                                      ", and " + queries.back();
  std::string prompt_template =
      "Some special magic {v} are hidden within the following text. Make sure to memorize it. I "
      "will quiz you about the {v} afterwards.\n{context}\nWhat are all the special magic {v} for "
      "{query} mentioned in the provided text? The special magic {v} for {query} mentioned in the "
      "provided text are";
  std::string v = kind;
  if (config.num_queries * config.num_values == 1) {  // RULER's singular forms
    for (auto [from, to] : {std::pair{"Some", "A"}, {"are all", "is"}, {"are", "is"}, {"answers", "answer"}})
      prompt_template = replace_all(prompt_template, from, to);
    v.pop_back();
  }
  prompt_template = replace_all(replace_all(prompt_template, "{v}", v), "{query}", query);

  auto build = [&](long n) {
    SyntheticSample sample;
    sample.task = config.task;
    sample.needles = needles;
    sample.references = references;
    sample.depths = depths;
    sample.max_new_tokens = config.max_new_tokens;
    if (!config.essay_haystack) {
      std::vector<std::string> lines(n, kNoiseHaystack);
      for (int i = num_needles - 1; i >= 0; --i)  // deepest first: earlier indices stay valid
        lines.insert(lines.begin() + (long)std::floor(n * depths[i] / 100.0), needles[i]);
      sample.context = join(lines, "\n");
    } else {
      std::vector<std::string> words;
      for (long i = 0; i < n; ++i) words.push_back(essay_words[i % essay_words.size()]);
      const std::vector<std::string> sentences = sentences_split(join(words, " "));
      std::vector<long> positions = {0};
      for (double depth : depths) positions.push_back((long)(sentences.size() * depth / 100.0));
      positions.push_back((long)sentences.size());
      std::vector<std::string> parts;
      for (size_t i = 1; i < positions.size(); ++i) {
        parts.push_back(join(std::vector<std::string>(sentences.begin() + positions[i - 1],
                                                      sentences.begin() + positions[i]), " "));
        if (i - 1 < needles.size()) parts.push_back(needles[i - 1]);
      }
      sample.context = join(parts, " ");
    }
    sample.prompt = replace_all(prompt_template, "{context}", sample.context);
    return sample;
  };
  return fit_to_length(build, 10'000'000, length, count);
}

Result<SyntheticSample> variable_tracking_sample_generate(long length, const TokenCounter& count,
                                                          SyntheticRandom& random, int num_chains,
                                                          int num_hops) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  while ((int)names.size() < num_chains * (num_hops + 1)) {
    std::string name;
    for (int i = 0; i < 5; ++i) name.push_back((char)('A' + random.uniform_index(26)));
    if (seen.insert(name).second) names.push_back(name);
  }
  std::vector<std::vector<std::string>> chains(num_chains);
  for (int c = 0; c < num_chains; ++c) {
    const std::string* vars = &names[(size_t)c * (num_hops + 1)];
    chains[c].push_back("VAR " + vars[0] + " = " + std::to_string(random.uniform_int(10000, 99999)));
    for (int j = 0; j < num_hops; ++j)
      chains[c].push_back("VAR " + vars[j + 1] + " = VAR " + vars[j] + " ");
  }
  // Where each chain element goes, as a fraction of the noise (RULER samples sentence indices).
  std::vector<std::vector<double>> fractions(num_chains);
  for (auto& chain_fractions : fractions) {
    for (int j = 0; j <= num_hops; ++j) chain_fractions.push_back((double)(random.next() >> 11) * 0x1.0p-53);
    std::sort(chain_fractions.begin(), chain_fractions.end());
  }
  const std::string value = chains[0][0].substr(chains[0][0].rfind('=') + 2);
  const std::vector<std::string> answer(names.begin(), names.begin() + num_hops + 1);
  auto build = [&](long n) {
    std::vector<std::string> sentences(n, std::string(kNoiseHaystack) + "\n");
    for (int c = 0; c < num_chains; ++c) {
      const double before = (double)sentences.size();  // positions index the text before the chain
      for (int j = 0; j <= num_hops; ++j) {
        const long position = (long)std::floor(fractions[c][j] * before);
        sentences.insert(sentences.begin() + position + j, chains[c][j]);
      }
    }
    SyntheticSample sample;
    sample.task = "vt";
    sample.context = replace_all(join(sentences, " "), ". \n", ".\n");
    for (const auto& chain : chains) sample.needles.insert(sample.needles.end(), chain.begin(), chain.end());
    sample.references = answer;
    sample.max_new_tokens = 30;
    sample.prompt =
        "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n" +
        sample.context + "\nQuestion: Find all variables that are assigned the value " + value +
        " in the text above. Answer: According to the chain(s) of variable assignment in the text "
        "above, " + std::to_string(num_hops + 1) + " variables are assgined the value " + value +
        ", they are: ";
    return sample;
  };
  return fit_to_length(build, 10'000'000, length, count);
}

Result<SyntheticSample> frequent_words_sample_generate(long length, const TokenCounter& count,
                                                       SyntheticRandom& random) {
  const int vocab_size = 2000, word_length = 6;
  const double alpha = 2.0, zeta_alpha = M_PI * M_PI / 6.0;  // ζ(2)
  std::set<std::string> unique;
  while ((int)unique.size() < vocab_size) {
    std::string word;
    for (int i = 0; i < word_length; ++i) word.push_back((char)('a' + random.uniform_index(26)));
    unique.insert(word);
  }
  std::vector<std::string> vocab(unique.begin(), unique.end());
  shuffle(vocab, random);
  vocab[0] = "...";  // the most frequent "word" is noise
  const uint64_t shuffle_seed = random.next();
  auto build = [&](long num_words) {
    std::vector<const std::string*> words;
    for (int k = 1; k <= vocab_size; ++k) {
      const long copies = (long)(num_words * std::pow((double)k, -alpha) / zeta_alpha);
      for (long c = 0; c < copies; ++c) words.push_back(&vocab[k - 1]);
    }
    SyntheticRandom order(shuffle_seed);
    shuffle(words, order);
    SyntheticSample sample;
    sample.task = "fwe";
    for (size_t i = 0; i < words.size(); ++i) sample.context += (i ? " " : "") + *words[i];
    sample.references = {vocab[1], vocab[2], vocab[3]};
    sample.max_new_tokens = 50;
    sample.prompt =
        "Read the following coded text and track the frequency of each coded word. Find the three "
        "most frequently appeared coded words. " + sample.context +
        "\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are the "
        "three most frequently appeared words in the above coded text? Answer: According to the "
        "coded text above, the three most frequently appeared words are:";
    return sample;
  };
  return fit_to_length(build, 10'000'000, length, count);
}

}  // namespace golinear::eval
