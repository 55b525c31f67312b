import { defineConfig } from 'vite';

// Cross-origin isolation (COOP/COEP) lets the engine use its threaded build; without it the
// single-threaded one runs. The same headers must come from the server that hosts dist/.
const isolation = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

export default defineConfig({
  // The engine's worker loads its wasm build with a dynamic import(): ES-module workers
  // (Vite's default, 'iife', cannot split a worker into chunks).
  worker: { format: 'es' },
  server: { headers: isolation },
  preview: { headers: isolation },
});
