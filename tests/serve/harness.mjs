// Starts the real `golinear serve` binary on a free loopback port for the server tests (run by
// `node --test`, registered in ctest by tests/CMakeLists.txt) and gives them the npm `openai`
// client. Every wait here is bounded.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';

export const CLI = process.env.GOLINEAR_CLI;
export const MODEL = process.env.GOLINEAR_MODEL;
const NPM = process.env.GOLINEAR_NPM_OPENAI;
assert.ok(CLI && MODEL && NPM, 'GOLINEAR_CLI, GOLINEAR_MODEL and GOLINEAR_NPM_OPENAI must be set');

export function openaiClass() {
  const require = createRequire(NPM + '/');
  try {
    return require('openai').OpenAI;
  } catch (e) {
    throw new Error(`the npm openai client is missing under ${NPM} (tests/serve/fetch_npm_openai.sh): ${e.message}`);
  }
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls `condition` (async) every 50 ms until it is true or `ms` passed; returns its last value.
export async function until(condition, ms, what) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await condition();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(50);
  }
}

// `golinear serve MODEL --port 0 --threads 1 ...args`; resolves once it listens (and, unless
// waitReady is false, once /health says 200).
export async function startServer(args = [], { waitReady = true, key } = {}) {
  const proc = spawn(CLI, ['serve', MODEL, '--port', '0', '--threads', '1', ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no 'listening' line within 30 s: ${stderr}`)), 30000);
    proc.stderr.on('data', (d) => {
      stderr += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    exited.then(({ code }) => {
      clearTimeout(timer);
      reject(new Error(`golinear serve exited (${code}) before listening: ${stderr}`));
    });
  });
  const url = `http://127.0.0.1:${port}`;
  const server = {
    proc,
    url,
    port,
    exited,
    stderr: () => stderr,
    headers: key ? { Authorization: `Bearer ${key}` } : {},
    client(options = {}) {
      const OpenAI = openaiClass();
      return new OpenAI({ baseURL: `${url}/v1`, apiKey: key ?? 'none', maxRetries: 0, timeout: 60000, ...options });
    },
    async get(path) {
      const res = await fetch(url + path, { headers: server.headers });
      return { status: res.status, text: await res.text() };
    },
    async post(path, body, extraHeaders = {}) {
      const res = await fetch(url + path, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...server.headers, ...extraHeaders },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });
      const text = await res.text();
      let json;
      try { json = JSON.parse(text); } catch { json = undefined; }
      return { status: res.status, json, text };
    },
    // SIGTERM, then the exit status (SIGKILL after `ms`).
    async stop(ms = 20000) {
      if (proc.exitCode !== null || proc.signalCode !== null) return exited;
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), ms);
      const result = await exited;
      clearTimeout(timer);
      return result;
    },
  };
  if (waitReady) await until(async () => (await fetch(url + '/health').catch(() => ({ status: 0 }))).status === 200, 60000, '/health 200');
  return server;
}

// The `data:` payloads of a server-sent-events body.
export function sseEvents(text) {
  return text.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));
}
