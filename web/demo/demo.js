// The demo page: pick a model (URL, file, drop), load it with a progress bar, chat with
// streamed answers and their timings, stop an answer. It uses only the package's public API
// (../src/index.js), so it doubles as an example of it.

import { createEngine } from '../src/index.js';
import { explainError, formatProgress, formatTimings } from './format.js';

const $ = (id) => document.getElementById(id);
const ui = {
  badge: $('backend-badge'), modelForm: $('model-form'), modelUrl: $('model-url'), presets: $('model-presets'),
  modelFile: $('model-file'), backend: $('backend'), load: $('load'), progress: $('load-progress'),
  progressBar: $('progress-bar'), progressText: $('progress-text'), systemPrompt: $('system-prompt'),
  temperature: $('temperature'), maxTokens: $('max-tokens'), speculative: $('speculative'),
  answerFormat: $('answer-format'), schema: $('schema'),
  messages: $('messages'), error: $('error'), composer: $('composer'), prompt: $('prompt'),
  send: $('send'), stop: $('stop'), newChat: $('new-chat'), dropOverlay: $('drop-overlay'),
};

// The two test models (scripts/fetch-models.sh puts them in models/; `npm run demo` serves
// that folder at /models/). ?model=URL preselects another.
const PRESETS = [
  ['/models/SmolLM2-135M-Instruct.Q4_1.gguf', 'SmolLM2 135M Instruct (Q4_1, 98 MB)', 'smollm2'],
  ['/models/gemma-3-270m-q4_k_m.gguf', 'Gemma 3 270M (Q4_K_M, 253 MB)', 'gemma3'],
];

let engine = null;
let history = []; // the conversation sent with each request: [{ role, content }]
let answering = null; // AbortController of the answer being streamed

function showError(e, text = explainError(e)) {
  ui.error.textContent = text;
  ui.error.hidden = false;
}

/**
 * When `model` is a file the demo server's models/ folder lacks (a fresh clone that never ran
 * scripts/fetch-models.sh), the sentence that says how to get it; else null.
 */
async function missingOnDemoServer(model) {
  if (typeof model !== 'string') return null;
  const url = new URL(model, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith('/models/')) return null;
  try {
    if ((await fetch(url, { method: 'HEAD' })).status !== 404) return null;
  } catch {
    return null;
  }
  const preset = PRESETS.find(([path]) => path === url.pathname);
  const name = decodeURIComponent(url.pathname.slice('/models/'.length));
  return `${name} is not in the demo server's models/ folder. In the repository, run `
    + `scripts/fetch-models.sh ${preset ? preset[2] : 'all'} (it fetches the test models), then Load again.`;
}

function clearError() {
  ui.error.hidden = true;
  ui.error.textContent = '';
}

function setBusy({ loading = false, streaming = false }) {
  const ready = engine !== null && !loading;
  ui.load.disabled = loading || streaming;
  ui.prompt.disabled = !ready;
  ui.send.disabled = !ready || streaming;
  ui.stop.disabled = !streaming;
}

function setBadge(backend, reason, detail = '') {
  ui.badge.dataset.backend = backend;
  const names = { wasm: 'WebAssembly', webgpu: 'WebGPU', companion: 'Companion host' };
  ui.badge.textContent = `${names[backend] ?? backend}${detail ? ` · ${detail}` : ''} — ${reason}`;
}

async function load(model) {
  clearError();
  await engine?.unload();
  engine = null;
  history = [];
  ui.messages.replaceChildren();
  setBusy({ loading: true });
  ui.progress.hidden = false;
  ui.progressBar.value = 0;
  ui.progressText.textContent = 'Starting…';
  ui.badge.dataset.backend = 'none';
  ui.badge.textContent = 'Loading…';
  try {
    engine = await createEngine({
      model,
      backend: ui.backend.value,
      // Only when asked for: 'auto' means the in-page engine here.
      ...(ui.backend.value === 'companion' ? { companionUrl: COMPANION_URL, apiKey: COMPANION_KEY } : {}),
      contextSize: 4096,
      onProgress: (p) => {
        if (p.phase === 'backend') setBadge(p.backend, p.reason);
        if (p.progress !== undefined) ui.progressBar.value = p.progress;
        else ui.progressBar.removeAttribute('value'); // no length: an indeterminate bar
        ui.progressText.textContent = p.phase === 'ready' ? `Loaded: ${formatProgress(p)}` : formatProgress(p);
      },
    });
    const i = engine.info;
    const build = engine.backend === 'wasm' ? `${i.build === 'threads' ? `${i.threads} threads` : '1 thread'}, ${i.simd}` : i.adapter ?? '';
    setBadge(engine.backend, engine.backendReason, build);
    ui.progressText.textContent = engine.backend === 'companion'
      ? `Connected: ${engine.backendReason}.`
      : `${i.description || i.architecture} loaded${i.fromCache ? ' from this browser\'s cache' : ''}.`;
    ui.speculative.disabled = engine.backend !== 'wasm';
    ui.prompt.focus();
  } catch (e) {
    engine = null;
    ui.badge.dataset.backend = 'none';
    ui.badge.textContent = 'No model loaded';
    ui.progress.hidden = true;
    const missing = e?.code === 'MODEL_FETCH_FAILED' ? await missingOnDemoServer(model) : null;
    showError(e, missing ?? undefined);
  } finally {
    setBusy({});
  }
}

function addMessage(role, text) {
  const li = document.createElement('li');
  li.className = 'message';
  li.dataset.role = role;
  const who = document.createElement('div');
  who.className = 'role';
  who.textContent = role === 'user' ? 'You' : 'Model';
  const body = document.createElement('p');
  body.className = 'text';
  body.textContent = text;
  const stats = document.createElement('p');
  stats.className = 'stats';
  li.append(who, body, stats);
  ui.messages.append(li);
  li.scrollIntoView({ block: 'end' });
  return { li, body, stats };
}

function requestOptions() {
  const temperature = Number(ui.temperature.value);
  const maxTokens = Number(ui.maxTokens.value);
  const options = {
    temperature: Number.isFinite(temperature) ? temperature : 0.7,
    max_tokens: Number.isInteger(maxTokens) && maxTokens > 0 ? maxTokens : 256,
  };
  if (ui.speculative.checked && !ui.speculative.disabled) {
    options.speculative = { type: 'ngram-simple', ngram_size_n: 3, draft_max: 16 };
  }
  if (ui.answerFormat.value === 'json') {
    let schema;
    try {
      schema = JSON.parse(ui.schema.value);
    } catch (e) {
      throw new Error(`The schema is not JSON: ${e.message}`);
    }
    options.response_format = { type: 'json_schema', json_schema: { name: 'answer', schema } };
  } else if (ui.answerFormat.value === 'tool') {
    options.tools = [WEATHER_TOOL];
  }
  return options;
}

// The tool of the tool-calling example: the page answers its calls with made-up weather.
const WEATHER_TOOL = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'The current weather in a city.',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 40 } }, required: ['city'] },
  },
};

/** A streamed answer's tool calls, put together from their deltas. */
function addCallDeltas(calls, deltas) {
  for (const d of deltas ?? []) {
    if (!calls[d.index]) calls[d.index] = { id: d.id, type: 'function', function: { name: d.function.name, arguments: '' } };
    calls[d.index].function.arguments += d.function.arguments ?? '';
  }
}

function describeCalls(calls) {
  return calls.map((c) => `→ ${c.function.name}(${c.function.arguments})`).join('\n');
}

async function send(text) {
  clearError();
  const system = ui.systemPrompt.value.trim();
  const messages = [...(system ? [{ role: 'system', content: system }] : []), ...history, { role: 'user', content: text }];
  addMessage('user', text);
  const answer = addMessage('assistant', '');
  answer.li.dataset.state = 'streaming';
  answering = new AbortController();
  setBusy({ streaming: true });
  let reply = '';
  const calls = [];
  try {
    const stream = await engine.chat.completions.create({ messages, stream: true, ...requestOptions() }, { signal: answering.signal });
    for await (const chunk of stream) {
      const delta = chunk.choices[0].delta;
      reply += delta.content ?? '';
      addCallDeltas(calls, delta.tool_calls);
      answer.body.textContent = [reply, describeCalls(calls)].filter(Boolean).join('\n');
      if (chunk.timings) answer.stats.textContent = formatTimings(chunk.timings, chunk.usage);
      if (chunk.choices[0].finish_reason === 'length') answer.stats.textContent += ' · cut at the token limit';
    }
    answer.li.dataset.state = 'done';
    history.push({ role: 'user', content: text });
    if (calls.length === 0) {
      history.push({ role: 'assistant', content: reply });
    } else {
      // The example's tool: made-up weather for each call, which the next answer can use.
      history.push({ role: 'assistant', content: reply || null, tool_calls: calls });
      for (const c of calls) {
        history.push({ role: 'tool', tool_call_id: c.id, content: JSON.stringify({ temperature_c: 21, sky: 'clear' }) });
      }
      answer.stats.textContent += ' · the page answered the call with made-up weather: send a message to continue';
    }
  } catch (e) {
    if (e?.code === 'ABORTED') {
      answer.li.dataset.state = 'stopped';
      answer.stats.textContent = 'Stopped.';
      // The partial answer stays in the conversation, as the person saw it.
      history.push({ role: 'user', content: text }, { role: 'assistant', content: reply });
    } else {
      answer.li.dataset.state = 'error';
      showError(e);
    }
  } finally {
    answering = null;
    setBusy({});
  }
}

// The companion host (`tessera serve --allowed-origin <this page's origin>`): offered when it
// answers. `?companion=URL` and `?key=KEY` point the page at another host or give its key.
const params = new URLSearchParams(location.search);
const COMPANION_URL = params.get('companion') ?? 'http://127.0.0.1:8080';
const COMPANION_KEY = params.get('key') ?? undefined;
fetch(`${COMPANION_URL}/health`, { signal: AbortSignal.timeout(1500) }).then((res) => {
  if (!res.ok) return;
  const option = ui.backend.querySelector('option[value="companion"]');
  option.disabled = false;
  option.textContent = `Companion (tessera serve at ${COMPANION_URL})`;
}, () => {
  const option = ui.backend.querySelector('option[value="companion"]');
  option.textContent = `Companion (no host at ${COMPANION_URL}: run tessera serve --allowed-origin ${location.origin})`;
});

// Model choice: presets in the URL box's list, a file, or a dropped file.
for (const [url, label] of PRESETS) {
  const option = document.createElement('option');
  option.value = new URL(url, location.href).href;
  option.label = label;
  ui.presets.append(option);
}
ui.modelUrl.value = new URLSearchParams(location.search).get('model') ?? new URL(PRESETS[0][0], location.href).href;

ui.modelForm.addEventListener('submit', (ev) => {
  ev.preventDefault();
  load(ui.modelUrl.value.trim());
});
ui.modelFile.addEventListener('change', () => {
  const file = ui.modelFile.files?.[0];
  if (file) load(file);
});

let dragDepth = 0;
document.addEventListener('dragenter', (ev) => {
  if (!ev.dataTransfer?.types.includes('Files')) return;
  dragDepth++;
  ui.dropOverlay.hidden = false;
});
document.addEventListener('dragleave', () => {
  dragDepth = Math.max(0, dragDepth - 1);
  if (dragDepth === 0) ui.dropOverlay.hidden = true;
});
document.addEventListener('dragover', (ev) => ev.preventDefault());
document.addEventListener('drop', (ev) => {
  ev.preventDefault();
  dragDepth = 0;
  ui.dropOverlay.hidden = true;
  const file = ev.dataTransfer?.files?.[0];
  if (file) load(file);
});

// Chat: Enter sends, Shift+Enter is a new line.
ui.composer.addEventListener('submit', (ev) => {
  ev.preventDefault();
  const text = ui.prompt.value.trim();
  if (!text || !engine || answering) return;
  ui.prompt.value = '';
  send(text);
});
ui.prompt.addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    ui.composer.requestSubmit();
  }
});
ui.stop.addEventListener('click', () => answering?.abort());
ui.newChat.addEventListener('click', () => {
  answering?.abort();
  history = [];
  ui.messages.replaceChildren();
  clearError();
});

setBusy({});

// The schema box shows with the structured-output example.
ui.answerFormat.addEventListener('change', () => {
  ui.schema.hidden = ui.answerFormat.value !== 'json';
});
