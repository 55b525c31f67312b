//! The device: adapter and device creation with the adapter's own limits, error capture
//! (validation, out of memory, device loss) as typed errors, buffer helpers and read-back.
//!
//! Read-back comes in two forms. Natively [`Gpu::read_back`] polls the device until the map
//! callback has run (synchronous). In a browser `device.poll` does nothing: a buffer map
//! completes only when the JS event loop runs, so [`Gpu::start_read_back`] issues the map and
//! returns, the caller awaits [`ReadBackSignal::ready`] (a future the map callback completes),
//! and [`Gpu::finish_read_back`] copies the mapped bytes out.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tessera_gpu::pipelines::PipelineKey;

use crate::error::WgpuError;
use crate::profile::Profile;

/// How long a submission may take before we call it hung. Generous: on a busy 2-core machine a
/// software adapter (lavapipe) needs minutes for one large batch with a 262144-entry vocabulary.
const WAIT_LIMIT: Duration = Duration::from_secs(1200);
/// Extra polls a read-back makes for its map callback after the queue has drained.
const MAP_POLLS: u32 = 100_000;

/// A device and its queue; cheap to clone (several backends may share one device).
#[derive(Clone)]
pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub limits: wgpu::Limits,
    pub info: wgpu::AdapterInfo,
    /// The adapter has `shader-f16` (and the device was created with it).
    pub has_f16: bool,
    /// Kernels take their f16 variants (on by default where `has_f16`; tests turn it off to
    /// compare them with the f32 path on the same adapter).
    f16_kernels: bool,
    /// Set by the device-lost callback.
    lost: Arc<Mutex<Option<String>>>,
    /// The first error no error scope caught.
    uncaptured: Arc<Mutex<Option<String>>>,
    /// A lower cap on weight bindings than the adapter's (tests use it to exercise the split
    /// of large tensors across bindings with small tensors).
    weight_binding_cap: Option<u64>,
    /// The compiled pipelines (`pipelines`), shared by every clone so that every backend on
    /// the device shares them.
    pub(crate) pipelines: Arc<Mutex<HashMap<PipelineKey, wgpu::ComputePipeline>>>,
    /// The asynchronous read-back in flight, if any (shared by clones).
    read_back: ReadBackSignal,
    /// Bytes copied back from the device so far (shared by clones): what a step costs in
    /// transfers, e.g. a sampled token's 8 bytes against a row of logits.
    bytes_read_back: Arc<AtomicU64>,
    /// Kernel timing (`TESSERA_WGPU_PROFILE`, native only; see `profile`).
    profile: Option<Arc<Profile>>,
}

/// The state of an asynchronous read-back: set by the map callback, awaited by the caller.
#[derive(Clone, Default)]
pub struct ReadBackSignal(Arc<Mutex<MapState>>);

#[derive(Default)]
struct MapState {
    /// A map was issued and its callback has not run yet.
    in_flight: bool,
    /// The callback's outcome, until the bytes are taken.
    result: Option<Result<(), String>>,
    waker: Option<Waker>,
    /// Counts read-backs, so a callback of an abandoned one changes nothing.
    generation: u64,
}

impl ReadBackSignal {
    /// Whether the map callback has run (or no read-back was started).
    pub fn is_ready(&self) -> bool {
        !lock(&self.0).in_flight
    }

    /// Completes once the map callback has run (at once when no read-back is in flight). In a
    /// browser, await it from JS (`wasm_bindgen_futures::future_to_promise`); natively the
    /// callback runs inside a device poll, so poll the device ([`Gpu::wait`]) instead.
    pub fn ready(&self) -> impl Future<Output = ()> + Send + 'static {
        ReadBackReady(self.clone())
    }

    fn begin(&self) -> u64 {
        let mut s = lock(&self.0);
        s.in_flight = true;
        s.result = None;
        s.generation += 1;
        s.generation
    }

    fn complete(&self, generation: u64, r: Result<(), String>) {
        let waker = {
            let mut s = lock(&self.0);
            if s.generation != generation {
                return;
            }
            s.in_flight = false;
            s.result = Some(r);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

struct ReadBackReady(ReadBackSignal);

impl Future for ReadBackReady {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = lock(&(self.0).0);
        if s.in_flight {
            s.waker = Some(cx.waker().clone());
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn profile_from_env() -> Option<Arc<Profile>> {
    Profile::from_env().map(Arc::new)
}

/// Browsers have no environment, and their waits are asynchronous.
#[cfg(target_arch = "wasm32")]
fn profile_from_env() -> Option<Arc<Profile>> {
    None
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Gpu {
    /// Opens the default adapter (natively: Vulkan, e.g. lavapipe or SwiftShader through
    /// `VK_ICD_FILENAMES`; `WGPU_BACKEND` and friends are honoured).
    pub async fn new() -> Result<Gpu, WgpuError> {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter: false,
                compatible_surface: None,
                apply_limit_buckets: false,
            })
            .await
            .map_err(|e| WgpuError::NoAdapter(e.to_string()))?;
        let info = adapter.get_info();
        // The adapter's own limits: the defaults would cap storage bindings at 128 MiB.
        let limits = adapter.limits();
        let has_f16 = adapter.features().contains(wgpu::Features::SHADER_F16);
        let mut required_features = wgpu::Features::empty();
        if has_f16 {
            required_features |= wgpu::Features::SHADER_F16;
        }
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("tessera"),
                required_features,
                required_limits: limits.clone(),
                ..Default::default()
            })
            .await
            .map_err(|e| WgpuError::RequestDevice(e.to_string()))?;
        let lost = Arc::new(Mutex::new(None));
        let lost_cb = lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            *lock(&lost_cb) = Some(format!("{reason:?}: {message}"));
        });
        let uncaptured = Arc::new(Mutex::new(None));
        let uncaptured_cb = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut slot = lock(&uncaptured_cb);
            if slot.is_none() {
                *slot = Some(e.to_string());
            }
        }));
        Ok(Gpu {
            device,
            queue,
            limits,
            info,
            has_f16,
            f16_kernels: has_f16,
            lost,
            uncaptured,
            weight_binding_cap: None,
            pipelines: Arc::default(),
            read_back: ReadBackSignal::default(),
            bytes_read_back: Arc::default(),
            profile: profile_from_env(),
        })
    }

    /// The kernel profile, when this device is profiled.
    pub fn profile(&self) -> Option<&Profile> {
        self.profile.as_deref()
    }

    /// A short description: adapter name, backend, f16, binding limit.
    pub fn describe(&self) -> String {
        format!(
            "{} ({:?}, {:?}; shader-f16 {}; storage bindings up to {} MiB)",
            self.info.name,
            self.info.backend,
            self.info.device_type,
            match (self.has_f16, self.f16_kernels) {
                (false, _) => "no",
                (true, true) => "yes, f16 kernels",
                (true, false) => "yes, f32 kernels",
            },
            self.max_binding() >> 20
        )
    }

    /// A software adapter on the CPU (lavapipe, SwiftShader): kernels pick variants without
    /// workgroup barriers there.
    pub fn is_cpu(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }

    /// The largest storage binding (and buffer) we may create.
    pub fn max_binding(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
    }

    /// The largest binding a weight part may take.
    pub fn max_weight_binding(&self) -> u64 {
        self.weight_binding_cap
            .map_or(self.max_binding(), |c| c.min(self.max_binding()))
    }

    /// Kernels keep WGSL's pow, tanh, sin and cos (whose precision is the implementation's):
    /// lavapipe, where they were measured against the CPU backend (forced decoding 256/256 on
    /// both models). Elsewhere (SwiftShader's built-ins moved Gemma 3's near ties) GELU's tanh
    /// comes from exp, rope's sin/cos are computed by hand and its theta_scale is the host's
    /// powf (`rope_rotate.inc.wgsl`).
    pub fn builtin_math(&self) -> bool {
        self.info.name.starts_with("llvmpipe")
    }

    /// Kernels use their f16 variants (the adapter has `shader-f16` and they are not off).
    pub fn f16_kernels(&self) -> bool {
        self.has_f16 && self.f16_kernels
    }

    /// Turns the f16 kernel variants on (where the adapter has `shader-f16`) or off.
    pub fn set_f16_kernels(&mut self, on: bool) {
        self.f16_kernels = on;
    }

    /// Caps weight bindings below the adapter's limit (see `weight_binding_cap`).
    pub fn set_weight_binding_cap(&mut self, bytes: Option<u64>) {
        self.weight_binding_cap = bytes;
    }

    /// Fails with the device loss or the first uncaptured error, if any happened.
    pub fn check(&self) -> Result<(), WgpuError> {
        if let Some(why) = lock(&self.lost).clone() {
            return Err(WgpuError::DeviceLost(why));
        }
        if let Some(e) = lock(&self.uncaptured).take() {
            return Err(WgpuError::Validation(e));
        }
        Ok(())
    }

    /// Destroys the device (tests use it to check that a lost device gives a typed error).
    pub fn destroy(&self) {
        self.device.destroy();
    }

    /// A buffer, with allocation failure reported as [`WgpuError::OutOfMemory`].
    pub fn buffer(
        &self,
        what: &str,
        size: u64,
        usage: wgpu::BufferUsages,
        mapped: bool,
    ) -> Result<wgpu::Buffer, WgpuError> {
        self.check()?;
        let size = size.max(4).next_multiple_of(4);
        if usage.contains(wgpu::BufferUsages::STORAGE) && size > self.max_binding() {
            return Err(WgpuError::BindingTooLarge {
                what: what.to_string(),
                bytes: size,
                limit: self.max_binding(),
            });
        }
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(what),
            size,
            usage,
            mapped_at_creation: mapped,
        });
        let invalid = self.pop_scope(validation);
        if let Some(e) = self.pop_scope(oom) {
            return Err(WgpuError::OutOfMemory {
                what: format!("{what}: {e}"),
                bytes: size,
            });
        }
        if let Some(e) = invalid {
            return Err(WgpuError::Validation(format!("{what}: {e}")));
        }
        Ok(buffer)
    }

    /// Pops an error scope and gives its error. Natively this waits for it. In a browser the
    /// scope settles only on the JS event loop, which cannot run while we wait: its error is
    /// recorded when it settles and reported by the next [`Gpu::check`] (so there an
    /// allocation failure surfaces at the next step as a validation error, not at once).
    pub fn pop_scope(&self, scope: wgpu::ErrorScopeGuard) -> Option<wgpu::Error> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            pollster::block_on(scope.pop())
        }
        #[cfg(target_arch = "wasm32")]
        {
            let uncaptured = self.uncaptured.clone();
            // The pop itself happens now (scopes must be popped in reverse order of pushing);
            // only its outcome arrives later.
            let popped = scope.pop();
            wasm_bindgen_futures::spawn_local(async move {
                if let Some(e) = popped.await {
                    let mut slot = lock(&uncaptured);
                    if slot.is_none() {
                        *slot = Some(e.to_string());
                    }
                }
            });
            None
        }
    }

    /// Bytes read back from the device so far, by this `Gpu` and its clones.
    pub fn bytes_read_back(&self) -> u64 {
        self.bytes_read_back.load(Ordering::Relaxed)
    }

    /// The asynchronous read-back's signal (shared by every clone of this `Gpu`).
    pub fn read_back_signal(&self) -> ReadBackSignal {
        self.read_back.clone()
    }

    /// Starts mapping the first `bytes` of `staging` (MAP_READ; submitted work fills it) and
    /// returns at once; the signal is ready when the map callback has run. One read-back may
    /// be in flight per device.
    pub fn start_read_back(&self, staging: &wgpu::Buffer, bytes: u64) {
        let signal = self.read_back.clone();
        let generation = signal.begin();
        let bytes = bytes.max(4).next_multiple_of(4);
        staging
            .slice(..bytes)
            .map_async(wgpu::MapMode::Read, move |r| {
                signal.complete(generation, r.map_err(|e| e.to_string()))
            });
    }

    /// Copies the read-back started by [`Gpu::start_read_back`] into `dst` once its signal is
    /// ready, and unmaps `staging`.
    pub fn finish_read_back<T: bytemuck::Pod>(
        &self,
        staging: &wgpu::Buffer,
        dst: &mut [T],
    ) -> Result<(), WgpuError> {
        let result = {
            let mut s = lock(&self.read_back.0);
            if s.in_flight {
                return Err(WgpuError::ReadBack(
                    "the read-back has not completed yet".into(),
                ));
            }
            s.result.take()
        };
        self.check()?;
        match result {
            None => Err(WgpuError::ReadBack("no read-back was started".into())),
            Some(Err(e)) => Err(WgpuError::ReadBack(e)),
            Some(Ok(())) => {
                let bytes = std::mem::size_of_val(dst);
                {
                    let view = staging
                        .slice(..(bytes as u64).max(4).next_multiple_of(4))
                        .get_mapped_range()
                        .map_err(|e| WgpuError::ReadBack(e.to_string()))?;
                    let src: &[u8] = &view;
                    bytemuck::cast_slice_mut::<T, u8>(dst).copy_from_slice(&src[..bytes]);
                }
                self.bytes_read_back
                    .fetch_add(bytes as u64, Ordering::Relaxed);
                staging.unmap();
                Ok(())
            }
        }
    }

    /// Abandons a read-back that will not be finished (a step whose caller went away): waits
    /// for nothing, unmaps `staging` when its map has completed, and clears the signal.
    pub fn drop_read_back(&self, staging: &wgpu::Buffer) {
        let (mapped, waker) = {
            let mut s = lock(&self.read_back.0);
            let mapped = s.in_flight || matches!(s.result, Some(Ok(())));
            s.in_flight = false;
            s.result = None;
            // The abandoned map's callback (an error, natively called from inside `unmap`,
            // hence the lock released first) sees another generation and changes nothing.
            s.generation += 1;
            (mapped, s.waker.take())
        };
        if mapped {
            // Unmapping a pending map cancels it.
            staging.unmap();
        }
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Waits for all submitted work, turning a loss or a hang into an error.
    pub fn wait(&self) -> Result<(), WgpuError> {
        let r = self.device.poll(wgpu::PollType::Wait {
            submission_index: None,
            timeout: Some(WAIT_LIMIT),
        });
        self.check()?;
        match r {
            Ok(_) => Ok(()),
            Err(wgpu::PollError::Timeout) => Err(WgpuError::Timeout(WAIT_LIMIT.as_secs())),
            Err(e) => Err(WgpuError::DeviceLost(e.to_string())),
        }
    }

    /// Maps `staging` (MAP_READ, already holding the data once submitted work finishes) and
    /// copies its first `dst.len() * 4` bytes out.
    pub fn read_back<T: bytemuck::Pod>(
        &self,
        staging: &wgpu::Buffer,
        dst: &mut [T],
    ) -> Result<(), WgpuError> {
        let bytes = std::mem::size_of_val(dst) as u64;
        if bytes == 0 {
            return Ok(());
        }
        let slice = staging.slice(..bytes.next_multiple_of(4));
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.wait()?;
        // The map callback runs inside a poll once the mapping is done; on a loaded machine
        // that can be a poll after the one that saw the queue empty, so poll until it has run
        // (bounded: a callback dropped unrun, or one that never comes, is an error).
        let mut polls = 0;
        let mapped = loop {
            match rx.try_recv() {
                Ok(r) => break r,
                Err(std::sync::mpsc::TryRecvError::Empty) if polls < MAP_POLLS => {
                    polls += 1;
                    std::thread::yield_now();
                    self.wait()?;
                }
                Err(_) => return Err(WgpuError::ReadBack("the buffer was never mapped".into())),
            }
        };
        mapped.map_err(|e| WgpuError::ReadBack(e.to_string()))?;
        {
            let view = slice
                .get_mapped_range()
                .map_err(|e| WgpuError::ReadBack(e.to_string()))?;
            let src: &[u8] = &view;
            bytemuck::cast_slice_mut::<T, u8>(dst).copy_from_slice(&src[..bytes as usize]);
        }
        staging.unmap();
        self.bytes_read_back.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }
}

/// One adapter wgpu can open natively, for `tessera devices`.
#[derive(Clone, Debug)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub shader_f16: bool,
    pub subgroups: bool,
    /// The largest storage binding, in bytes.
    pub max_binding: u64,
}

/// Every adapter of every native backend wgpu was built with (`WGPU_BACKEND` narrows them).
#[cfg(not(target_arch = "wasm32"))]
pub fn adapters() -> Vec<AdapterSummary> {
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()))
        .into_iter()
        .map(|a| {
            let info = a.get_info();
            let limits = a.limits();
            let features = a.features();
            AdapterSummary {
                name: info.name,
                backend: format!("{:?}", info.backend),
                device_type: format!("{:?}", info.device_type),
                driver: format!("{} {}", info.driver, info.driver_info),
                shader_f16: features.contains(wgpu::Features::SHADER_F16),
                subgroups: features.contains(wgpu::Features::SUBGROUP),
                max_binding: limits
                    .max_storage_buffer_binding_size
                    .min(limits.max_buffer_size),
            }
        })
        .collect()
}
