//! A model's state, what `/v1/models` shows of it, and the back-off after a failed load.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Loaded;

#[derive(Clone)]
pub enum State {
    Unloaded,
    Loading,
    Ready(Arc<Loaded>),
    Failed(Failure),
}

/// A failed load. The reason went to the server log; clients only learn when to try again.
#[derive(Clone, Copy, Debug)]
pub struct Failure {
    /// No new load starts before this (the back-off).
    pub until: Instant,
}

impl Failure {
    /// Whole seconds until the model may be tried again (at least 1, as `Retry-After` takes
    /// whole seconds), or `None` once it may.
    pub fn retry_after(&self, now: Instant) -> Option<u64> {
        let left = self.until.checked_duration_since(now)?;
        (!left.is_zero()).then(|| left.as_secs_f64().ceil().max(1.0) as u64)
    }
}

/// The back-off after `failures` (at least 1) failed loads in a row: `first`, doubling each
/// time, at most `max`.
pub fn backoff(failures: u32, first: Duration, max: Duration) -> Duration {
    let doublings = failures.saturating_sub(1).min(31);
    first.saturating_mul(1 << doublings).min(max)
}

/// A model's state as `/v1/models` shows it; a snapshot that holds no reference to the model
/// (a listing must not keep a model from being unloaded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Unloaded,
    Loading,
    Loaded,
    /// Its last load failed; `retry_after`: seconds until it may be tried again.
    Failed {
        retry_after: Option<u64>,
    },
}

impl Status {
    pub fn of(state: &State, now: Instant) -> Status {
        match state {
            State::Unloaded => Status::Unloaded,
            State::Loading => Status::Loading,
            State::Ready(_) => Status::Loaded,
            State::Failed(f) => Status::Failed {
                retry_after: f.retry_after(now),
            },
        }
    }

    /// The word `/v1/models` shows.
    pub fn word(&self) -> &'static str {
        match self {
            Status::Unloaded => "unloaded",
            Status::Loading => "loading",
            Status::Loaded => "loaded",
            Status::Failed { .. } => "failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let s = Duration::from_secs;
        let got: Vec<_> = (1..=8).map(|n| backoff(n, s(10), s(300))).collect();
        assert_eq!(
            got,
            [s(10), s(20), s(40), s(80), s(160), s(300), s(300), s(300)]
        );
        assert_eq!(backoff(u32::MAX, s(10), s(300)), s(300));
    }

    #[test]
    fn retry_after_rounds_up_and_ends() {
        let now = Instant::now();
        let f = Failure {
            until: now + Duration::from_millis(2100),
        };
        assert_eq!(f.retry_after(now), Some(3));
        assert_eq!(f.retry_after(now + Duration::from_millis(2050)), Some(1));
        assert_eq!(f.retry_after(now + Duration::from_millis(2100)), None);
        assert_eq!(f.retry_after(now + Duration::from_secs(5)), None);
    }
}
