//! The device: a logical device on one physical device (chosen from the de-duplicated list),
//! its compute queue, memory types, limits and the kernels' pipeline cache. Cheap to clone
//! (several backends may share one device).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ash::vk;

use crate::devices::{DeviceKind, ListedDevice};
use crate::enumerate::listed_devices;
use crate::error::{VkContext, VulkanError};
use crate::instance::Instance;
use crate::pipelines::Pipelines;

/// How long one submission may take before we call the device hung: generous, since lavapipe
/// on a busy 2-core machine needs minutes for a large batch with a big vocabulary.
const WAIT_NS: u64 = 1200 * 1_000_000_000;

pub(crate) struct Inner {
    /// Kept alive (dropped after the device, the fields after `drop`).
    #[allow(dead_code)]
    pub instance: Arc<Instance>,
    pub device: ash::Device,
    pub submitter: Mutex<Submitter>,
    pub memory: vk::PhysicalDeviceMemoryProperties,
    pub limits: vk::PhysicalDeviceLimits,
    pub listed: ListedDevice,
    /// The device was created with f16 arithmetic and 16-bit storage.
    pub has_f16: bool,
    pub pipelines: Mutex<Pipelines>,
    /// Set once a call reported the device lost: every later call fails fast.
    pub lost: AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: the last handle to the device: every buffer, pipeline and command buffer
        // holds an `Arc<Inner>`, so none is left; waiting first lets in-flight work finish.
        unsafe {
            let _ = self.device.device_wait_idle();
            self.pipelines
                .get_mut()
                .unwrap_or_else(|p| p.into_inner())
                .destroy(&self.device);
            let s = self.submitter.get_mut().unwrap_or_else(|p| p.into_inner());
            self.device.destroy_fence(s.fence, None);
            self.device.destroy_command_pool(s.pool, None);
            self.device.destroy_device(None);
        }
    }
}

/// The queue and what one submission needs, reused by every submission.
pub(crate) struct Submitter {
    queue: vk::Queue,
    pool: vk::CommandPool,
    cb: vk::CommandBuffer,
    fence: vk::Fence,
}

impl Submitter {
    fn new(d: &ash::Device, queue: vk::Queue, family: u32) -> Result<Submitter, VulkanError> {
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(family)
            .flags(vk::CommandPoolCreateFlags::TRANSIENT);
        // SAFETY: creating objects on a live device; on failure the ones made are destroyed.
        unsafe {
            let pool = d
                .create_command_pool(&info, None)
                .vk("vkCreateCommandPool")?;
            let alloc = vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1);
            let made = d
                .allocate_command_buffers(&alloc)
                .vk("vkAllocateCommandBuffers")
                .and_then(|cbs| {
                    let fence = d
                        .create_fence(&vk::FenceCreateInfo::default(), None)
                        .vk("vkCreateFence")?;
                    Ok((cbs[0], fence))
                });
            match made {
                Ok((cb, fence)) => Ok(Submitter {
                    queue,
                    pool,
                    cb,
                    fence,
                }),
                Err(e) => {
                    d.destroy_command_pool(pool, None);
                    Err(e)
                }
            }
        }
    }
}

/// A Vulkan device and queue for the backend.
#[derive(Clone)]
pub struct Gpu {
    pub(crate) inner: Arc<Inner>,
    /// Kernels take their f16 variants (on where the device has f16; tests turn it off to
    /// compare with the f32 path on the same device).
    f16_kernels: bool,
    /// A lower cap on weight bindings than the device's (tests split small tensors with it).
    weight_binding_cap: Option<u64>,
    /// Kernels take their subgroup variants where the device has subgroup arithmetic (off
    /// by default; `TESSERA_VULKAN_SUBGROUPS=1` or `set_subgroup_kernels`).
    subgroup_kernels: bool,
    /// Quantized matmuls take the packed integer dot product kernel where the device has
    /// `shaderIntegerDotProduct` (`TESSERA_VULKAN_INT_DOT`, `set_int_dot_kernels`).
    int_dot_kernels: bool,
}

impl Gpu {
    /// Opens device `index` of the de-duplicated list (`tessera devices`); `None`: the first
    /// hardware device, else the first device (lavapipe on a machine without a GPU).
    pub fn new(index: Option<usize>) -> Result<Gpu, VulkanError> {
        let instance = Instance::new()?;
        let devices = listed_devices(&instance)?;
        let usable: Vec<usize> = (0..devices.len())
            .filter(|&i| devices[i].1.device.api_version >= crate::instance::API_VERSION)
            .collect();
        let pick = match index {
            Some(i) if i < devices.len() => i,
            Some(i) => {
                return Err(VulkanError::NoDevice(format!(
                    "device {i} of {} (see `tessera devices`)",
                    devices.len()
                )))
            }
            None => *usable
                .iter()
                .find(|&&i| devices[i].1.device.kind != DeviceKind::Cpu)
                .or(usable.first())
                .ok_or_else(|| VulkanError::NoDevice("no Vulkan 1.2 device".into()))?,
        };
        let (physical, listed) = devices[pick].clone();
        if listed.device.api_version < crate::instance::API_VERSION {
            return Err(VulkanError::NoDevice(format!(
                "{} offers Vulkan < 1.2",
                listed.device.name
            )));
        }
        Gpu::open(instance, physical, listed)
    }

    fn open(
        instance: Arc<Instance>,
        physical: vk::PhysicalDevice,
        listed: ListedDevice,
    ) -> Result<Gpu, VulkanError> {
        let raw = &instance.raw;
        // SAFETY: queries on a physical device of this instance.
        let families = unsafe { raw.get_physical_device_queue_family_properties(physical) };
        let family = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .ok_or_else(|| {
                VulkanError::NoDevice(format!("{} has no compute queue", listed.device.name))
            })? as u32;
        // SAFETY: as above.
        let (memory, props) = unsafe {
            (
                raw.get_physical_device_memory_properties(physical),
                raw.get_physical_device_properties(physical),
            )
        };
        let has_f16 = listed.device.features.f16;
        let mut f11 = vk::PhysicalDeviceVulkan11Features::default()
            .storage_buffer16_bit_access(has_f16)
            .uniform_and_storage_buffer16_bit_access(has_f16 && uniform16(&instance, physical));
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default()
            .shader_float16(has_f16)
            .shader_int8(listed.device.features.int8);
        let features = listed.device.features;
        let mut f13 = vk::PhysicalDeviceVulkan13Features::default()
            .shader_zero_initialize_workgroup_memory(features.zero_init_workgroup)
            .shader_integer_dot_product(features.int_dot);
        let mut robust2 = vk::PhysicalDeviceRobustness2FeaturesEXT::default()
            .robust_buffer_access2(features.robust_buffer_access2);
        // Robust buffer access (2 needs 1): out-of-range accesses are the driver's to catch,
        // as in wgpu, so the kernels' SPIR-V carries no clamps (`build/spirv.rs`).
        let base = vk::PhysicalDeviceFeatures::default()
            .robust_buffer_access(features.robust_buffer_access2)
            .shader_float64(features.f64);
        let extensions = match features.robust_buffer_access2 {
            true => vec![ash::ext::robustness2::NAME.as_ptr()],
            false => vec![],
        };
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        let mut info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_features(&base)
            .enabled_extension_names(&extensions)
            .push_next(&mut f11)
            .push_next(&mut f12);
        // `int_dot` implies Vulkan 1.3 (`enumerate`), as does zero-initialization.
        if features.zero_init_workgroup || features.int_dot {
            info = info.push_next(&mut f13);
        }
        if features.robust_buffer_access2 {
            info = info.push_next(&mut robust2);
        }
        // SAFETY: `info` and its chain live until the call returns; the features enabled are
        // the ones the device reported.
        let device = unsafe { raw.create_device(physical, &info, None) }.vk("vkCreateDevice")?;
        // SAFETY: the queue family and index exist (created above).
        let queue = unsafe { device.get_device_queue(family, 0) };
        let pipelines = Pipelines::new(&device, &listed.device)?;
        let submitter = Submitter::new(&device, queue, family)?;
        Ok(Gpu {
            inner: Arc::new(Inner {
                instance,
                device,
                submitter: Mutex::new(submitter),
                memory,
                limits: props.limits,
                listed,
                has_f16,
                pipelines: Mutex::new(pipelines),
                lost: AtomicBool::new(false),
            }),
            f16_kernels: has_f16,
            weight_binding_cap: None,
            // Off unless asked for: the subgroup reductions sum in another order, which moved
            // a near tie in SmolLM2's greedy fixture (token 22 of "Once upon a time")
            // away from llama.cpp's; the portable kernels match it.
            subgroup_kernels: std::env::var("TESSERA_VULKAN_SUBGROUPS").is_ok_and(|v| v == "1"),
            int_dot_kernels: int_dot_default(),
        })
    }

    pub fn device(&self) -> &crate::devices::PhysicalDevice {
        &self.inner.listed.device
    }

    /// A short description: name, driver, features.
    pub fn describe(&self) -> String {
        let d = self.device();
        format!(
            "{} ({}; driver {}; features {}; f16 kernels {}, subgroup kernels {}, int-dot kernels {}; storage bindings up to {} MiB)",
            d.name,
            d.kind.label(),
            d.driver_name,
            d.features.describe(),
            if self.f16_kernels() { "on" } else { "off" },
            if self.subgroup_kernels() { "on" } else { "off" },
            if self.int_dot_kernels() { "on" } else { "off" },
            self.max_binding() >> 20
        )
    }

    pub fn is_cpu(&self) -> bool {
        self.device().kind == DeviceKind::Cpu
    }

    /// The largest storage binding.
    pub fn max_binding(&self) -> u64 {
        self.inner.limits.max_storage_buffer_range as u64
    }

    /// The largest binding a weight part may take.
    pub fn max_weight_binding(&self) -> u64 {
        self.weight_binding_cap
            .map_or(self.max_binding(), |c| c.min(self.max_binding()))
    }

    pub fn set_weight_binding_cap(&mut self, bytes: Option<u64>) {
        self.weight_binding_cap = bytes;
    }

    pub fn f16_kernels(&self) -> bool {
        self.inner.has_f16 && self.f16_kernels
    }

    pub fn set_f16_kernels(&mut self, on: bool) {
        self.f16_kernels = on;
    }

    /// Kernels use their subgroup variants (the device has subgroup arithmetic in compute
    /// shaders and they are not off).
    pub fn subgroup_kernels(&self) -> bool {
        self.device().features.subgroup_arithmetic && self.subgroup_kernels
    }

    /// Turns the subgroup variants on (where the device has them) or off.
    pub fn set_subgroup_kernels(&mut self, on: bool) {
        self.subgroup_kernels = on;
    }

    /// Quantized matmuls take the packed integer dot product kernel (the device has
    /// `shaderIntegerDotProduct` and it is not off).
    pub fn int_dot_kernels(&self) -> bool {
        self.device().features.int_dot && self.int_dot_kernels
    }

    /// Turns the integer dot product kernel on (where the device has it) or off.
    pub fn set_int_dot_kernels(&mut self, on: bool) {
        self.int_dot_kernels = on;
    }

    /// Kernels keep WGSL's built-in pow/tanh/sin/cos on lavapipe, as the WebGPU backend does
    /// (its `Gpu::builtin_math`): same kernels, same numbers.
    pub fn builtin_math(&self) -> bool {
        self.device().name.starts_with("llvmpipe")
    }

    /// Pipelines compiled so far.
    pub fn n_pipelines(&self) -> usize {
        lock(&self.inner.pipelines).len()
    }

    /// The canonical names of the kernel variants created so far (tests check which path
    /// ran).
    pub fn kernel_names(&self) -> Vec<&'static str> {
        lock(&self.inner.pipelines).names()
    }

    /// Fails fast once the device was lost, and with the validation layer's first error
    /// since the last check (when validation is on).
    pub fn check(&self) -> Result<(), VulkanError> {
        if self.inner.lost.load(Ordering::Relaxed) {
            return Err(VulkanError::DeviceLost("an earlier call"));
        }
        if let Some(e) = crate::validation::take_error() {
            return Err(VulkanError::Validation(e));
        }
        Ok(())
    }

    /// Records a typed error; a device loss is remembered.
    pub(crate) fn note(&self, e: VulkanError) -> VulkanError {
        if matches!(e, VulkanError::DeviceLost(_)) {
            self.inner.lost.store(true, Ordering::Relaxed);
        }
        e
    }

    /// Records commands with `record` into the device's command buffer, submits it and
    /// waits. Submissions are serialised (one command buffer, one fence, reused: a step is
    /// one submission, so creating them each time would only cost).
    pub fn submit_and_wait(
        &self,
        record: impl FnOnce(&ash::Device, vk::CommandBuffer),
    ) -> Result<(), VulkanError> {
        self.check()?;
        let d = &self.inner.device;
        let s = lock(&self.inner.submitter);
        // SAFETY: the pool, command buffer and fence are this device's and used under the
        // mutex only; the previous submission was waited for (so resetting the pool is
        // allowed), and this one is waited for before the mutex is released.
        let result = unsafe {
            (|| {
                d.reset_command_pool(s.pool, vk::CommandPoolResetFlags::empty())
                    .vk("vkResetCommandPool")?;
                let begin = vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
                d.begin_command_buffer(s.cb, &begin)
                    .vk("vkBeginCommandBuffer")?;
                record(d, s.cb);
                d.end_command_buffer(s.cb).vk("vkEndCommandBuffer")?;
                d.reset_fences(&[s.fence]).vk("vkResetFences")?;
                let cbs = [s.cb];
                let submit = [vk::SubmitInfo::default().command_buffers(&cbs)];
                d.queue_submit(s.queue, &submit, s.fence)
                    .vk("vkQueueSubmit")?;
                match d.wait_for_fences(&[s.fence], true, WAIT_NS) {
                    Err(vk::Result::TIMEOUT) => Err(VulkanError::Timeout(WAIT_NS / 1_000_000_000)),
                    r => r.vk("vkWaitForFences"),
                }
            })()
        };
        drop(s);
        result.map_err(|e| self.note(e))?;
        self.check()
    }
}

/// Whether the device offers 16-bit access in uniform buffers too (f16 kernels may read
/// their parameters' neighbours there).
/// The integer dot product kernel's switch: `TESSERA_VULKAN_INT_DOT=1` on, anything else off
/// (the default; see docs/backend-vulkan.md for why).
fn int_dot_default() -> bool {
    std::env::var("TESSERA_VULKAN_INT_DOT").is_ok_and(|v| v == "1")
}

fn uniform16(instance: &Instance, physical: vk::PhysicalDevice) -> bool {
    let mut f11 = vk::PhysicalDeviceVulkan11Features::default();
    let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut f11);
    // SAFETY: a query into structs that live until it returns.
    unsafe {
        instance
            .raw
            .get_physical_device_features2(physical, &mut features)
    };
    f11.uniform_and_storage_buffer16_bit_access == vk::TRUE
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A full barrier between compute dispatches and transfers (writes visible to later reads
/// and writes): the recordings put one between consecutive dispatches.
pub fn barrier(d: &ash::Device, cb: vk::CommandBuffer) {
    let access = vk::AccessFlags::SHADER_READ
        | vk::AccessFlags::SHADER_WRITE
        | vk::AccessFlags::TRANSFER_READ
        | vk::AccessFlags::TRANSFER_WRITE
        | vk::AccessFlags::UNIFORM_READ
        | vk::AccessFlags::HOST_READ;
    let barrier = [vk::MemoryBarrier::default()
        .src_access_mask(access)
        .dst_access_mask(access)];
    let stages = vk::PipelineStageFlags::COMPUTE_SHADER
        | vk::PipelineStageFlags::TRANSFER
        | vk::PipelineStageFlags::HOST;
    // SAFETY: `cb` is in the recording state (callers record inside `submit_and_wait`).
    unsafe {
        d.cmd_pipeline_barrier(
            cb,
            stages,
            stages,
            vk::DependencyFlags::empty(),
            &barrier,
            &[],
            &[],
        )
    };
}

impl Gpu {
    /// The pipeline of a kernel variant (tests compile every WGSL file with it).
    pub fn pipeline(
        &self,
        key: tessera_gpu::pipelines::PipelineKey,
    ) -> Result<crate::pipelines::Pipeline, tessera_gpu::GpuError> {
        tessera_gpu::Target::pipeline(self, key)
    }
}

impl Gpu {
    /// Marks the device lost, as a call answering `VK_ERROR_DEVICE_LOST` does (tests check
    /// that every later call fails with a typed error, and a new device works).
    pub fn mark_lost(&self) {
        self.inner.lost.store(true, Ordering::Relaxed);
    }
}
