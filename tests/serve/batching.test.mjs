// Continuous batching against the real server: more concurrent streams than slots (they queue,
// run batched, and each gives the text it gives alone), a full queue answers 503, a client that
// disconnects (streamed or not) frees its slot in bounded time, and a slot's earlier request
// never changes a later one's output.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, until, sleep } from './harness.mjs';

const MODEL = 'tiny-llama3-25m';
let server, client;

before(async () => {
  // Two slots, room for three waiting requests, no prompt cache (the cache has its own test).
  server = await startServer(['--parallel', '2', '--max-queue', '3', '--cache-ram', '0']);
  client = server.client();
});

after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, server.stderr());
});

const metric = async (name) => {
  const text = (await server.get('/metrics')).text;
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
};

const idle = async () => JSON.parse((await server.get('/slots')).text).every((s) => s.state === 'idle');

async function streamText(params) {
  let text = '', finish = null;
  for await (const chunk of await client.completions.create({ ...params, stream: true })) {
    for (const c of chunk.choices) {
      text += c.text;
      finish = c.finish_reason ?? finish;
    }
  }
  return { text, finish };
}

test('5 concurrent streams on 2 slots: all finish, batched, each as it runs alone', async () => {
  const prompts = ['The cat', 'A ship sailed', 'Winter came', 'He said', 'Numbers: 1, 2,'];
  const params = (i) => ({ model: MODEL, prompt: prompts[i], max_tokens: 24, temperature: 0.8, seed: 100 + i });
  const stepsBefore = await metric('golinear_decode_steps_total');
  const sequencesBefore = await metric('golinear_decode_step_sequences_total');
  const together = await Promise.all(prompts.map((_, i) => streamText(params(i))));
  const steps = (await metric('golinear_decode_steps_total')) - stepsBefore;
  const sequences = (await metric('golinear_decode_step_sequences_total')) - sequencesBefore;
  assert.ok(sequences / steps > 1.2, `mean decode batch ${sequences / steps}: the streams did not run together`);
  for (let i = 0; i < prompts.length; ++i) {
    const alone = await client.completions.create(params(i));
    assert.equal(together[i].text, alone.choices[0].text, `stream ${i}`);
    assert.equal(together[i].finish, 'length');
  }
  assert.ok(await idle());
});

test('beyond the slots and the queue: 503', async () => {
  const controllers = [];
  const long = () => {
    const c = new AbortController();
    controllers.push(c);
    return fetch(server.url + '/v1/completions', {
      method: 'POST', signal: c.signal, headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'Long story:', max_tokens: 4000, temperature: 0, stream: true }),
    });
  };
  const running = [long(), long(), long(), long(), long()];  // 2 slots + 3 waiting
  await Promise.all(running);  // each got its headers: admitted or queued
  const r = await server.post('/v1/completions', { prompt: 'one more', max_tokens: 2 });
  assert.equal(r.status, 503);
  assert.equal(r.json.error.type, 'unavailable_error');
  for (const c of controllers) c.abort();
  // Every request gone: none running, none waiting (a slot can look idle for a moment between
  // a cancelled request and the next waiting one).
  const gone = async () => (await idle()) && (await metric('golinear_requests_waiting')) === 0 &&
                           (await metric('golinear_requests_running')) === 0;
  await until(gone, 10000, 'no request running or waiting after the clients left');
  assert.ok((await metric('golinear_requests_rejected_total')) >= 1);
});

test('a stream whose client disconnects frees its slot within seconds', async () => {
  const controller = new AbortController();
  const stream = await client.completions.create(
    { model: MODEL, prompt: 'Once', max_tokens: 6000, temperature: 0, stream: true },
    { signal: controller.signal });
  let chunks = 0;
  for await (const _ of stream) if (++chunks === 3) break;  // leaving the loop aborts the request
  controller.abort();
  assert.equal(chunks, 3);
  const t0 = Date.now();
  await until(idle, 5000, 'the slot to be freed');
  console.log(`slot freed ${Date.now() - t0} ms after the disconnect`);
  const cancelled = /golinear_requests_finished_total\{reason="cancelled"\} (\d+)/.exec((await server.get('/metrics')).text);
  assert.ok(cancelled && Number(cancelled[1]) >= 1);
});

test('a non-streamed request whose client disconnects frees its slot within seconds', async () => {
  const controller = new AbortController();
  const pending = fetch(server.url + '/v1/completions', {
    method: 'POST', signal: controller.signal, headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'Once', max_tokens: 6000, temperature: 0 }),
  }).catch((e) => e);
  await until(async () => !(await idle()), 5000, 'the request to start');
  controller.abort();
  await pending;
  await until(idle, 5000, 'the slot to be freed');
});

test('what ran on a slot before does not change the next request', async () => {
  const a = { model: MODEL, prompt: 'The garden', max_tokens: 16, temperature: 0.7, seed: 42 };
  const first = (await client.completions.create(a)).choices[0].text;
  // Fill both slots with other, longer work, then ask again.
  await Promise.all([0, 1].map((i) => client.completions.create({ model: MODEL, prompt: `Other text ${i} `.repeat(20), max_tokens: 20, temperature: 1, seed: i })));
  const again = (await client.completions.create(a)).choices[0].text;
  assert.equal(again, first);
  const chat = { model: MODEL, messages: [{ role: 'user', content: 'Say something.' }], max_tokens: 12, temperature: 0 };
  const c1 = (await client.chat.completions.create(chat)).choices[0].message.content;
  await client.completions.create({ model: MODEL, prompt: 'Unrelated', max_tokens: 30, temperature: 1, seed: 9 });
  const c2 = (await client.chat.completions.create(chat)).choices[0].message.content;
  assert.equal(c2, c1);
});
