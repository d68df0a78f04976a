// The prompt-state cache against the real server: a multi-turn chat restores the previous turn's
// prompt state (cached_tokens > 0) and gives the same text as a server without the cache; a
// repeated prompt is served from the cache whole.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer } from './harness.mjs';

const MODEL = 'tiny-llama3-25m';
let cached, uncached, slotDir;

before(async () => {
  [cached, uncached] = await Promise.all([
    startServer(['--parallel', '1', '--cache-ram', '64', '--slot-save-path', (slotDir = mkdtempSync(join(tmpdir(), 'golinear-slots-')))]),
    startServer(['--parallel', '1', '--cache-ram', '0']),
  ]);
});

after(async () => {
  const results = await Promise.all([cached.stop(), uncached.stop()]);
  rmSync(slotDir, { recursive: true, force: true });
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

test('slot save, erase, restore: a prompt extending the saved tokens starts from them', async () => {
  const client = cached.client();
  await client.completions.create({ model: MODEL, prompt: 'The lighthouse keeper', max_tokens: 8, temperature: 0 });
  const saved = await cached.post('/slots/0?action=save', { filename: 'keeper.json' });
  assert.equal(saved.status, 200, saved.text);
  const file = JSON.parse(readFileSync(join(slotDir, 'keeper.json'), 'utf8'));
  assert.equal(file.tokens.length, saved.json.n_saved);
  assert.equal((await cached.post('/slots/0?action=erase', {})).status, 200);
  // Other work on the slot; then the restore puts the saved state back (into the prompt cache).
  await client.completions.create({ model: MODEL, prompt: 'Something else entirely', max_tokens: 8, temperature: 0 });
  const restored = await cached.post('/slots/0?action=restore', { filename: 'keeper.json' });
  assert.equal(restored.status, 200, restored.text);
  assert.equal(restored.json.n_restored, file.tokens.length);
  const prompt = [...file.tokens, 13, 198];
  const params = { model: MODEL, prompt, max_tokens: 8, temperature: 0.7, seed: 2 };
  const r = await client.completions.create(params);
  assert.equal(r.usage.prompt_tokens_details.cached_tokens, file.tokens.length);
  const reference = await uncached.client().completions.create(params);
  assert.equal(r.choices[0].text, reference.choices[0].text);

  const errors = [
    [cached, '/slots/0?action=restore', { filename: 'missing.json' }, 404],
    [cached, '/slots/0?action=restore', { filename: '../etc/passwd' }, 400],
    [cached, '/slots/0?action=save', {}, 400],
    [cached, '/slots/0?action=bogus', {}, 400],
    [cached, '/slots/7?action=save', { filename: 'x.json' }, 400],
    [uncached, '/slots/0?action=save', { filename: 'x.json' }, 400],  // no --slot-save-path
  ];
  for (const [server, path, body, status] of errors) {
    const e = await server.post(path, body);
    assert.equal(e.status, status, `${path} ${e.text}`);
    assert.equal(typeof e.json.error.message, 'string');
  }
});
