//! The Vulkan section of `tessera devices`: the de-duplicated physical devices, numbered as
//! `--backend vulkan --device N` takes them.

use tessera_backend_vulkan::devices::ListedDevice;
use tessera_backend_vulkan::instance::version_string;

pub fn lines() -> Vec<String> {
    match tessera_backend_vulkan::enumerate::list() {
        Ok(list) if list.is_empty() => vec!["(no physical device)".into()],
        Ok(list) => list
            .iter()
            .enumerate()
            .flat_map(|(i, d)| entry(i, d))
            .collect(),
        Err(e) => vec![format!("(unavailable: {e})")],
    }
}

fn entry(i: usize, listed: &ListedDevice) -> Vec<String> {
    let d = &listed.device;
    let mut lines = vec![
        format!(
            "{i}: {} ({}, Vulkan {})",
            d.name,
            d.kind.label(),
            version_string(d.api_version)
        ),
        format!("   driver: {} {}", d.driver_name, d.driver_info),
        format!("   uuid: {}", d.uuid_string()),
        format!("   memory: {} MiB device-local", d.memory >> 20),
        format!("   features used: {}", d.features.describe()),
    ];
    if !listed.also_via.is_empty() {
        lines.push(format!(
            "   also exposed by {} (same device UUID; {} kept as the better driver)",
            listed.also_via.join(", "),
            d.driver_name
        ));
    }
    lines
}
