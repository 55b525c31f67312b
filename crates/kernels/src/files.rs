//! The WGSL files of a folder, for the build scripts that embed (WebGPU backend) or compile
//! (Vulkan backend) them: every `.wgsl` file below it, folders included, so no hand-kept list
//! can miss one.

use std::path::{Path, PathBuf};

/// (path under `root` with `/` separators, file path) of every `.wgsl` file below `root`,
/// sorted by the first. An unreadable folder is an error (a build script fails on it).
pub fn wgsl_files(root: &Path) -> std::io::Result<Vec<(String, PathBuf)>> {
    let mut files = Vec::new();
    collect(root, root, &mut files)?;
    files.sort();
    Ok(files)
}

fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(root, &path, files)?;
        } else if path.extension().is_some_and(|e| e == "wgsl") {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            let name: Vec<_> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect();
            files.push((name.join("/"), path));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_shader_folder_is_listed_with_its_includes() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shaders/wgsl");
        let files = super::wgsl_files(&root).unwrap();
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert!(names.contains(&"mul_mat.wgsl"));
        assert!(names.contains(&"bytes.inc.wgsl"));
        assert!(names.windows(2).all(|w| w[0] < w[1]));
    }
}
