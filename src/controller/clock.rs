//! The controller's clock: wall time for the planner and tokio time for waiting, kept in
//! step.
//!
//! The planner takes `now` as a wall-clock time (soaks, timeouts, windows); the runtime
//! waits on tokio timers. Deriving the wall clock from tokio's clock (start wall time plus
//! elapsed tokio time) keeps both consistent under paused test time. `speed` makes the
//! controller's time run that many times faster, to match a `rota sim serve --speed N`
//! simulation whose delays are divided by N: policy durations (soaks, timeouts) then mean
//! simulated time on both sides.

use std::sync::OnceLock;
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
    /// the process's first clock was made. Every clock of a process shares that anchor: a
    /// controller started later (a restarted replica in the simulation, on paused tokio
    /// time) reads the same time as the others, instead of a wall time hours behind what
    /// they wrote in the checkpoint.
    pub fn new(speed: f64) -> Clock {
        static ANCHOR: OnceLock<(DateTime<Utc>, Instant)> = OnceLock::new();
        let (start_wall, start) = *ANCHOR.get_or_init(|| (Utc::now(), Instant::now()));
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
}
