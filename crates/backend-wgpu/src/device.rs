//! The device: adapter and device creation with the adapter's own limits, error capture
//! (validation, out of memory, device loss) as typed errors, buffer helpers and read-back.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::WgpuError;
use crate::pipelines::{PipelineCache, PipelineKey};

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
    /// Set by the device-lost callback.
    lost: Arc<Mutex<Option<String>>>,
    /// The first error no error scope caught.
    uncaptured: Arc<Mutex<Option<String>>>,
    /// A lower cap on weight bindings than the adapter's (tests use it to exercise the split
    /// of large tensors across bindings with small tensors).
    weight_binding_cap: Option<u64>,
    pipelines: Arc<Mutex<PipelineCache>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
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
            lost,
            uncaptured,
            weight_binding_cap: None,
            pipelines: Arc::default(),
        })
    }

    /// A short description: adapter name, backend, f16, binding limit.
    pub fn describe(&self) -> String {
        format!(
            "{} ({:?}, {:?}; shader-f16 {}; storage bindings up to {} MiB)",
            self.info.name,
            self.info.backend,
            self.info.device_type,
            if self.has_f16 { "yes" } else { "no" },
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

    /// Caps weight bindings below the adapter's limit (see `weight_binding_cap`).
    pub fn set_weight_binding_cap(&mut self, bytes: Option<u64>) {
        self.weight_binding_cap = bytes;
    }

    /// The pipeline for `key`, compiled on first use.
    pub fn pipeline(&self, key: PipelineKey) -> Result<wgpu::ComputePipeline, WgpuError> {
        lock(&self.pipelines).get(self, key)
    }

    /// Pipelines compiled so far.
    pub fn n_pipelines(&self) -> usize {
        lock(&self.pipelines).len()
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
        let invalid = pollster::block_on(validation.pop());
        if let Some(e) = pollster::block_on(oom.pop()) {
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
        Ok(())
    }
}
