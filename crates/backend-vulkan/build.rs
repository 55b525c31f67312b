//! Compiles every kernel variant the backend can request (`tessera_kernels::variants::all`,
//! canonicalized and de-duplicated) from the WGSL of `shaders/wgsl/` to SPIR-V with naga, and
//! embeds them: `OUT_DIR/kernels.spv` (every module's words, little-endian, one after the
//! other) and `OUT_DIR/kernels.rs` (the table: name, descriptor kinds, and one module per
//! combination of the device properties that change the variant's SPIR-V, see
//! `src/kernels.rs`). naga is pure Rust: no shader compiler or C toolchain to install.
//! Run time only hands these words to the driver.

#[path = "build/spirv.rs"]
mod spirv;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use spirv::{Profile, MAX_BINDINGS};
use tessera_kernels::preprocess::variant_name;
use tessera_kernels::{canonical, preprocess, Define};

/// One variant to compile.
struct Job {
    name: String,
    entry: &'static str,
    defines: Vec<Define>,
    text: String,
    /// The profile bits that change its SPIR-V.
    relevant: u8,
}

/// Its modules: (profile bits, words), and its bindings' descriptor kinds.
type Built = (Vec<(u8, Vec<u32>)>, [u8; MAX_BINDINGS]);

fn main() {
    let start = Instant::now();
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.join("../../shaders/wgsl");
    // A folder: cargo re-runs this script when any file below it changes.
    println!("cargo:rerun-if-changed={}", root.display());
    println!("cargo:rerun-if-changed=build/spirv.rs");
    let sources: HashMap<String, String> = tessera_kernels::files::wgsl_files(&root)
        .unwrap()
        .into_iter()
        .map(|(name, path)| (name, std::fs::read_to_string(path).unwrap()))
        .collect();
    let source = |name: &str| sources.get(name).map(String::as_str);

    let mut unique: BTreeMap<String, (&'static str, &'static str, Vec<Define>)> = BTreeMap::new();
    for v in tessera_kernels::variants::all() {
        let defines = canonical(v.family, &v.defines, &source)
            .unwrap_or_else(|e| panic!("{}: {e}", v.family));
        let name = variant_name(v.family, v.entry, &defines);
        unique.insert(name, (v.family, v.entry, defines));
    }
    let jobs: Vec<Job> = unique
        .into_iter()
        .map(|(name, (family, entry, defines))| {
            let text = preprocess(family, &defines, &source).unwrap_or_else(|e| panic!("{e}"));
            let relevant = Profile::relevant_bits(&text);
            Job {
                name,
                entry,
                defines,
                text,
                relevant,
            }
        })
        .collect();

    // Every module is independent: spread them over the build machine's threads.
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Built>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                // naga can panic on a module it cannot write: name the variant.
                let built = std::panic::catch_unwind(|| build(job))
                    .unwrap_or_else(|_| panic!("naga failed on {}", job.name));
                results.lock().unwrap()[i] = Some(built);
            });
        }
    });
    let results = results.into_inner().unwrap();

    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let mut words: Vec<u32> = Vec::new();
    // Identical modules (a profile bit that turned out not to matter, e.g. Int8 in a kernel
    // whose packing built-ins are in unused functions) are stored once.
    let mut stored: HashMap<Vec<u32>, usize> = HashMap::new();
    let mut table = format!(
        "/// Profile bits (`build/spirv.rs`).\n\
         pub const ROBUST2: u8 = {};\npub const ZERO_INIT: u8 = {};\npub const INT8: u8 = {};\n\
         /// Every prebuilt variant, sorted by name.\npub static KERNELS: &[Kernel] = &[\n",
        Profile::ROBUST2,
        Profile::ZERO_INIT,
        Profile::INT8
    );
    let mut n_modules = 0;
    for (job, built) in jobs.iter().zip(results) {
        let (modules, kinds) = built.expect("every job ran");
        let mut spans = String::new();
        for (bits, w) in modules {
            let at = *stored.entry(w.clone()).or_insert_with(|| {
                words.extend_from_slice(&w);
                n_modules += 1;
                words.len() - w.len()
            });
            write!(spans, "({bits}, {at}, {}), ", w.len()).unwrap();
        }
        writeln!(
            table,
            "    Kernel {{ name: {:?}, entry: {:?}, relevant: {}, kinds: {:?}, modules: &[{spans}] }},",
            job.name, job.entry, job.relevant, kinds
        )
        .unwrap();
    }
    table.push_str("];\n");
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(out.join("kernels.spv"), &bytes).unwrap();
    let ms = start.elapsed().as_millis();
    writeln!(
        table,
        "/// Variants, distinct modules, SPIR-V bytes and milliseconds build.rs took (on {threads} threads).\n\
         pub const BUILD_STATS: (usize, usize, usize, u128) = ({}, {n_modules}, {}, {ms});",
        jobs.len(),
        bytes.len()
    )
    .unwrap();
    std::fs::write(out.join("kernels.rs"), table).unwrap();
}

/// The variant's modules for every combination of its relevant profile bits; a kernel that
/// does not compile fails the build, naming it.
fn build(job: &Job) -> Built {
    let module = naga::front::wgsl::parse_str(&job.text)
        .unwrap_or_else(|e| panic!("{}: {}", job.name, e.emit_to_string(&job.text)));
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{}: {}", job.name, e.emit_to_string(&job.text)));
    let kinds = spirv::binding_kinds(&module, &info, job.entry)
        .unwrap_or_else(|e| panic!("{}: {e}", job.name));
    let mut modules = Vec::new();
    for bits in 0..=Profile::ALL {
        if bits & !job.relevant != 0 {
            continue; // the same module as with those bits off
        }
        let profile = Profile { bits };
        let options = profile.options(&job.defines, &job.text);
        let pipeline = naga::back::spv::PipelineOptions {
            shader_stage: naga::ShaderStage::Compute,
            entry_point: job.entry.to_string(),
        };
        let words = naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline))
            .unwrap_or_else(|e| panic!("{} ({profile:?}): {e}", job.name));
        modules.push((bits, words));
    }
    (modules, kinds)
}
