import { fileURLToPath } from 'node:url';
import { readFileSync } from 'node:fs';

// webpack 5 understands the package's `new Worker(new URL('./worker.js', import.meta.url))`
// and the wasm glue's `new URL('tessera_wasm_bg.wasm', import.meta.url)` by itself: the worker
// becomes its own bundle and the .wasm files assets. Nothing tessera-specific is configured.
const dir = (p) => fileURLToPath(new URL(p, import.meta.url));

// Emits index.html beside the bundle (a plugin of a few lines instead of a dependency).
class EmitIndexHtml {
  apply(compiler) {
    const { RawSource } = compiler.webpack.sources;
    compiler.hooks.thisCompilation.tap('EmitIndexHtml', (compilation) => {
      compilation.hooks.processAssets.tap({ name: 'EmitIndexHtml', stage: compiler.webpack.Compilation.PROCESS_ASSETS_STAGE_ADDITIONS }, () => {
        compilation.emitAsset('index.html', new RawSource(readFileSync(dir('./index.html'))));
      });
    });
  }
}

export default {
  mode: 'production',
  entry: './src/main.js',
  // The entry keeps its name (index.html loads main.js); chunks, the worker and wasm get hashes.
  output: { path: dir('./dist'), filename: '[name].js', chunkFilename: '[name].[contenthash].js', clean: true },
  plugins: [new EmitIndexHtml()],
  performance: { hints: false }, // the wasm files are megabytes by nature
};
