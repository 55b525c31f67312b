//! Op timing for development: with `TESSERA_CPU_PROFILE=1` (native only: wasm32 has no clock
//! in std) the backend adds up the wall time of each kind of node on the calling thread and
//! prints the table to stderr when it is dropped, e.g. after `TESSERA_CPU_PROFILE=1 tessera
//! bench -m MODEL -p 0 -n 128 -t 2`. A matmul job counts as one `MulMat` entry for all the
//! matrices it runs (q, k and v together), its activation quantizing and the wait for the other
//! threads included; the per-step line divides by the graph runs (decode steps and prompt
//! batches alike). Reading the clock twice per node costs well under a microsecond, so the
//! small ops' figures are upper bounds.

use std::time::{Duration, Instant};

/// Calls and wall time per op name, in the order first seen.
#[derive(Default)]
pub struct OpProfile {
    by_op: Vec<(&'static str, u64, Duration)>,
    runs: u64,
}

impl OpProfile {
    /// A profile when `TESSERA_CPU_PROFILE` is set (and not "0"), natively.
    pub fn from_env() -> Option<OpProfile> {
        if cfg!(target_arch = "wasm32") {
            return None;
        }
        match std::env::var("TESSERA_CPU_PROFILE") {
            Ok(v) if v != "0" => Some(OpProfile::default()),
            _ => None,
        }
    }

    /// The clock at a node's start.
    pub fn start() -> Instant {
        Instant::now()
    }

    /// Adds one node of `op` that started at `start`.
    pub fn record(&mut self, op: &'static str, start: Instant) {
        self.add(op, start.elapsed());
    }

    /// Counts one graph run (the per-run figures divide by these).
    pub fn graph_run(&mut self) {
        self.runs += 1;
    }

    fn add(&mut self, op: &'static str, took: Duration) {
        match self.by_op.iter_mut().find(|e| e.0 == op) {
            Some(e) => {
                e.1 += 1;
                e.2 += took;
            }
            None => self.by_op.push((op, 1, took)),
        }
    }

    /// The table: ops by total time, longest first.
    pub fn report(&self) -> String {
        let mut rows: Vec<_> = self.by_op.iter().collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.2));
        let total: Duration = rows.iter().map(|r| r.2).sum();
        let runs = self.runs.max(1) as f64;
        let mut out = format!(
            "cpu op profile: {:.1} ms in {} graph runs\n  share  µs per run  nodes per run  µs per node  op\n",
            total.as_secs_f64() * 1e3,
            self.runs
        );
        for (op, calls, time) in rows {
            out += &format!(
                "{:6.1} % {:11.1} {:14.1} {:12.2}  {op}\n",
                100.0 * time.as_secs_f64() / total.as_secs_f64().max(1e-12),
                time.as_secs_f64() * 1e6 / runs,
                *calls as f64 / runs,
                time.as_secs_f64() * 1e6 / *calls as f64
            );
        }
        out
    }
}

impl Drop for OpProfile {
    fn drop(&mut self) {
        if self.runs > 0 {
            eprint!("{}", self.report());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_sums_per_op_and_divides_by_the_runs() {
        let mut p = OpProfile::default();
        p.add("MulMat", Duration::from_micros(30));
        p.add("Rope", Duration::from_micros(1));
        p.add("MulMat", Duration::from_micros(50));
        p.graph_run();
        p.graph_run();
        let table = p.report();
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].contains("0.1 ms in 2 graph runs"), "{table}");
        // MulMat first (80 of 81 µs): 40 µs and one node per run, 40 µs per node.
        assert!(lines[2].starts_with("  98.8 %"), "{table}");
        assert!(
            lines[2].contains("40.0") && lines[2].ends_with("MulMat"),
            "{table}"
        );
        assert!(
            lines[3].contains("0.5") && lines[3].ends_with("Rope"),
            "{table}"
        );
        p.runs = 0; // nothing printed on drop
    }
}
