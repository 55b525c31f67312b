// The 'auto' backend choice (web/src/backend-choice.js) against fake navigator.gpu objects:
// no WebGPU, no adapter, a failing requestAdapter, a software adapter, a too limited one, a
// good one; and what a forced 'webgpu' or 'wasm' gives. (The browser suite checks the real
// SwiftShader adapter in e2e.test.mjs.)

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { WEBGPU_MIN_LIMITS, chooseBackend, missingLimits } from '../../web/src/backend-choice.js';

const GiB = 1024 ** 3;
const goodLimits = {
  maxStorageBufferBindingSize: GiB, maxBufferSize: GiB, maxStorageBuffersPerShaderStage: 10,
  maxComputeInvocationsPerWorkgroup: 256, maxComputeWorkgroupStorageSize: 32768,
};
const adapter = (info, limits = goodLimits) => ({ info, limits });
const gpuWith = (a) => ({ requestAdapter: async () => a });
const hardware = adapter({ vendor: 'acme', architecture: 'rdna9', isFallbackAdapter: false });
const software = adapter({ vendor: 'google', architecture: 'swiftshader', isFallbackAdapter: true });

describe('chooseBackend', () => {
  test("'auto' takes a hardware adapter with the limits", async () => {
    const c = await chooseBackend('auto', gpuWith(hardware));
    assert.equal(c.backend, 'webgpu');
    assert.match(c.reason, /acme rdna9/);
  });

  test("'auto' falls back to wasm and says why", async () => {
    const cases = [
      [undefined, /navigator\.gpu is missing/],
      [gpuWith(null), /no WebGPU adapter/],
      [{ requestAdapter: async () => { throw new Error('blocked'); } }, /requestAdapter failed: blocked/],
      [gpuWith(software), /software fallback/],
      [gpuWith(adapter(hardware.info, { ...goodLimits, maxStorageBufferBindingSize: 64 << 20 })), /too limited: maxStorageBufferBindingSize 67108864 < 134217728/],
      [gpuWith(adapter(hardware.info, { ...goodLimits, maxStorageBuffersPerShaderStage: 4 })), /too limited: maxStorageBuffersPerShaderStage 4 < 8/],
    ];
    for (const [gpu, why] of cases) {
      const c = await chooseBackend('auto', gpu);
      assert.equal(c.backend, 'wasm');
      assert.match(c.reason, why);
      assert.match(c.reason, /^WebGPU not used: /);
    }
  });

  test("'webgpu' takes a software adapter but rejects none or a limited one", async () => {
    const sw = await chooseBackend('webgpu', gpuWith(software));
    assert.equal(sw.backend, 'webgpu');
    assert.match(sw.reason, /swiftshader \(software\)/);
    assert.match((await chooseBackend('webgpu', undefined)).error, /navigator\.gpu is missing/);
    assert.match((await chooseBackend('webgpu', gpuWith(null))).error, /no WebGPU adapter/);
    const limited = adapter(hardware.info, { ...goodLimits, maxBufferSize: 1 });
    assert.match((await chooseBackend('webgpu', gpuWith(limited))).error, /too limited: maxBufferSize 1/);
  });

  test("'wasm' never asks for an adapter", async () => {
    const c = await chooseBackend('wasm', { requestAdapter: () => assert.fail('probed') });
    assert.equal(c.backend, 'wasm');
  });

  test('the minimum limits are what the kernels need', () => {
    // kv.wgsl binds 8 storage buffers in one pipeline.
    assert.equal(WEBGPU_MIN_LIMITS.maxStorageBuffersPerShaderStage, 8);
    assert.deepEqual(missingLimits(hardware), []);
    assert.equal(missingLimits({ limits: {} }).length, Object.keys(WEBGPU_MIN_LIMITS).length);
  });
});
