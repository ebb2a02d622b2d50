//! Virtual-time friendly instants for the pure core.
//!
//! The core never reads a clock: the daemon converts its monotonic clock into [`Instant`] and
//! passes it in; the simulator advances a virtual one.

use std::time::Duration;

/// A point in monotonic time, in milliseconds since an arbitrary origin (daemon start or the
/// start of a simulation).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Instant(pub u64);

impl Instant {
    /// The origin.
    pub const ZERO: Instant = Instant(0);

    /// Milliseconds since the origin.
    pub fn as_millis(self) -> u64 {
        self.0
    }

    /// This instant plus `d`, saturating.
    pub fn plus(self, d: Duration) -> Instant {
        Instant(
            self.0
                .saturating_add(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        )
    }

    /// Time elapsed from `earlier` to `self` (zero if `earlier` is later).
    pub fn since(self, earlier: Instant) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

impl std::fmt::Display for Instant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = self.0;
        write!(f, "{}.{:03}s", ms / 1000, ms % 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_and_since_are_inverse() {
        let t = Instant(1_500);
        let later = t.plus(Duration::from_millis(2_250));
        assert_eq!(later, Instant(3_750));
        assert_eq!(later.since(t), Duration::from_millis(2_250));
        assert_eq!(t.since(later), Duration::ZERO);
        assert_eq!(later.to_string(), "3.750s");
    }
}
