// A load generator for `golinear serve` through HTTP with the npm openai client: C concurrent
// streams, each R requests of M tokens, against a running server. Prints aggregate generated
// tokens/s, p50/p99 time to first token and inter-token latency (JSON on stdout).
//
//   node bench/serve/load.mjs URL [C=8] [R=2] [M=64]
//   (the openai client from build/npm/serve, fetched by the build; GOLINEAR_NPM_OPENAI overrides)
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const [url, C = 8, R = 2, M = 64] = process.argv.slice(2);
if (!url) {
  console.error('usage: node bench/serve/load.mjs URL [concurrency] [requests each] [max_tokens]');
  process.exit(2);
}
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const npm = process.env.GOLINEAR_NPM_OPENAI ?? join(root, 'build', 'npm', 'serve', 'node_modules');
const { OpenAI } = createRequire(npm + '/')('openai');
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: process.env.OPENAI_API_KEY ?? 'none', maxRetries: 0 });
const model = (await client.models.list()).data[0].id;

const ttft = [], itl = [];
let tokens = 0;
const t0 = performance.now();
await Promise.all(Array.from({ length: Number(C) }, async (_, c) => {
  for (let r = 0; r < Number(R); ++r) {
    const start = performance.now();
    let last = null;
    const stream = await client.completions.create({
      model, prompt: `Request ${c}.${r}: once upon a time`, max_tokens: Number(M), temperature: 0.8,
      seed: c * 1000 + r, stream: true, stream_options: { include_usage: true },
    });
    for await (const chunk of stream) {
      if (chunk.usage) tokens += chunk.usage.completion_tokens;
      if (!chunk.choices.length || !chunk.choices[0].text) continue;
      const now = performance.now();
      if (last === null) ttft.push(now - start); else itl.push(now - last);
      last = now;
    }
  }
}));
const seconds = (performance.now() - t0) / 1000;
const pct = (a, p) => (a.sort((x, y) => x - y), a[Math.min(a.length - 1, Math.floor(p * a.length))] ?? NaN);
console.log(JSON.stringify({
  concurrency: Number(C), requests: Number(C) * Number(R), max_tokens: Number(M), seconds: +seconds.toFixed(2),
  generated_tokens: tokens, tokens_per_s: +(tokens / seconds).toFixed(1),
  ttft_ms: { p50: +pct(ttft, 0.5).toFixed(1), p99: +pct(ttft, 0.99).toFixed(1) },
  itl_ms: { p50: +pct(itl, 0.5).toFixed(1), p99: +pct(itl, 0.99).toFixed(1) },
}));
