// SIGTERM: the server stops accepting connections, the streams it is running finish (with their
// [DONE]) and it exits 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { startServer, sseEvents, sleep } from './harness.mjs';

test('SIGTERM drains the running streams and exits 0', async () => {
  const server = await startServer(['--parallel', '2']);
  const body = (i) => JSON.stringify({ prompt: `Story ${i}:`, max_tokens: 80, temperature: 0, stream: true });
  const responses = await Promise.all([0, 1, 2].map((i) => fetch(server.url + '/v1/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json', Connection: 'close' }, body: body(i),
  })));
  // Once the first chunk of a stream has come, stop the server.
  const readers = responses.map((r) => r.body.getReader());
  const decoder = new TextDecoder();
  const texts = ['', '', ''];
  const first = await readers[0].read();
  texts[0] += decoder.decode(first.value);
  server.proc.kill('SIGTERM');
  // A server that has not drained in 60 s is killed (and the test fails); the ASan build needs
  // 25–30 s for these 3 × 80 tokens on 2 slots when other tests run beside it.
  const timer = setTimeout(() => server.proc.kill('SIGKILL'), 60000);
  // A new connection is refused (a connection kept alive from before may still be answered).
  await sleep(200);
  const refused = await new Promise((resolve) => {
    const socket = connect(server.port, '127.0.0.1');
    socket.on('connect', () => { socket.destroy(); resolve(false); });
    socket.on('error', (e) => resolve(e.code === 'ECONNREFUSED'));
  });
  assert.ok(refused, 'a new connection was accepted after SIGTERM');
  await Promise.all(readers.map(async (reader, i) => {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      texts[i] += decoder.decode(value, { stream: true });
    }
  }));
  for (const text of texts) {
    const events = sseEvents(text);
    assert.equal(events.at(-1), '[DONE]');
    assert.equal(JSON.parse(events.at(-2)).choices[0].finish_reason, 'length');
  }
  const { code, signal } = await server.exited;
  clearTimeout(timer);
  assert.equal(signal, null, server.stderr());
  assert.equal(code, 0, server.stderr());
  assert.match(server.stderr(), /SIGTERM/);
});
