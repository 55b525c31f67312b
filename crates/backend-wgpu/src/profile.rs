//! Kernel timing for development: with `TESSERA_WGPU_PROFILE=1` (native only) every step's
//! dispatches are first run one at a time, each in its own submission waited for, and the wall
//! time is added up per kernel variant; the table goes to stderr when the device is dropped.
//! The step then runs as usual, so its results are unchanged and each step costs about twice
//! as much: the figures compare kernels, they are not end-to-end speeds. (On a software
//! adapter the wall time is the kernel's; on a real GPU it includes a submission's latency.)

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Time and count per kernel variant (a pipeline key's family and defines).
#[derive(Default)]
pub struct Profile {
    by_kernel: Mutex<HashMap<String, (u64, Duration)>>,
}

impl Profile {
    /// A profile when `TESSERA_WGPU_PROFILE` is set (and not "0").
    pub fn from_env() -> Option<Profile> {
        match std::env::var("TESSERA_WGPU_PROFILE") {
            Ok(v) if v != "0" => Some(Profile::default()),
            _ => None,
        }
    }

    /// Adds one run of `kernel` that took `took` (`Recording` times each dispatch alone).
    pub fn add(&self, kernel: &str, took: Duration) {
        let mut map = self.by_kernel.lock().unwrap_or_else(|e| e.into_inner());
        let entry = map.entry(kernel.to_string()).or_default();
        entry.0 += 1;
        entry.1 += took;
    }

    /// The table: kernels by total time, longest first.
    pub fn report(&self) -> String {
        let map = self.by_kernel.lock().unwrap_or_else(|e| e.into_inner());
        let mut rows: Vec<_> = map.iter().collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.1 .1));
        let total: Duration = rows.iter().map(|r| r.1 .1).sum();
        let mut out = format!(
            "wgpu kernel profile: {:.1} ms in {} kernel variants\n  share    total ms     calls   mean µs  kernel\n",
            total.as_secs_f64() * 1e3,
            rows.len()
        );
        for (kernel, (calls, time)) in rows {
            out += &format!(
                "{:6.1} % {:11.1} {:9} {:9.0}  {kernel}\n",
                100.0 * time.as_secs_f64() / total.as_secs_f64().max(1e-12),
                time.as_secs_f64() * 1e3,
                calls,
                time.as_secs_f64() * 1e6 / *calls as f64
            );
        }
        out
    }
}

impl Drop for Profile {
    fn drop(&mut self) {
        eprint!("{}", self.report());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_lists_kernels_longest_first() {
        let p = Profile::default();
        {
            let mut map = p.by_kernel.lock().unwrap();
            map.insert("norm".into(), (4, Duration::from_millis(1)));
            map.insert("mul_mat W_Q8_0".into(), (2, Duration::from_millis(3)));
        }
        let report = p.report();
        let lines: Vec<&str> = report.lines().collect();
        assert!(lines[0].contains("4.0 ms in 2 kernel variants"), "{report}");
        assert!(
            lines[2].ends_with("mul_mat W_Q8_0") && lines[2].contains("75.0 %"),
            "{report}"
        );
        assert!(
            lines[3].ends_with("norm") && lines[3].contains("250"),
            "{report}"
        );
        p.by_kernel.lock().unwrap().clear();
    }
}
