// Headless Chromium from Debian through playwright-core (never `playwright install`).

import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.TESSERA_CHROMIUM || '/usr/bin/chromium';

export function launch() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox', '--disable-dev-shm-usage', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--enable-unsafe-webgpu',
      // Extra flags for investigations, separated by `;`, e.g.
      // `--js-flags=--prof --logfile=/tmp/prof/v8-%p.log` (a V8 profile of each process).
      ...(process.env.TESSERA_CHROMIUM_ARGS ?? '').split(';').filter(Boolean),
    ],
  });
}

/** A page of `origin` with the package loaded as `window.tessera`; console errors are echoed. */
export async function openPage(context, origin) {
  const page = await context.newPage();
  page.on('pageerror', (e) => console.error('[page error]', e.message));
  page.on('console', (m) => m.type() === 'error' && console.error('[console]', m.text()));
  await page.goto(`${origin}/pages/index.html`);
  await page.waitForFunction(() => window.tessera !== undefined);
  return page;
}
