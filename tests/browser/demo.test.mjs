// The demo page (web/demo/) driven as a person uses it, in headless Chromium: load the preset
// model, type a message and press Enter, read the streamed answer and its speed, stop a long
// answer, see a bad URL explained; the page at a phone's width; a screenshot for docs/.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { tmpdir } from 'node:os';

import { launch } from './browser.mjs';
import { modelsDir, repoRoot } from './server.mjs';
import { startDemoServer } from '../../web/demo/serve.mjs';

let browser;
let server;
let context;
let page;

before(async () => {
  server = await startDemoServer({ port: 0 });
  browser = await launch();
  context = await browser.newContext({ viewport: { width: 1100, height: 820 } });
  page = await context.newPage();
  page.on('pageerror', (e) => console.error('[page error]', e.message));
  await page.goto(server.url);
});

after(async () => {
  await context?.close();
  await browser?.close();
  await server?.close();
});

const lastAnswer = () => page.locator('.message[data-role="assistant"]').last();

describe('the demo page', () => {
  test('a bad URL is explained in words', async () => {
    await page.getByLabel('Model URL').fill(new URL('/elsewhere/no-such-model.gguf', server.url).href);
    await page.getByRole('button', { name: 'Load' }).click();
    const error = page.getByRole('alert');
    await error.waitFor({ state: 'visible' });
    assert.match(await error.textContent(), /could not be downloaded.*HTTP 404/);
    assert.equal(await page.getByRole('button', { name: 'Send' }).isDisabled(), true);
  });

  test('a model missing from the demo server says how to fetch it', async () => {
    await page.getByLabel('Model URL').fill(new URL('/models/no-such-model.gguf', server.url).href);
    await page.getByRole('button', { name: 'Load' }).click();
    const error = page.getByRole('alert');
    await page.waitForFunction(() => /fetch-models/.test(document.getElementById('error').textContent));
    assert.equal(
      await error.textContent(),
      "no-such-model.gguf is not in the demo server's models/ folder. In the repository, run "
        + 'scripts/fetch-models.sh all (it fetches the test models), then Load again.',
    );
  });

  test('loads the preset model with a progress bar and a backend badge', async () => {
    await page.getByLabel('Model URL').fill(new URL('/models/SmolLM2-135M-Instruct.Q4_1.gguf', server.url).href);
    await page.getByLabel('Backend', { exact: true }).selectOption('wasm');
    await page.getByRole('button', { name: 'Load' }).click();
    await page.waitForFunction(() => !document.getElementById('prompt').disabled, null, { timeout: 120_000 });
    assert.equal(await page.getByRole('alert').isHidden(), true);
    assert.equal(await page.locator('#progress-bar').evaluate((p) => p.value), 1);
    assert.match(await page.locator('#progress-text').textContent(), /loaded/);
    const badge = await page.locator('#backend-badge').textContent();
    assert.match(badge, /^WebAssembly · (\d+ threads|1 thread), simd128(\+relaxed)? — backend 'wasm' was requested/);
  });

  test('a message sent with Enter streams an answer with its speed', async () => {
    await page.getByLabel('Temperature').fill('0');
    await page.getByLabel('Max tokens').fill('24');
    // Count the answer's text updates: streamed means several.
    await page.evaluate(() => {
      window.updates = 0;
      new MutationObserver(() => window.updates++).observe(document.getElementById('messages'), { subtree: true, characterData: true, childList: true });
    });
    await page.getByLabel('Message', { exact: true }).fill('What is the capital of France?');
    await page.getByLabel('Message', { exact: true }).press('Enter');
    await page.waitForSelector('.message[data-role="assistant"][data-state="done"]', { timeout: 60_000 });
    const text = await lastAnswer().locator('.text').textContent();
    assert.match(text, /Paris/);
    assert.ok(await page.evaluate(() => window.updates) > 5, 'the answer did not stream');
    const stats = await lastAnswer().locator('.stats').textContent();
    assert.match(stats, /^\d+(\.\d)? tokens\/s · prompt: \d+ tokens in .* · answer: \d+ tokens in /);
    assert.doesNotMatch(stats, /speculative/);
    assert.equal(await page.getByLabel('Message', { exact: true }).inputValue(), '');
  });

  test('Stop ends a long answer', async () => {
    await page.getByLabel('Max tokens').fill('1000');
    await page.getByLabel('Temperature').fill('0.7');
    await page.getByLabel('Message', { exact: true }).fill('Write a very long story about a lighthouse keeper.');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.waitForFunction(() => {
      const answers = document.querySelectorAll('.message[data-role="assistant"]');
      return answers.length === 2 && answers[1].querySelector('.text').textContent.length > 20;
    }, null, { timeout: 60_000 });
    await page.getByRole('button', { name: 'Stop' }).click();
    await page.waitForSelector('.message[data-role="assistant"][data-state="stopped"]', { timeout: 10_000 });
    assert.equal(await lastAnswer().locator('.stats').textContent(), 'Stopped.');
    assert.equal(await page.getByRole('alert').isHidden(), true);
    assert.equal(await page.getByRole('button', { name: 'Send' }).isDisabled(), false);
  });

  test('speculative decoding shows its statistics', async () => {
    await page.getByLabel('Max tokens').fill('48');
    await page.getByLabel('Temperature').fill('0');
    await page.getByLabel(/Speculative decoding/).check();
    await page.getByRole('button', { name: 'New chat' }).click();
    await page.getByLabel('Message', { exact: true }).fill('Repeat exactly, ten times: "one two three four five six".');
    await page.getByLabel('Message', { exact: true }).press('Enter');
    await page.waitForSelector('.message[data-role="assistant"][data-state="done"]', { timeout: 60_000 });
    // The statistics exist only on speculative requests (whether a small model's short answer
    // repeats enough to accept drafts is the engine's business: api and e2e tests check that).
    assert.match(await lastAnswer().locator('.stats').textContent(), /speculative: \d+ of \d+ drafted tokens accepted/);
    // docs/demo.png is this screenshot; TESSERA_UPDATE_SCREENSHOT=1 rewrites it.
    const path = process.env.TESSERA_UPDATE_SCREENSHOT ? join(repoRoot, 'docs/demo.png') : join(tmpdir(), 'tessera-demo.png');
    await page.screenshot({ path });
  });

  test('the structured-output and tool-call examples', async () => {
    await page.getByLabel(/Speculative decoding/).uncheck();
    await page.getByLabel('Max tokens').fill('96');
    await page.getByLabel('Temperature').fill('0');
    await page.getByLabel('Answer', { exact: true }).selectOption('json');
    assert.equal(await page.getByLabel('JSON schema').isVisible(), true);
    await page.getByRole('button', { name: 'New chat' }).click();
    await page.getByLabel('Message', { exact: true }).fill('Describe a fictional person.');
    await page.getByLabel('Message', { exact: true }).press('Enter');
    await page.waitForSelector('.message[data-role="assistant"][data-state="done"]', { timeout: 60_000 });
    const person = JSON.parse(await lastAnswer().locator('.text').textContent());
    assert.ok(typeof person.name === 'string' && Number.isInteger(person.age) && Array.isArray(person.hobbies));

    await page.getByLabel('Answer', { exact: true }).selectOption('tool');
    await page.getByRole('button', { name: 'New chat' }).click();
    await page.getByLabel('Message', { exact: true }).fill('What is the weather in Paris? Use the tool.');
    await page.getByLabel('Message', { exact: true }).press('Enter');
    await page.waitForSelector('.message[data-role="assistant"][data-state="done"]', { timeout: 60_000 });
    // A small model may answer or call: either is shown, a call as the function and arguments.
    const body = await lastAnswer().locator('.text').textContent();
    assert.ok(body.length > 0 && !body.startsWith('{'), body);
    if (body.includes('→ get_weather(')) {
      assert.match(await lastAnswer().locator('.stats').textContent(), /made-up weather/);
    }
    await page.getByLabel('Answer', { exact: true }).selectOption('text');
  });

  test('a dropped file that is not a model is explained; an opened local file loads', async () => {
    await page.evaluate(() => {
      const data = new DataTransfer();
      data.items.add(new File(['<html>not a model</html>'], 'page.gguf'));
      document.body.dispatchEvent(new DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true }));
    });
    const error = page.getByRole('alert');
    await error.waitFor({ state: 'visible' });
    assert.match(await error.textContent(), /not a GGUF model/);
    await page.locator('#model-file').setInputFiles(join(modelsDir, 'SmolLM2-135M-Instruct.Q4_1.gguf'));
    await page.waitForFunction(() => !document.getElementById('prompt').disabled, null, { timeout: 120_000 });
    assert.equal(await error.isHidden(), true);
    assert.match(await page.locator('#progress-text').textContent(), /loaded/);
  });

  test('fits a phone', async () => {
    await page.setViewportSize({ width: 375, height: 740 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `${overflow} px wider than the screen`);
    const send = await page.getByRole('button', { name: 'Send' }).boundingBox();
    assert.ok(send.x + send.width <= 375);
  });
});
