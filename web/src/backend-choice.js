// Which backend runs the model: 'wasm' (the CPU build), 'webgpu' (the GPU), or 'auto', which
// takes WebGPU only when the browser offers a hardware adapter with the limits the kernels need
// and says why it did not otherwise. Runs in the worker (navigator.gpu exists there too).

const MiB = 1024 * 1024;

// The least an adapter must offer (WebGPU's own defaults: every conformant adapter has them,
// but a compatibility-mode or otherwise reduced adapter may not). Larger tensors are split
// across bindings, so these do not depend on the model.
export const WEBGPU_MIN_LIMITS = Object.freeze({
  maxStorageBufferBindingSize: 128 * MiB,
  maxBufferSize: 128 * MiB,
  maxStorageBuffersPerShaderStage: 8,
  maxComputeInvocationsPerWorkgroup: 256,
  maxComputeWorkgroupStorageSize: 16384,
});

function describeAdapter(adapter) {
  const info = adapter.info ?? {};
  const name = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' ');
  return name || 'unnamed adapter';
}

/** What an adapter lacks for the kernels (an empty list when it has everything). */
export function missingLimits(adapter) {
  const missing = [];
  for (const [name, least] of Object.entries(WEBGPU_MIN_LIMITS)) {
    const have = adapter.limits?.[name] ?? 0;
    if (have < least) missing.push(`${name} ${have} < ${least}`);
  }
  return missing;
}

/**
 * Probes `gpu` (navigator.gpu): `{ adapter, software, description, problem }`, where `problem`
 * (null when usable) says why WebGPU cannot run the engine at all.
 */
export async function probeWebGpu(gpu = globalThis.navigator?.gpu) {
  if (!gpu) return { adapter: null, problem: 'this browser offers no WebGPU (navigator.gpu is missing)' };
  let adapter = null;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  } catch (e) {
    return { adapter: null, problem: `requestAdapter failed: ${e?.message ?? e}` };
  }
  if (!adapter) return { adapter: null, problem: 'no WebGPU adapter is available' };
  const description = describeAdapter(adapter);
  const software = adapter.info?.isFallbackAdapter === true || adapter.isFallbackAdapter === true;
  const missing = missingLimits(adapter);
  const problem = missing.length ? `the WebGPU adapter (${description}) is too limited: ${missing.join(', ')}` : null;
  return { adapter, software, description, problem };
}

/**
 * The backend to load for `requested` ('auto', 'wasm' or 'webgpu'): `{ backend, reason }`, or
 * `{ error }` when 'webgpu' was asked for and cannot run. 'auto' skips software (fallback)
 * adapters such as SwiftShader: they run the kernels on the CPU, slower than the wasm build.
 */
export async function chooseBackend(requested, gpu = globalThis.navigator?.gpu) {
  if (requested === 'wasm') return { backend: 'wasm', reason: "backend 'wasm' was requested" };
  const probe = await probeWebGpu(gpu);
  if (requested === 'webgpu') {
    if (probe.problem) return { error: `backend 'webgpu': ${probe.problem}` };
    return { backend: 'webgpu', reason: `backend 'webgpu' was requested; adapter: ${probe.description}${probe.software ? ' (software)' : ''}` };
  }
  if (probe.problem) return { backend: 'wasm', reason: `WebGPU not used: ${probe.problem}` };
  if (probe.software) {
    return { backend: 'wasm', reason: `WebGPU not used: the only adapter (${probe.description}) is a software fallback, slower than the wasm CPU build` };
  }
  return { backend: 'webgpu', reason: `WebGPU adapter: ${probe.description}` };
}
