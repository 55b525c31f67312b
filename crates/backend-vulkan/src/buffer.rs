//! Buffers, each with its own memory: device-local ones for weights, the KV cache and
//! activations (filled through a host-visible staging buffer), host-visible coherent ones for
//! the small per-step inputs and the read-backs.

use std::sync::Arc;

use ash::vk;

use crate::error::{VkContext, VulkanError};
use crate::gpu::{barrier, Gpu, Inner};

/// Bytes per staging round trip when uploading (weights arrive tensor by tensor; a larger
/// tensor goes in several rounds through one staging buffer).
const STAGING_BYTES: u64 = 32 << 20;

/// Where a buffer's memory lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// Device-local: written by copies and kernels only.
    Device,
    /// Host-visible and coherent, mapped for its whole life.
    Host,
}

struct Raw {
    gpu: Arc<Inner>,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    size: u64,
    mapped: *mut u8,
}

// SAFETY: the mapped pointer is only written through `&Buffer` methods by one thread at a time
// per buffer (the backend owns its buffers and is `Send`, not shared), and Vulkan handles are
// plain values usable from any thread.
unsafe impl Send for Raw {}
unsafe impl Sync for Raw {}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: the buffer is no longer referenced by pending work: submissions are waited
        // for before `submit_and_wait` returns.
        unsafe {
            self.gpu.device.destroy_buffer(self.buffer, None);
            self.gpu.device.free_memory(self.memory, None);
        }
    }
}

/// A buffer handle (cheap to clone).
#[derive(Clone)]
pub struct Buffer(Arc<Raw>);

impl Buffer {
    /// A buffer of `size` bytes (at least 4, a multiple of 4) for storage, uniform and copies.
    pub fn new(gpu: &Gpu, what: &str, size: u64, memory: Memory) -> Result<Buffer, VulkanError> {
        gpu.check()?;
        let size = size.max(4).next_multiple_of(4);
        let inner = &gpu.inner;
        let d = &inner.device;
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::UNIFORM_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        let oom = |e: VulkanError| match e {
            VulkanError::OutOfMemory { .. } => VulkanError::Allocation {
                what: what.to_string(),
                bytes: size,
            },
            e => gpu.note(e),
        };
        // SAFETY: creating and binding a buffer and its memory on this device; on failure
        // whatever was created is destroyed before returning.
        unsafe {
            let buffer = d
                .create_buffer(&info, None)
                .vk("vkCreateBuffer")
                .map_err(oom)?;
            let req = d.get_buffer_memory_requirements(buffer);
            let wanted = match memory {
                Memory::Device => vk::MemoryPropertyFlags::DEVICE_LOCAL,
                Memory::Host => {
                    vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT
                }
            };
            let Some(type_index) = memory_type(&inner.memory, req.memory_type_bits, wanted) else {
                d.destroy_buffer(buffer, None);
                return Err(VulkanError::Unsupported(format!(
                    "no {memory:?} memory for {what}"
                )));
            };
            // More than the whole heap is out of memory before asking (asking is invalid).
            let heap = inner.memory.memory_types[type_index as usize].heap_index;
            if req.size > inner.memory.memory_heaps[heap as usize].size {
                d.destroy_buffer(buffer, None);
                return Err(VulkanError::Allocation {
                    what: what.to_string(),
                    bytes: size,
                });
            }
            let alloc = vk::MemoryAllocateInfo::default()
                .allocation_size(req.size)
                .memory_type_index(type_index);
            let mem = match d.allocate_memory(&alloc, None).vk("vkAllocateMemory") {
                Ok(m) => m,
                Err(e) => {
                    d.destroy_buffer(buffer, None);
                    return Err(oom(e));
                }
            };
            let bound = d
                .bind_buffer_memory(buffer, mem, 0)
                .vk("vkBindBufferMemory");
            let mapped = bound.and_then(|()| match memory {
                Memory::Host => d
                    .map_memory(mem, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                    .vk("vkMapMemory")
                    .map(|p| p.cast::<u8>()),
                Memory::Device => Ok(std::ptr::null_mut()),
            });
            match mapped {
                Ok(mapped) => Ok(Buffer(Arc::new(Raw {
                    gpu: gpu.inner.clone(),
                    buffer,
                    memory: mem,
                    size,
                    mapped,
                }))),
                Err(e) => {
                    d.destroy_buffer(buffer, None);
                    d.free_memory(mem, None);
                    Err(oom(e))
                }
            }
        }
    }

    pub fn raw(&self) -> vk::Buffer {
        self.0.buffer
    }

    pub fn size(&self) -> u64 {
        self.0.size
    }

    /// Writes `bytes` at `offset` of a host-visible buffer.
    pub fn write(&self, offset: u64, bytes: &[u8]) {
        assert!(!self.0.mapped.is_null(), "write to a device-local buffer");
        assert!(
            offset + bytes.len() as u64 <= self.0.size,
            "write past the buffer"
        );
        // SAFETY: the range is inside the mapped (coherent) allocation, checked above; no
        // submission reads it concurrently (steps write their inputs before submitting).
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.0.mapped.add(offset as usize),
                bytes.len(),
            )
        };
    }

    /// Reads `out.len()` bytes at offset 0 of a host-visible buffer.
    pub fn read(&self, out: &mut [u8]) {
        assert!(!self.0.mapped.is_null(), "read of a device-local buffer");
        assert!(out.len() as u64 <= self.0.size, "read past the buffer");
        // SAFETY: inside the mapped allocation; the submission that wrote it was waited for.
        unsafe { std::ptr::copy_nonoverlapping(self.0.mapped, out.as_mut_ptr(), out.len()) };
    }

    /// Fills a device-local buffer from `bytes` at `offset` through a staging buffer.
    pub fn upload(&self, gpu: &Gpu, offset: u64, bytes: &[u8]) -> Result<(), VulkanError> {
        if bytes.is_empty() {
            return Ok(());
        }
        let chunk = STAGING_BYTES.min(bytes.len() as u64);
        let staging = Buffer::new(gpu, "upload staging", chunk, Memory::Host)?;
        for (i, part) in bytes.chunks(chunk as usize).enumerate() {
            staging.write(0, part);
            let region = [vk::BufferCopy {
                src_offset: 0,
                dst_offset: offset + i as u64 * chunk,
                size: part.len().next_multiple_of(4).min(staging.size() as usize) as u64,
            }];
            gpu.submit_and_wait(|d, cb| {
                // SAFETY: both buffers live until the submission is waited for.
                unsafe { d.cmd_copy_buffer(cb, staging.raw(), self.raw(), &region) };
                barrier(d, cb);
            })?;
        }
        Ok(())
    }
}

/// The first memory type allowed by `bits` with all of `wanted`.
fn memory_type(
    props: &vk::PhysicalDeviceMemoryProperties,
    bits: u32,
    wanted: vk::MemoryPropertyFlags,
) -> Option<u32> {
    (0..props.memory_type_count).find(|&i| {
        bits & (1 << i) != 0
            && props.memory_types[i as usize]
                .property_flags
                .contains(wanted)
    })
}
