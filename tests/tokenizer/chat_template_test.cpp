// Chat templates: the real Llama-3 and Qwen3 templates against renders by @huggingface/jinja
// (tests/data/tokenizer/chat_template_goldens.json, made by chat_template_goldens.mjs), unit tests
// of the interpreter pieces, one-line errors, and the bundled model's template.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "common/json.h"

namespace golinear {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Renders `source` with `context`; a parse or render error becomes the returned text "ERROR: ...".
std::string render(const std::string& source, const Json& context = Json::object()) {
  auto parsed = chat_template_parse(source);
  if (!parsed.ok()) return "ERROR: " + parsed.error();
  auto rendered = parsed->render(context);
  if (!rendered.ok()) return "ERROR: " + rendered.error();
  return rendered.value();
}

TEST(ChatTemplate, GoldensFromHuggingFaceJinja) {
  const std::string dir = std::string(GOLINEAR_TEST_DATA) + "/tokenizer/";
  // Read with key order kept: the tool-call goldens print dicts with tojson.
  const OrderedJson goldens = OrderedJson::parse(read_text(dir + "chat_template_goldens.json"));
  std::map<std::string, ChatTemplate> templates;
  for (const char* name : {"llama3", "qwen3"}) {
    auto parsed = chat_template_parse(read_text(dir + "chat_templates/" + name + ".jinja"));
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.error();
    templates.emplace(name, parsed.value());
  }
  ASSERT_GE(goldens.size(), 80u);
  for (const OrderedJson& golden : goldens) {
    const std::string name = golden["template"].get<std::string>();
    auto rendered = templates.at(name).render(golden["context"]);
    ASSERT_TRUE(rendered.ok()) << rendered.error();
    EXPECT_EQ(rendered.value(), golden["expected"].get<std::string>())
        << name << " / " << golden["conversation"] << " / " << golden["context"].dump();
  }
}

TEST(ChatTemplate, StandardContextMatchesGoldenContext) {
  const Json context =
      chat_template_context({{"system", "s"}, {"user", "u"}}, true, "<b>", "<e>", false);
  EXPECT_EQ(context["messages"][1]["content"], "u");
  EXPECT_EQ(context["add_generation_prompt"], true);
  EXPECT_EQ(context["bos_token"], "<b>");
  EXPECT_EQ(context["enable_thinking"], false);
  EXPECT_FALSE(context.contains("tools"));
  EXPECT_FALSE(chat_template_context({}, false, "", "").contains("enable_thinking"));
}

TEST(ChatTemplate, WhitespaceControl) {
  EXPECT_EQ(render("a  {{- 'b' -}}  \n c"), "abc");
  EXPECT_EQ(render("a \n{%- if true -%}\n b {%- endif %}"), "ab");
  EXPECT_EQ(render("a {#- comment -#} b"), "ab");
  EXPECT_EQ(render("a {# comment #} b"), "a  b");
  // HF's lstrip_blocks / trim_blocks and the dropped trailing newline.
  EXPECT_EQ(render("x\n    {% if true %}\ny\n    {% endif %}\nz\n"), "x\ny\nz");
  EXPECT_EQ(render("  {{ 'k' }}\n"), "  k");
}

TEST(ChatTemplate, LoopVariables) {
  EXPECT_EQ(render("{% for x in ['a', 'b', 'c'] %}{{ loop.index0 }}{{ loop.index }}{{ x }}"
                   "{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}{{ loop.length "
                   "}}|{% endfor %}"),
            "01aF3|12b3|23cL3|");
  EXPECT_EQ(render("{% for x in [] %}{{ x }}{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4] if x % 2 == 0 %}{{ x }}{{ loop.index }}{% endfor %}"),
            "2142");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"),
            "a=1;b=2;");
  EXPECT_EQ(render("{% for k, v in d | items %}{{ k }}{{ v }}{% endfor %}", {{"d", {{"x", 1}}}}),
            "x1");
  // A set inside a loop does not leak out of it.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
}

TEST(ChatTemplate, NamespaceSet) {
  EXPECT_EQ(
      render(
          "{% set ns = namespace(found=false, n=0) %}{% for x in [1, 2, 3] %}"
          "{% if x > 1 %}{% set ns.found = true %}{% set ns.n = ns.n + x %}{% endif %}{% endfor %}"
          "{{ ns.found }} {{ ns.n }}"),
      "True 5");
  EXPECT_NE(render("{% set x = 1 %}{% set x.y = 2 %}").find("only of a namespace"),
            std::string::npos);
}

TEST(ChatTemplate, Slicing) {
  const Json context = {{"l", {1, 2, 3, 4, 5}}, {"s", "héllo"}};
  EXPECT_EQ(render("{{ l[1:3] }}|{{ l[::-1] }}|{{ l[-2:] }}|{{ l[::2] }}|{{ l[-1] }}|{{ l[10] }}",
                   context),
            "[2, 3]|[5, 4, 3, 2, 1]|[4, 5]|[1, 3, 5]|5|");
  EXPECT_EQ(render("{{ s[1:3] }}|{{ s[::-1] }}|{{ s[1] }}|{{ s | length }}", context),
            "él|olléh|é|5");
  EXPECT_EQ(render("{% for m in l[:-3] %}{{ m }}{% endfor %}", context), "12");
}

TEST(ChatTemplate, ExpressionsAndOperators) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 3 }} "
                   "{{ 1 + 2 * 3 }}"),
            "3 -4 1 2 3.5 8 7");
  EXPECT_EQ(
      render("{{ 'a' ~ 1 ~ none }} {{ 'x' + 'y' }} {{ [1] + [2] }} {{ -(3) }} {{ 'ab' * 2 }}"),
      "a1None xy [1, 2] -3 abab");
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}"),
            "True True True True");
  EXPECT_EQ(
      render("{{ not true }} {{ true and false }} {{ 0 or 'x' }} {{ 2 <= 2.5 }} {{ 'a' != 'b' }}"),
      "False False x True True");
  EXPECT_EQ(render("{{ 'yes' if c else 'no' }} {{ 'only' if c }}|", {{"c", false}}), "no |");
  EXPECT_EQ(render("{{ 'a\\n\\t\\'\\\"\\\\b' }}"), "a\n\t'\"\\b");
  EXPECT_EQ(render("{{ 1.5 }} {{ 2.0 }} {{ {'a': [1, 'x']} }} {{ (1, 2) }}"),
            "1.5 2.0 {'a': [1, 'x']} [1, 2]");
  EXPECT_EQ(render("{{ m.role }}{{ m['content'] }}{{ m.missing }}|",
                   {{"m", {{"role", "r"}, {"content", "c"}}}}),
            "rc|");
}

TEST(ChatTemplate, StringMethods) {
  EXPECT_EQ(
      render("{{ '  x \\n'.strip() }}|{{ '\\n\\nx\\n'.lstrip('\\n') }}|{{ 'xyy'.rstrip('y') }}"),
      "x|x\n|x");
  EXPECT_EQ(render("{{ 'a</t>b</t>c'.split('</t>')[-1] }} {{ 'a b  c'.split() | length }} {{ "
                   "'a,b,c'.split(',', 1) }}"),
            "c 3 ['a', 'b,c']");
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith('bc') }} {{ "
                   "'abc'.startswith(('x', 'a')) }}"),
            "True True True");
  EXPECT_EQ(render("{{ 'aXa'.replace('a', 'b') }} {{ 'Ab'.upper() }} {{ 'Ab'.lower() }} {{ 'hello "
                   "world'.title() }}"),
            "bXb AB ab Hello World");
  EXPECT_EQ(render("{{ d.get('a') }} {{ d.get('z', 5) }} {{ d.keys() }} {{ d.values() }}",
                   {{"d", {{"a", 1}}}}),
            "1 5 ['a'] [1]");
}

TEST(ChatTemplate, Filters) {
  EXPECT_EQ(
      render("{{ '  x  ' | trim }}|{{ [1, 2] | length }}|{{ 'abc' | length }}|{{ 3 | string }}"),
      "x|2|3|3");
  EXPECT_EQ(
      render("{{ missing | default('d') }}|{{ '' | default('d', true) }}|{{ 'v' | default('d') }}"),
      "d|d|v");
  EXPECT_EQ(render("{{ [1, 2, 3] | first }}{{ [1, 2, 3] | last }}|{{ ['a', 'b'] | join(', ') }}|{{ "
                   "[1, 2] | join }}"),
            "13|a, b|12");
  EXPECT_EQ(render("{{ 'ab' | upper }} {{ 'AB' | lower }} {{ 'ab cd' | capitalize }} {{ 'aa' | "
                   "replace('a', 'b') }}"),
            "AB ab Ab cd bb");
  EXPECT_EQ(render("{{ {'a': 1, 'b': [true, none, 'é\"']} | tojson }}"),
            "{\"a\": 1, \"b\": [true, null, \"é\\\"\"]}");
  EXPECT_EQ(render("{{ [3, 1] | reverse | list }} {{ '12' | int + 1 }} {{ -2 | abs }} {{ messages "
                   "| length - 1 }}",
                   {{"messages", {1, 2, 3}}}),
            "[1, 3] 13 2 2");  // a filter applies to the negated literal, as in Jinja
}

TEST(ChatTemplate, Tests) {
  const Json context = {{"s", "x"}, {"n", nullptr}, {"d", {{"k", 1}}},
                        {"l", {1}}, {"f", false},   {"i", 3}};
  EXPECT_EQ(render("{{ s is defined }}{{ u is defined }}{{ u is undefined }}{{ s is not defined }}",
                   context),
            "TrueFalseTrueFalse");
  EXPECT_EQ(
      render(
          "{{ n is none }}{{ s is not none }}{{ s is string }}{{ d is mapping }}{{ l is mapping }}",
          context),
      "TrueTrueTrueTrueFalse");
  EXPECT_EQ(render("{{ l is iterable }}{{ l is sequence }}{{ i is iterable }}{{ f is false }}{{ f "
                   "is true }}",
                   context),
            "TrueTrueFalseTrueFalse");
  EXPECT_EQ(
      render("{{ i is number }}{{ i is integer }}{{ s is number }}{{ f is boolean }}", context),
      "TrueTrueFalseTrue");
  EXPECT_EQ(render("{% if d.k is defined and d.k is not none %}ok{% endif %}", context), "ok");
}

TEST(ChatTemplate, IfElifElse) {
  const std::string source = "{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %}";
  EXPECT_EQ(render(source, {{"x", 1}}), "one");
  EXPECT_EQ(render(source, {{"x", 2}}), "two");
  EXPECT_EQ(render(source, {{"x", 5}}), "many");
  EXPECT_EQ(render("{% if tools %}t{% else %}no tools{% endif %}"), "no tools");
}

TEST(ChatTemplate, RaiseExceptionIsAnError) {
  const std::string out = render(
      "{% if x %}\n  {{ raise_exception('Roles must alternate!') }}{% endif %}", {{"x", true}});
  EXPECT_EQ(out, "ERROR: chat template line 2, column 6: raise_exception: Roles must alternate!");
}

TEST(ChatTemplate, ErrorsAreOneLineWithThePosition) {
  auto error_of = [](const std::string& source) {
    const std::string out = render(source);
    EXPECT_EQ(out.rfind("ERROR: ", 0), 0u) << source << " -> " << out;
    EXPECT_EQ(out.find('\n'), std::string::npos) << out;
    return out;
  };
  EXPECT_EQ(error_of("ab\ncd {{ x "),
            "ERROR: chat template line 2, column 4: unclosed '{{' (no '}}')");
  EXPECT_EQ(error_of("{% if x %}\nunterminated"),
            "ERROR: chat template line 1, column 4: unclosed '{% if %}' (no '{% endif %}')");
  EXPECT_EQ(error_of("{% for m in l %}x"),
            "ERROR: chat template line 1, column 4: unclosed '{% for %}' (no '{% endfor %}')");
  EXPECT_EQ(error_of("{{ x | nope }}"),
            "ERROR: chat template line 1, column 8: unknown filter 'nope'");
  EXPECT_EQ(error_of("{{ x is nope }}"),
            "ERROR: chat template line 1, column 9: unknown test 'nope'");
  EXPECT_EQ(error_of("{{ 1 + }}"),
            "ERROR: chat template line 1, column 8: expected an expression, got '}}'");
  EXPECT_EQ(error_of("{{ (1 }}"), "ERROR: chat template line 1, column 7: expected ')', got '}}'");
  EXPECT_EQ(error_of("{# open"), "ERROR: chat template line 1, column 1: unclosed comment '{#'");
  EXPECT_EQ(error_of("{{ 'abc }}"),
            "ERROR: chat template line 1, column 4: unterminated string literal");
  EXPECT_EQ(error_of("{% macro m() %}{% endmacro %}"),
            "ERROR: chat template line 1, column 4: unsupported statement 'macro'");
  EXPECT_EQ(error_of("{{ x.y }}"),
            "ERROR: chat template line 1, column 5: cannot read attribute 'y' of undefined");
  EXPECT_EQ(error_of("{{ 1 + 'a' - 2 }}"),
            "ERROR: chat template line 1, column 12: unsupported operand types for -: string and "
            "integer");
  EXPECT_EQ(error_of("{% endfor %}"),
            "ERROR: chat template line 1, column 4: unsupported statement 'endfor'");
}

TEST(ChatTemplate, TruncatedAndHostileTemplatesFailCleanly) {
  // Every prefix of the Qwen3 template parses or fails with a one-line error, never crashes.
  const std::string qwen3 =
      read_text(std::string(GOLINEAR_TEST_DATA) + "/tokenizer/chat_templates/qwen3.jinja");
  ASSERT_FALSE(qwen3.empty());
  const Json context =
      chat_template_context({{"user", "hi"}, {"assistant", "yo"}}, true, "", "<|im_end|>");
  for (size_t n = 0; n <= qwen3.size(); ++n) {
    const std::string out = render(qwen3.substr(0, n), context);
    if (out.rfind("ERROR: ", 0) == 0) {
      EXPECT_EQ(out.find('\n'), std::string::npos) << out;
    }
  }
  EXPECT_NE(render("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}")
                .find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(render("{{ 'ab' * 100000000 }}").find("too large"), std::string::npos);
  EXPECT_NE(render("{% for i in range(100000000) %}{% endfor %}").find("too large"),
            std::string::npos);
  // Nested loops that multiply (fuzz/chat_template found one over long strings): bounded in
  // steps, also with empty bodies, and in the bytes rendered.
  EXPECT_NE(render("{% for a in range(10000) %}{% for b in range(10000) %}{% endfor %}{% endfor %}")
                .find("steps to render"),
            std::string::npos);
  EXPECT_NE(render("{% for a in range(3000) %}{{ 'x' * 10000 }}{% endfor %}").find("MiB"),
            std::string::npos);
  EXPECT_EQ(
      render("{% for a in range(100) %}{% for b in range(100) %}.{% endfor %}{% endfor %}").size(),
      10000u);
}

// Work the step bound did not count (fuzz/chat_template's timeouts of nested loops copying long
// strings, corpus/chat_template/timeout-nested-loops-copying-strings and slow-unit-*): each fails
// fast with one line, where it took seconds, minutes or crashed before.
// A namespace that holds itself, directly or in a list (a cycle of shared values; the fuzzer's
// leak): renders, and is freed with the render (LeakSanitizer checks it in the ASan build,
// where this test and fuzz_replay.chat_template's `leak-namespace-holding-itself` run).
TEST(ChatTemplate, ANamespaceHoldingItselfIsFreed) {
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% set ns.n = ns %}{% set ns.l = [ns, 1] %}"
                   "{{ ns.l[1] }}{% set other = namespace(x=ns) %}{% set ns.o = other %}ok"),
            "1ok");
}

TEST(ChatTemplate, RenderWorkIsBounded) {
  auto error_has = [](const std::string& source, const std::string& what) {
    const std::string out = render(source);
    return out.rfind("ERROR: ", 0) == 0 && out.find(what) != std::string::npos &&
           out.find('\n') == std::string::npos;
  };
  // A long string copied by every use of its name, in a loop that prints nothing.
  EXPECT_TRUE(error_has(
      "{% set x = 'a' * 1000000 %}{% for i in range(100) %}{% if x %}{% endif %}{% endfor %}",
      "MiB of text to render"));
  // The fuzzer's reproducer: loops over the characters of a long string, nested.
  const std::string reproducer = read_text(std::string(GOLINEAR_TEST_DATA) +
                                           "/../../fuzz/corpus/chat_template/"
                                           "timeout-nested-loops-copying-strings");
  ASSERT_FALSE(reproducer.empty());
  const Json fuzz_context = chat_template_context({{"system", "You are helpful."},
                                                   {"user", "Hi {{ there }}"},
                                                   {"assistant", "Hello!"},
                                                   {"user", "Bye"}},
                                                  true, "<|begin_of_text|>", "<|eot_id|>", false);
  EXPECT_NE(render(reproducer, fuzz_context).find("steps to render"), std::string::npos);
  // Strings doubled by concatenation, and lists whose shared elements repeat exponentially
  // (printing, tojson and == would visit 2^64 elements).
  EXPECT_TRUE(
      error_has("{% set ns = namespace(x='ab') %}{% for i in range(64) %}"
                "{% set ns.x = ns.x + ns.x %}{% endfor %}",
                "MiB of text to render"));
  for (const char* use : {"{{ ns.l }}", "{{ ns.l|tojson }}", "{{ ns.l == ns.l }}",
                          "{{ ns.l ~ '' }}", "{{ ns.l in [ns.l] }}"})
    EXPECT_TRUE(error_has(std::string("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}"
                                      "{% set ns.l = [ns.l, ns.l] %}{% endfor %}") +
                              use,
                          "steps to render"))
        << use;
  EXPECT_TRUE(
      error_has("{% set ns = namespace(l=['a' * 1000000]) %}{% for i in range(30) %}"
                "{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l == ns.l }}",
                "MiB of text to render"));
  // Searches that std::string::find does in quadratic time, and values created per character.
  EXPECT_EQ(render("{{ ('a' * 200000 + 'b') in 'a' * 400000 }}"), "False");
  EXPECT_TRUE(error_has("{% set x = 'a' * 100000 %}{% for i in range(100) %}{{ x[5] }}{% endfor %}",
                        "steps to render"));
  EXPECT_TRUE(error_has("{% for i in range(16000000) %}{% endfor %}", "steps to render"));
  // Blocks nested deeper than the stack allows (the parser recursed once per block).
  std::string nested;
  for (int i = 0; i < 101; ++i) nested += "{% if true %}";
  EXPECT_TRUE(error_has(nested, "nested more than 100 deep"));
  // Integer powers by squaring (an exponent of 9e18 looped 9e18 times), overflow is an error.
  EXPECT_EQ(render("{{ 1 ** 9000000000000000000 }}"), "1");
  EXPECT_EQ(render("{{ 3 ** 39 }}|{{ (-2) ** 63 }}|{{ 2 ** 0 }}"),
            "4052555153018976267|-9223372036854775808|1");
  for (const char* overflow :
       {"{{ 2 ** 63 }}", "{{ 9223372036854775807 + 1 }}", "{{ (-9223372036854775807 - 1) // -1 }}",
        "{{ 4611686018427387904 * 2 }}", "{{ -9223372036854775807 - 2 }}"})
    EXPECT_TRUE(error_has(overflow, "integer overflow")) << overflow;
}

// The search behind `in`, split and replace (Knuth-Morris-Pratt) finds what std::string::find
// finds, overlapping prefixes included.
TEST(ChatTemplate, SubstringSearch) {
  EXPECT_EQ(render("{{ 'aab' in 'aaab' }}{{ 'abab' in 'abaabab' }}{{ 'abac' in 'ababab' }}"
                   "{{ '' in 'x' }}{{ 'x' in '' }}"),
            "TrueTrueFalseTrueFalse");
  EXPECT_EQ(render("{{ 'aaaa'.replace('aa', 'b') }}|{{ 'aaa'.split('aa') }}|"
                   "{{ 'abcabc'.split('bc') }}|{{ 'ababa'.replace('aba', 'x', 1) }}|"
                   "{{ 'xyz'.replace('', '-') }}"),
            "bb|['', 'a']|['a', 'a', '']|xba|xyz");
}

// The work bounds grow with the context: long chats render with the real templates (many short
// messages, with tool calls and results: the most steps per context value; few long ones: the
// most text per context byte).
TEST(ChatTemplate, LongChatsRenderWithinTheBounds) {
  struct Chat {
    int turns;
    size_t length;
    bool tools;
  };
  for (const char* name : {"llama3", "qwen3"}) {
    auto parsed = chat_template_parse(read_text(std::string(GOLINEAR_TEST_DATA) +
                                                "/tokenizer/chat_templates/" + name + ".jinja"));
    ASSERT_TRUE(parsed.ok()) << parsed.error();
    for (const Chat& chat : {Chat{2000, 1, false}, Chat{1000, 1, true}, Chat{30, 60000, false},
                             Chat{1, 1000000, false}}) {
      Json messages =
          Json::array({{{"role", "system"}, {"content", std::string(chat.length, 's')}}});
      for (int i = 0; i < chat.turns; ++i) {
        messages.push_back({{"role", "user"}, {"content", std::string(chat.length, 'u')}});
        Json answer = {{"role", "assistant"},
                       {"content", "<think>\n" + std::string(chat.length / 2, 'r') +
                                       "\n</think>\n\n" + std::string(chat.length / 2, 'a')}};
        if (chat.tools)
          answer["tool_calls"] = Json::array(
              {{{"type", "function"}, {"function", {{"name", "f"}, {"arguments", {{"x", i}}}}}}});
        messages.push_back(answer);
        if (chat.tools) messages.push_back({{"role", "tool"}, {"content", std::to_string(i)}});
      }
      Json context = {{"messages", messages},
                      {"add_generation_prompt", true},
                      {"bos_token", "<b>"},
                      {"eos_token", "<e>"}};
      if (chat.tools)
        context["tools"] =
            Json::array({{{"type", "function"},
                          {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}});
      auto rendered = parsed->render(context);
      EXPECT_TRUE(rendered.ok()) << name << ", " << chat.turns << " x " << chat.length << ": "
                                 << rendered.error();
      if (chat.tools && rendered.ok()) {  // the tool results are in
        EXPECT_NE(rendered->find("999"), std::string::npos) << name;
      }
    }
  }
}

TEST(ChatTemplate, BundledModelTemplateRenders) {
  const std::string path =
      std::string(GOLINEAR_MODEL_DIR) + "/tiny-llama3-25m/tokenizer_config.json";
  auto config = chat_template_config_read(path);
  ASSERT_TRUE(config.ok()) << config.error();
  ASSERT_FALSE(config->chat_template.empty());
  EXPECT_EQ(config->bos_token, "<|begin_of_text|>");
  EXPECT_EQ(config->eos_token, "<|end_of_text|>");
  auto parsed = chat_template_parse(config->chat_template);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  const std::vector<ChatMessage> messages = {{"system", "Be brief."},
                                             {"user", " Hi there \n"},
                                             {"assistant", "Hello."},
                                             {"user", "Tell a story."}};
  auto with_prompt =
      parsed->render(chat_template_context(messages, true, config->bos_token, config->eos_token));
  ASSERT_TRUE(with_prompt.ok()) << with_prompt.error();
  EXPECT_EQ(
      with_prompt.value(),
      "<|begin_of_text|>System: Be brief.\n\nUser: Hi there\n\nAssistant: Hello.<|end_of_text|>\n\n"
      "User: Tell a story.\n\nAssistant:");
  auto without = parsed->render(
      chat_template_context({{"user", "Hi"}}, false, config->bos_token, config->eos_token));
  ASSERT_TRUE(without.ok()) << without.error();
  EXPECT_EQ(without.value(), "<|begin_of_text|>User: Hi\n\n");
}

}  // namespace
}  // namespace golinear
