// The prompt-state cache against the real server: a multi-turn chat restores the previous turn's
// prompt state (cached_tokens > 0) and gives the same text as a server without the cache; a
// repeated prompt is served from the cache whole.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from './harness.mjs';

const MODEL = 'tiny-llama3-25m';
let cached, uncached;

before(async () => {
  [cached, uncached] = await Promise.all([
    startServer(['--parallel', '1', '--cache-ram', '64']),
    startServer(['--parallel', '1', '--cache-ram', '0']),
  ]);
});

after(async () => {
  const results = await Promise.all([cached.stop(), uncached.stop()]);
  for (const r of results) assert.equal(r.code, 0);
});

async function conversation(server) {
  const client = server.client();
  const messages = [{ role: 'system', content: 'You answer in one line.' }];
  const turns = [];
  for (const question of ['Where is the river?', 'And the bridge?', 'Thank you.']) {
    messages.push({ role: 'user', content: question });
    const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 12, temperature: 0.6, seed: 1 });
    const answer = r.choices[0].message.content;
    turns.push({ answer, cached: r.usage.prompt_tokens_details.cached_tokens, prompt: r.usage.prompt_tokens });
    messages.push({ role: 'assistant', content: answer });
  }
  return turns;
}

test('multi-turn chat: cached_tokens > 0 after the first turn, the same text as without the cache', async () => {
  const [withCache, without] = await Promise.all([conversation(cached), conversation(uncached)]);
  console.log(JSON.stringify(withCache));
  assert.ok(withCache.every((t) => t.answer.length > 0));
  assert.deepEqual(withCache.map((t) => t.answer), without.map((t) => t.answer));
  assert.equal(withCache[0].cached, 0);
  for (const t of withCache.slice(1)) {
    assert.ok(t.cached > 0 && t.cached < t.prompt, JSON.stringify(t));
  }
  for (const t of without) assert.equal(t.cached, 0);
  const metrics = (await cached.get('/metrics')).text;
  assert.ok(Number(/^golinear_prompt_cache_hits_total (\d+)$/m.exec(metrics)[1]) >= 2);
  assert.ok(Number(/^golinear_prompt_cache_bytes (\d+)$/m.exec(metrics)[1]) > 0);
});

test('a repeated prompt is restored whole and gives the same text', async () => {
  const client = cached.client();
  const params = { model: MODEL, prompt: 'A repeated prompt about the sea and the wind', max_tokens: 10, temperature: 0.9, seed: 4 };
  const a = await client.completions.create(params);
  const b = await client.completions.create(params);
  assert.equal(b.usage.prompt_tokens_details.cached_tokens, b.usage.prompt_tokens);
  assert.equal(b.choices[0].text, a.choices[0].text);
  const c = await uncached.client().completions.create(params);
  assert.equal(c.choices[0].text, a.choices[0].text);
});
