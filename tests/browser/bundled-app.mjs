// The npm package as an app installs it: `npm pack` of web/ (the wasm builds included),
// installed into a copy of an example app under examples/ (its lockfile pins the bundler),
// then the app's own scripts run there. Used by bundlers.test.mjs.

import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { repoRoot } from './server.mjs';

const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });

let tarball = null; // packed once per test process

function packWeb(into) {
  const name = run('npm', ['pack', join(repoRoot, 'web'), '--pack-destination', into, '--silent'], repoRoot).trim().split('\n').pop();
  return join(into, name);
}

/**
 * A fresh copy of examples/<name> with its lockfile's packages and the packed tessera-web
 * installed. Returns `{ dir, run(script), cleanup() }`.
 */
export function prepareApp(name) {
  const dir = mkdtempSync(join(tmpdir(), `tessera-${name}-`));
  tarball ??= packWeb(mkdtempSync(join(tmpdir(), 'tessera-pack-')));
  cpSync(join(repoRoot, 'examples', name), dir, {
    recursive: true,
    filter: (src) => !/[/\\](node_modules|dist)$/.test(src),
  });
  run('npm', ['ci', '--no-audit', '--no-fund', '--silent'], dir);
  // --no-save: the app's package.json and lockfile stay as committed.
  run('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--silent', tarball], dir);
  return {
    dir,
    run: (script) => run('npm', ['run', '--silent', script], dir),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
