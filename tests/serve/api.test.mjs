// The API against the real server: health while loading, models, keys, completions and chat
// (plain and streamed), sampling options, stop strings, logprobs, tokenize, every malformed
// request's status and error object, /metrics (promtool when installed) and /slots.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, sseEvents } from './harness.mjs';

const KEY = 'test-key-1234';
const MODEL = 'tiny-llama3-25m';
let server, client, dir, firstHealth;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'golinear-serve-'));
  writeFileSync(join(dir, 'keys'), `\n  other-key \n${KEY}\n`);
  server = await startServer(['--api-key-file', join(dir, 'keys'), '--parallel', '2', '--body-limit', '65536'], { waitReady: false, key: KEY });
  // The first health check comes while the model is still loading.
  const res = await fetch(server.url + '/health');
  firstHealth = { status: res.status, json: await res.json() };
  const end = Date.now() + 60000;
  while ((await fetch(server.url + '/health')).status !== 200) {
    assert.ok(Date.now() < end, 'server not ready within 60 s');
    await new Promise((r) => setTimeout(r, 50));
  }
  client = server.client();
});

after(async () => {
  const { code } = await server.stop();
  rmSync(dir, { recursive: true, force: true });
  assert.equal(code, 0, server.stderr());
});

test('health: 503 while loading, 200 when ready, no key needed', async () => {
  // The first check is sent as soon as the server listens, before or while the model loads
  // (loading the tiny model from a warm page cache can beat it: then it is already 200).
  if (firstHealth.status !== 200) {
    assert.equal(firstHealth.status, 503);
    assert.equal(firstHealth.json.error.type, 'unavailable_error');
  } else {
    console.log('the model loaded before the first /health');
  }
  const res = await fetch(server.url + '/health');
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { status: 'ok' });
});

test('models lists the served model', async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [MODEL]);
});

test('keys: missing or wrong key is 401 authentication_error; the other key of the file works', async () => {
  for (const headers of [{}, { Authorization: 'Bearer wrong' }, { Authorization: KEY }]) {
    const res = await fetch(server.url + '/v1/models', { headers });
    assert.equal(res.status, 401);
    assert.equal((await res.json()).error.type, 'authentication_error');
  }
  const res = await fetch(server.url + '/v1/models', { headers: { Authorization: 'Bearer other-key' } });
  assert.equal(res.status, 200);
  const wrong = server.client({ apiKey: 'wrong' });
  await assert.rejects(wrong.completions.create({ model: MODEL, prompt: 'Hi', max_tokens: 2 }), (e) => e.status === 401);
});

test('completion: text, finish_reason, usage with cached_tokens, max_tokens', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 7, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 1);
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(r.choices[0].text.length > 0);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 7);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 7);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
});

const chatMessages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Name a color.' },
];

test('stream == non-stream (completions and chat, sampled with a seed), ending in [DONE]', async () => {
  const params = { model: MODEL, max_tokens: 16, temperature: 0.9, top_p: 0.95, seed: 11 };
  const plain = await client.completions.create({ ...params, prompt: 'The river' });
  let streamed = '', finish = null, usage = null;
  for await (const chunk of await client.completions.create({ ...params, prompt: 'The river', stream: true, stream_options: { include_usage: true } })) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      streamed += c.text;
      finish = c.finish_reason ?? finish;
    }
  }
  assert.equal(streamed, plain.choices[0].text);
  assert.equal(finish, plain.choices[0].finish_reason);
  assert.equal(usage.completion_tokens, plain.usage.completion_tokens);

  const chatPlain = await client.chat.completions.create({ ...params, messages: chatMessages });
  let chatStreamed = '', role = null;
  for await (const chunk of await client.chat.completions.create({ ...params, messages: chatMessages, stream: true })) {
    for (const c of chunk.choices) {
      role = c.delta.role ?? role;
      chatStreamed += c.delta.content ?? '';
    }
  }
  assert.equal(role, 'assistant');
  assert.equal(chatStreamed, chatPlain.choices[0].message.content);

  const raw = await server.post('/v1/chat/completions', { ...params, messages: chatMessages, stream: true });
  const events = sseEvents(raw.text);
  assert.equal(events.at(-1), '[DONE]');
  assert.equal(JSON.parse(events.at(-2)).choices[0].finish_reason, chatPlain.choices[0].finish_reason);
});

test('same seed gives the same text; other seeds other texts', async () => {
  const ask = (seed) => client.completions.create({ model: MODEL, prompt: 'In the morning', max_tokens: 24, temperature: 1.0, seed });
  const a = await ask(5), b = await ask(5);
  assert.equal(a.choices[0].text, b.choices[0].text);
  const others = new Set([a, await ask(6), await ask(7), await ask(8)].map((r) => r.choices[0].text));
  assert.ok(others.size >= 2, 'four seeds gave one text');
});

test('top_k 1 and min_p 1 are greedy; temperature 0 is greedy', async () => {
  const base = { model: MODEL, prompt: 'The old house', max_tokens: 12 };
  const greedy = (await client.completions.create({ ...base, temperature: 0 })).choices[0].text;
  const k1 = (await client.completions.create({ ...base, temperature: 1.5, seed: 3, top_k: 1 })).choices[0].text;
  const p1 = (await client.completions.create({ ...base, temperature: 1.5, seed: 3, min_p: 1.0 })).choices[0].text;
  assert.equal(k1, greedy);
  assert.equal(p1, greedy);
});

test('stop strings cut the text before the first match, streamed or not', async () => {
  const base = { model: MODEL, prompt: 'Once upon a time', max_tokens: 20, temperature: 0 };
  const full = (await client.completions.create(base)).choices[0].text;
  const stop = full.slice(6, 9);
  const expected = full.slice(0, full.indexOf(stop));
  const r = await client.completions.create({ ...base, stop: [stop, 'never-there'] });
  assert.equal(r.choices[0].text, expected);
  assert.equal(r.choices[0].finish_reason, 'stop');
  let streamed = '';
  for await (const chunk of await client.completions.create({ ...base, stop, stream: true })) streamed += chunk.choices[0]?.text ?? '';
  assert.equal(streamed, expected);
});

test('logprobs: one entry per token, top_logprobs sorted, the greedy choice first', async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages: chatMessages, max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 3 });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  for (const t of content) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
    assert.equal(t.top_logprobs[0].token, t.token);
    assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6);
  }
  const c = await client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 4, temperature: 0, logprobs: 2 });
  assert.equal(c.choices[0].logprobs.tokens.length, 4);
  assert.equal(c.choices[0].logprobs.tokens.join(''), c.choices[0].text);
});

test('tokenize and detokenize round-trip', async () => {
  const t = await server.post('/tokenize', { content: 'Hello world' });
  assert.equal(t.status, 200);
  assert.ok(t.json.tokens.length >= 3);
  assert.equal(t.json.count, t.json.tokens.length);
  const plain = await server.post('/tokenize', { content: 'Hello world', add_special: false });
  assert.equal(plain.json.tokens.length, t.json.tokens.length - 1);  // no BOS
  const d = await server.post('/detokenize', { tokens: plain.json.tokens });
  assert.equal(d.json.content, 'Hello world');
  // A prompt of token ids is served like its text.
  const byIds = await client.completions.create({ model: MODEL, prompt: t.json.tokens, max_tokens: 5, temperature: 0 });
  const byText = await client.completions.create({ model: MODEL, prompt: 'Hello world', max_tokens: 5, temperature: 0 });
  assert.equal(byIds.choices[0].text, byText.choices[0].text);
});

test('malformed requests get their status and an error object, never a crash', async () => {
  const cases = [
    ['/v1/completions', '{"prompt": "hi"', 400],
    ['/v1/completions', '[1, 2]', 400],
    ['/v1/completions', '"hi"', 400],
    ['/v1/completions', '', 400],
    ['/v1/completions', { prompt: 5 }, 400, null, 'prompt'],
    ['/v1/completions', { prompt: 'hi', max_tokens: 'ten' }, 400, null, 'max_tokens'],
    ['/v1/completions', { prompt: 'hi', max_tokens: 0 }, 400, null, 'max_tokens'],
    ['/v1/completions', { prompt: 'hi', temperature: 'hot' }, 400, null, 'temperature'],
    ['/v1/completions', { prompt: 'hi', top_p: 2 }, 400, null, 'top_p'],
    ['/v1/completions', { prompt: 'hi', stream: 'yes' }, 400, null, 'stream'],
    ['/v1/completions', { prompt: 'hi', stop: [1] }, 400, null, 'stop'],
    ['/v1/completions', { prompt: 'hi', seed: 1.5 }, 400, null, 'seed'],
    ['/v1/completions', { prompt: 'hi', n: 2 }, 400, null, 'n'],
    ['/v1/completions', { model: 'gpt-4', prompt: 'hi' }, 400, 'model_not_found', 'model'],
    ['/v1/completions', { model: 7, prompt: 'hi' }, 400, null, 'model'],
    ['/v1/completions', { prompt: [1, 99999999] }, 400, null, 'prompt'],
    ['/v1/completions', { prompt: [1, -1] }, 400, null, 'prompt'],
    ['/v1/completions', { prompt: '' }, 400, null, 'prompt'],
    ['/v1/completions', { prompt: [] }, 400, null, 'prompt'],
    ['/v1/completions', {}, 400, null, 'prompt'],
    ['/v1/completions', { prompt: ['a', 'b'] }, 400, null, 'prompt'],
    ['/v1/completions', { prompt: 'hi', max_tokens: 9000 }, 400, 'context_length_exceeded', 'max_tokens'],
    ['/v1/completions', { prompt: new Array(8200).fill(5) }, 400, 'context_length_exceeded', 'prompt'],
    ['/v1/chat/completions', { messages: [] }, 400, null, 'messages'],
    ['/v1/chat/completions', { messages: 'hi' }, 400, null, 'messages'],
    ['/v1/chat/completions', { messages: [{ content: 'no role' }] }, 400, null, 'messages'],
    ['/v1/chat/completions', { messages: [{ role: 'wizard', content: 'x' }] }, 400, null, 'messages'],
    ['/v1/chat/completions', { messages: [{ role: 'user', content: 5 }] }, 400, null, 'messages'],
    ['/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], logprobs: 'yes' }, 400, null, 'logprobs'],
    ['/detokenize', { tokens: [-1] }, 400, null, 'tokens'],
    ['/detokenize', { tokens: 'abc' }, 400, null, 'tokens'],
    ['/tokenize', { content: 5 }, 400],
    ['/v1/completions', { prompt: 'x'.repeat(70000) }, 413],
    ['/v1/nothing', {}, 404],
  ];
  for (const [path, body, status, code, param] of cases) {
    const r = await server.post(path, body);
    const what = `${path} ${JSON.stringify(body).slice(0, 80)} → ${r.status} ${r.text.slice(0, 200)}`;
    assert.equal(r.status, status, what);
    assert.equal(typeof r.json?.error?.message, 'string', what);
    assert.ok(r.json.error.message.length > 0, what);
    assert.equal(typeof r.json.error.type, 'string', what);
    if (code) assert.equal(r.json.error.code, code, what);
    if (param) assert.equal(r.json.error.param, param, what);
  }
  const long = await server.post('/v1/completions', { prompt: 'hi', max_tokens: 9000 });
  assert.match(long.json.error.message, /^This model's maximum context length is 8192 tokens\. However, you requested 9002 tokens \(2 in the prompt, 9000 in the completion\)\./);
  assert.equal((await fetch(server.url + '/health')).status, 200);
});

test('metrics: Prometheus text that promtool accepts, counting the work done', async () => {
  const r = await server.get('/metrics');
  assert.equal(r.status, 200);
  const value = (name) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(r.text)?.[1]);
  assert.ok(value('golinear_generation_tokens_total') > 0);
  assert.ok(value('golinear_prompt_tokens_total') > 0);
  assert.equal(value('golinear_slots'), 2);
  assert.match(r.text, /golinear_http_requests_total\{endpoint="\/v1\/completions",code="400"\} \d+/);
  const promtool = spawnSync('promtool', ['check', 'metrics'], { input: r.text, encoding: 'utf8' });
  if (promtool.error?.code === 'ENOENT') {
    console.log('promtool not installed (Debian package prometheus): check skipped');
  } else {
    assert.equal(promtool.status, 0, promtool.stdout + promtool.stderr);
  }
});

test('slots: one entry per slot, idle when nothing runs', async () => {
  const r = await server.get('/slots');
  const slots = JSON.parse(r.text);
  assert.equal(slots.length, 2);
  for (const s of slots) {
    assert.equal(s.state, 'idle');
    assert.equal(s.n_ctx, 8192);
  }
});
