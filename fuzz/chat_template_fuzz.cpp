// The chat-template interpreter on arbitrary template sources: parsed or refused; a template that
// parses renders a fixed conversation or fails with an error, in bounded time and memory.
#include <string>

#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const golinear::Json context = golinear::chat_template_context(
      {{"system", "You are helpful."}, {"user", "Hi {{ there }}"}, {"assistant", "Hello!"}, {"user", "Bye"}},
      /*add_generation_prompt=*/true, "<|begin_of_text|>", "<|eot_id|>", false);
  auto parsed = golinear::chat_template_parse(std::string(reinterpret_cast<const char*>(data), size));
  if (!parsed.ok()) return 0;
  (void)parsed->render(context);
  return 0;
}
