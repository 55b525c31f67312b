//! What names a compute pipeline: a kernel family, its entry point and its defines. Each
//! backend compiles and caches the pipelines by this key (wgpu on first use, Vulkan from the
//! SPIR-V its build compiled).

use tessera_kernels::Define;

/// What makes a pipeline distinct.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PipelineKey {
    pub family: &'static str,
    pub entry: &'static str,
    pub defines: Vec<Define>,
}

/// A kernel variant's name in a profile: family, entry point unless `main`, defines.
pub fn kernel_name(key: &PipelineKey) -> String {
    let mut name = key.family.trim_end_matches(".wgsl").to_string();
    if key.entry != "main" {
        name += &format!(":{}", key.entry);
    }
    for (define, value) in &key.defines {
        name += &format!(" {define}");
        if *value != 1 {
            name += &format!("={value}");
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_show_the_entry_and_the_defines() {
        let key = PipelineKey {
            family: "mul_mat.wgsl",
            entry: "main",
            defines: vec![("W_Q4_1", 1), ("WG", 64), ("NC", 1)],
        };
        assert_eq!(kernel_name(&key), "mul_mat W_Q4_1 WG=64 NC");
        let key = PipelineKey {
            family: "kv.wgsl",
            entry: "store",
            defines: vec![],
        };
        assert_eq!(kernel_name(&key), "kv:store");
    }
}
