//! Weights streamed into GPU buffers piece by piece (the browser's download) hold exactly the
//! file's bytes, whatever the chunking, the alignment of rows and the split across bindings;
//! a model streamed so computes exactly what the same model uploaded from memory does.

use std::path::PathBuf;
use std::sync::Arc;

use tessera_backend_wgpu::{Gpu, WeightStream, WgpuBackend};
use tessera_core::weights::{WeightId, WeightStore};
use tessera_core::{Context, ContextParams, Model};
use tessera_gguf::{GgmlType, GgufFile, GgufWriter, StreamEvent, StreamParser};

fn gpu() -> Gpu {
    pollster::block_on(Gpu::new()).expect("a WebGPU adapter (lavapipe in CI)")
}

/// Feeds `file` to a piece-mode parser in chunks of `sizes` (cycled) and the pieces to a
/// stream; returns the stream and the header-only file. `known_len`: buffers made up front.
fn stream(gpu: &Gpu, file: &[u8], sizes: &[usize], known_len: bool) -> (WeightStream, GgufFile) {
    let mut parser = StreamParser::pieces();
    let mut ws = WeightStream::new(gpu.clone());
    let mut headers = Vec::new();
    let mut at = 0;
    for &n in sizes.iter().cycle() {
        if at == file.len() {
            break;
        }
        let end = (at + n).min(file.len());
        for event in parser.feed(&file[at..end]).unwrap() {
            match event {
                StreamEvent::HeaderComplete(h) => {
                    if known_len {
                        h.check_tensors_within(file.len() as u64).unwrap();
                    }
                    ws.begin_shard(&h, known_len).unwrap();
                    headers.push(h);
                }
                StreamEvent::TensorPiece {
                    index,
                    offset_in_tensor,
                    bytes,
                    ..
                } => ws.write(index, offset_in_tensor, &bytes).unwrap(),
                StreamEvent::TensorReady { .. } => unreachable!("piece mode"),
            }
        }
        at = end;
    }
    parser.finish().unwrap();
    (ws, GgufFile::from_headers(headers).unwrap())
}

/// The bytes of a GPU buffer.
fn read(gpu: &Gpu, buffer: &wgpu::Buffer) -> Vec<u8> {
    let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("read"),
        size: buffer.size(),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(buffer, 0, &staging, 0, buffer.size());
    gpu.queue.submit([enc.finish()]);
    let mut words = vec![0u32; buffer.size() as usize / 4];
    gpu.read_back(&staging, &mut words).unwrap();
    bytemuck::cast_slice(&words).to_vec()
}

fn filler(seed: u32, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// Tensors whose rows are not whole words (Q5_0: 22 bytes a block, F16 rows of 3) next to
/// ones that are.
fn odd_tensors() -> (Vec<u8>, Vec<(&'static str, Vec<usize>)>) {
    let tensors: Vec<(&str, Vec<usize>, GgmlType)> = vec![
        ("q5", vec![32, 37], GgmlType::Q5_0),
        ("h", vec![3, 5], GgmlType::F16),
        ("f", vec![7, 3], GgmlType::F32),
        ("q8", vec![64, 9], GgmlType::Q8_0),
        ("k", vec![256, 3], GgmlType::Q6_K),
    ];
    let mut w = GgufWriter::new();
    w.add_str("general.architecture", "llama").unwrap();
    let mut shapes = Vec::new();
    for (i, (name, ne, ty)) in tensors.into_iter().enumerate() {
        let row = ne[0] / ty.block_size() as usize * ty.type_size() as usize;
        let dims: Vec<u64> = ne.iter().map(|&d| d as u64).collect();
        w.add_tensor(name, &dims, ty, filler(i as u32 + 1, row * ne[1]))
            .unwrap();
        shapes.push((name, ne));
    }
    (w.to_bytes(), shapes)
}

#[test]
fn streamed_weights_hold_the_files_bytes_whatever_the_chunks_and_bindings() {
    let (file, shapes) = odd_tensors();
    let whole = GgufFile::from_bytes(file.clone()).unwrap();
    for cap in [None, Some(300), Some(212)] {
        for (sizes, known_len) in [
            (&[1usize][..], true),
            (&[7, 3, 1000], false),
            (&[4096], true),
            (&[5, 2, 9], false),
        ] {
            let mut gpu = gpu();
            gpu.set_weight_binding_cap(cap);
            let (ws, headers_only) = stream(&gpu, &file, sizes, known_len);
            let mut store = WeightStore::new(Arc::new(headers_only));
            for (name, ne) in &shapes {
                store.require(name, ne).unwrap();
            }
            let weights = ws.finish(&store).unwrap();
            for i in 0..store.len() {
                let id = WeightId(i as u32);
                let name = &store.get(id).name;
                let expected = whole.tensor_data(name).unwrap();
                let w = weights.get(id);
                if cap.is_some() && *name == "q5" {
                    assert!(
                        w.parts.len() > 2,
                        "q5 split across bindings: {}",
                        w.parts.len()
                    );
                }
                let mut got = Vec::new();
                for part in &w.parts {
                    let n = part.rows * w.row_bytes;
                    got.extend_from_slice(&read(&gpu, &part.buffer)[..n]);
                }
                assert_eq!(
                    got,
                    expected,
                    "{name}: cap {cap:?}, chunks {sizes:?}, {} parts",
                    w.parts.len()
                );
            }
        }
    }
}

#[test]
fn a_stream_cut_short_or_a_weight_not_streamed_is_an_error() {
    let (file, shapes) = odd_tensors();
    let gpu = gpu();
    // A header that promises more than the announced length fails before any buffer is made.
    let mut parser = StreamParser::pieces();
    let header = parser
        .feed(&file)
        .unwrap()
        .into_iter()
        .find_map(|e| match e {
            StreamEvent::HeaderComplete(h) => Some(h),
            _ => None,
        })
        .unwrap();
    let end = header
        .tensors
        .iter()
        .map(|t| header.data_offset + t.offset + t.size)
        .max();
    assert!(header.check_tensors_within(end.unwrap()).is_ok());
    assert!(header.check_tensors_within(end.unwrap() - 1).is_err());
    // Tensors whose bytes never came.
    let mut ws = WeightStream::new(gpu.clone());
    ws.begin_shard(&header, false).unwrap();
    let mut store = WeightStore::new(Arc::new(GgufFile::from_headers(vec![header]).unwrap()));
    store.require(shapes[0].0, &shapes[0].1).unwrap();
    let err = ws.finish(&store).err().expect("incomplete tensors");
    assert!(err.to_string().contains("bytes arrived"), "{err}");
}

fn model_path(name: &str) -> PathBuf {
    std::env::var_os("TESSERA_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models"))
        .join(name)
}

fn params() -> ContextParams {
    ContextParams {
        n_ctx: 64,
        n_batch: 16,
    }
}

#[test]
fn smollm2_streamed_to_the_gpu_computes_what_it_does_uploaded_from_memory() {
    let path = model_path("SmolLM2-135M-Instruct.Q4_1.gguf");
    let bytes = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/fetch-models.sh)", path.display()));
    let mut gpu = gpu();
    // Small bindings, so the larger tensors are split across several.
    gpu.set_weight_binding_cap(Some(3 << 20));
    let prompt = [1u32, 504, 3458, 282, 4649, 314, 253, 2];

    let mapped = Arc::new(
        Model::load(
            Arc::new(GgufFile::from_bytes(bytes.clone()).unwrap()),
            &mut |_| {},
        )
        .unwrap(),
    );
    let mut backend = WgpuBackend::with_gpu(gpu.clone());
    backend.upload_weights(mapped.weights()).unwrap();
    let mut ctx = Context::new(mapped.clone(), params(), Box::new(backend)).unwrap();
    ctx.decode(&prompt, false).unwrap();
    let expected = ctx.logits().to_vec();

    let (ws, headers_only) = stream(&gpu, &bytes, &[1 << 20, 4093, 77], true);
    drop(bytes);
    let streamed = Arc::new(Model::load(Arc::new(headers_only), &mut |_| {}).unwrap());
    let mut backend = WgpuBackend::with_gpu(gpu.clone());
    backend.set_weights(ws.finish(streamed.weights()).unwrap());
    let mut ctx = Context::new(streamed.clone(), params(), Box::new(backend)).unwrap();
    ctx.decode(&prompt, false).unwrap();
    assert_eq!(ctx.logits(), &expected[..]);

    // The CPU backend cannot run a model whose bytes are on the GPU: a typed error.
    let mut cpu = Context::new(
        streamed,
        params(),
        Box::new(tessera_backend_cpu::CpuBackend::new(Arc::new(
            tessera_core::SequentialPool,
        ))),
    )
    .unwrap();
    assert!(matches!(
        cpu.decode(&prompt, false),
        Err(tessera_core::EngineError::WeightsNotInMemory)
    ));
}

/// A header claiming a huge tensor (or a zero-sized one with huge dimensions) allocates
/// nothing up front when the length is unknown, and one binding once bytes come.
#[test]
fn a_hostile_header_claims_no_gpu_memory_ahead_of_its_bytes() {
    let mut gpu = gpu();
    gpu.set_weight_binding_cap(Some(1 << 20));
    let tensor = |name: &str, dims: Vec<u64>, size: u64| tessera_gguf::TensorInfo {
        name: name.into(),
        dims,
        ty: GgmlType::Q8_0,
        offset: 0,
        size,
    };
    let header = tessera_gguf::Header {
        version: 3,
        metadata: Vec::new(),
        tensors: vec![
            // 2^40 rows of 34 bytes: 37 TB.
            tensor("huge", vec![32, 1 << 40], 34 << 40),
            tensor("empty", vec![0, 1 << 62], 0),
        ],
        alignment: 32,
        data_offset: 64,
    };
    let mut ws = WeightStream::new(gpu.clone());
    ws.begin_shard(&header, false).unwrap();
    ws.write(0, 0, &[7u8; 100]).unwrap();
    let store = WeightStore::new(Arc::new(GgufFile::from_headers(vec![header]).unwrap()));
    let err = ws
        .finish(&store)
        .err()
        .expect("the huge tensor is incomplete");
    assert!(err.to_string().contains("bytes arrived"), "{err}");
}
