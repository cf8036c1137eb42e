//! The controller's clock: wall time for the planner and tokio time for waiting, kept in
//! step.
//!
//! The planner takes `now` as a wall-clock time (soaks, timeouts, windows); the runtime
//! waits on tokio timers. Deriving the wall clock from tokio's clock (start wall time plus
//! elapsed tokio time) keeps both consistent under paused test time. `speed` makes the
//! controller's time run that many times faster, to match a `rota sim serve --speed N`
//! simulation whose delays are divided by N: policy durations (soaks, timeouts) then mean
//! simulated time on both sides.
//!
//! **Anchors.** Every clock of one tokio runtime counts from that runtime's first clock, so
//! the replicas of one simulation agree. Two runtimes never share an anchor: a shared one
//! turned the real time between them into fleet time, times the speed (a demo started three
//! minutes after another test of the same process began 30 hours ahead at 600x, inside a
//! maintenance window it never meets when run alone).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start_wall: DateTime<Utc>,
    start: Instant,
    speed: f64,
}

impl Clock {
    /// A clock running `speed` times faster (1.0 = real time), anchored at the real time
    /// the runtime's first clock was made. Every clock of a runtime shares that anchor: a
    /// controller started later (a restarted replica in the simulation, on paused tokio
    /// time) reads the same time as the others, instead of a wall time hours behind what
    /// they wrote in the checkpoint. Outside a runtime a clock anchors at its own making.
    pub fn new(speed: f64) -> Clock {
        let (start_wall, start) = anchor();
        Clock {
            start_wall,
            start,
            speed: if speed.is_finite() && speed > 0.0 {
                speed
            } else {
                1.0
            },
        }
    }

    /// This clock with its wall time off by `by` (a replica on a machine whose clock is
    /// wrong: the chaos suite's clock skew between replicas).
    pub fn skewed(mut self, by: chrono::Duration) -> Clock {
        self.start_wall += by;
        self
    }

    /// The wall time this clock counts from, and the tokio instant it was read at: what a
    /// simulated cluster in the same process anchors its own time at, so that the Events its
    /// kubelets stamp fall where the gates look (`Timekeeping::anchor_at`).
    pub fn anchor(&self) -> (DateTime<Utc>, Instant) {
        (self.start_wall, self.start)
    }

    /// The controller's wall-clock time now.
    pub fn now(&self) -> DateTime<Utc> {
        self.wall(Instant::now())
    }

    /// The wall-clock time at a tokio instant.
    pub fn wall(&self, at: Instant) -> DateTime<Utc> {
        let elapsed = at.saturating_duration_since(self.start).mul_f64(self.speed);
        self.start_wall + chrono::Duration::from_std(elapsed).unwrap_or_default()
    }

    /// The tokio instant after `d` of controller time.
    pub fn after(&self, d: Duration) -> Instant {
        Instant::now() + d.div_f64(self.speed)
    }
}

/// A wall time and the tokio instant it was read at.
type Anchor = (DateTime<Utc>, Instant);

/// The anchor of the current tokio runtime, made by its first clock (see the module's
/// header). One entry per runtime that made a clock: a process makes one, a test binary one
/// per test.
fn anchor() -> Anchor {
    static ANCHORS: LazyLock<Mutex<HashMap<tokio::runtime::Id, Anchor>>> =
        LazyLock::new(Default::default);
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return (Utc::now(), Instant::now());
    };
    *ANCHORS
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
        .entry(runtime.id())
        .or_insert_with(|| (Utc::now(), Instant::now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn wall_time_follows_tokio_time_at_the_given_speed() {
        let c = Clock::new(10.0);
        let t0 = c.now();
        tokio::time::sleep_until(c.after(Duration::from_secs(100))).await;
        let moved = (c.now() - t0).num_seconds();
        assert_eq!(moved, 100);
        let real = Clock::new(1.0);
        let t1 = real.now();
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!((real.now() - t1).num_seconds(), 5);
    }

    /// A runtime made after another one's clock (a later test of the same binary) starts at
    /// its own wall time: the real time in between is not fleet time times the speed.
    #[test]
    fn a_runtime_does_not_inherit_another_runtimes_anchor() {
        let paused = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap()
        };
        let first = paused().block_on(async { Clock::new(600.0).now() });
        std::thread::sleep(Duration::from_millis(200));
        let (before, second) = (
            Utc::now(),
            paused().block_on(async { Clock::new(600.0).now() }),
        );
        // Shared, the second would read 200 ms x 600 = 2 minutes past the first.
        let ahead = (second - before).num_seconds();
        assert!(
            ahead.abs() <= 5,
            "{ahead} s off the wall; first {first}, second {second}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn clocks_of_one_runtime_share_its_anchor() {
        let first = Clock::new(600.0);
        tokio::time::advance(Duration::from_secs(10)).await;
        let later = Clock::new(600.0);
        assert_eq!(first.anchor(), later.anchor());
        assert_eq!(first.now(), later.now());
    }
}
