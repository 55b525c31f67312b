//! The host's clock for the engine's timings.

use std::time::Instant;

pub struct StdClock(Instant);

impl StdClock {
    pub fn new() -> StdClock {
        StdClock(Instant::now())
    }
}

impl tessera_runtime::generate::Clock for StdClock {
    fn now_s(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}
