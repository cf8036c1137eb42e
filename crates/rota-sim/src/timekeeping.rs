//! Keeping the simulated cluster's time honest under load: when graceful pod deletions end,
//! and how far behind its own clock the cluster's controllers run.
//!
//! *Deletions.* A pod marked for deletion (`Store::mark_deleting`: an eviction, a `DELETE`,
//! a ReplicaSet scaling down) is due to go when its grace period ends, counted from the mark,
//! on the simulated clock. The due pods wait here in deadline order, and the world reaps every
//! one that is due at each of its ticks, before and while it works through its queue of watch
//! events. A kubelet that learns of the mark from a watch event would otherwise start the grace
//! period only once the world got to that event: with tens of thousands of pod events queued
//! (a 20,000-node rotation evicting a batch of 2,000 nodes), pods stayed Terminating for many
//! grace periods, and a drain timed out that no real cluster would have timed out.
//!
//! *Lag.* Each tick, the world reports how late it handled what was due (a timer of a kubelet,
//! a deletion), in simulated seconds: how far the cluster's story runs behind its clock. It
//! shows on the API server's `/metrics` (`rota_sim_lag_seconds`, `rota_sim_lag_seconds_max`)
//! and, past [`WARN_AFTER`], as a warning in the log (at most one per [`WARN_EVERY`] of real
//! time): a speed the machine cannot keep up with says so instead of letting timeouts fire.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

/// Lag (simulated time) past which the world warns: a pod that starts, turns Ready or goes
/// this much later than its clock says is a story a real cluster would not tell.
pub const WARN_AFTER: Duration = Duration::from_secs(10);
/// At most one lag warning per this much real time.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// A pod whose grace period ends at a deadline.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DueDeletion {
    pub due: Instant,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// The gauge shows the worst lag of this much real time (a scrape every 15 s still sees a
/// spike), or the latest tick's if that is worse.
pub const GAUGE_WINDOW: Duration = Duration::from_secs(10);

/// How late the world runs, in simulated seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Lag {
    /// The worst lateness of the ticks of the last [`GAUGE_WINDOW`], or the latest tick's.
    pub seconds: f64,
    /// The largest since the cluster started.
    pub max_seconds: f64,
    /// Ticks that ran later than [`WARN_AFTER`].
    pub late_ticks: u64,
}

#[derive(Debug)]
struct Inner {
    speed: f64,
    due: BTreeSet<DueDeletion>,
    lag: Lag,
    /// The worst lateness since when, for the gauge's window.
    worst: Option<(Instant, f64)>,
    /// The latest tick's lateness.
    latest: f64,
    warned_at: Option<Instant>,
    /// The fleet clock's anchor (a wall time and the tokio instant it was read at), when the
    /// world runs beside controllers in one process (see [`Timekeeping::anchor_at`]).
    anchor: Option<(DateTime<Utc>, Instant)>,
}

/// One cluster's deletion deadlines and lag (held by its `Store`).
#[derive(Debug)]
pub struct Timekeeping {
    inner: Mutex<Inner>,
}

impl Default for Timekeeping {
    fn default() -> Self {
        Timekeeping {
            inner: Mutex::new(Inner {
                speed: 1.0,
                due: BTreeSet::new(),
                lag: Lag::default(),
                worst: None,
                latest: 0.0,
                warned_at: None,
                anchor: None,
            }),
        }
    }
}

impl Timekeeping {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cluster's clock speed (simulated seconds per real second); 1 unless set.
    pub fn speed(&self) -> f64 {
        self.lock().speed
    }

    /// Set by the world that runs the cluster (`--speed`).
    pub fn set_speed(&self, speed: f64) {
        if speed.is_finite() && speed > 0.0 {
            self.lock().speed = speed;
        }
    }

    /// Anchors the cluster's simulated time ([`crate::store::Store::sim_now`]) at the
    /// controllers' clock: `wall` was the time at tokio instant `at`. Without it the cluster
    /// counts from when its store was made, and a controller clock anchored earlier in the
    /// runtime (every controller clock of a runtime shares one anchor) runs ahead of it by
    /// the speed times the tokio time in between: at the demo's 600x, a second of paused time
    /// put the kubelets' Events ten minutes in the gates' past, outside an events gate's
    /// window, so the gate never saw a bad build fail.
    pub fn anchor_at(&self, wall: DateTime<Utc>, at: Instant) {
        self.lock().anchor = Some((wall, at));
    }

    /// The anchor set by [`Timekeeping::anchor_at`], if any.
    pub fn anchor(&self) -> Option<(DateTime<Utc>, Instant)> {
        self.lock().anchor
    }

    /// Pod `ns/name` (uid) was marked for deletion now: it is due after `grace_seconds` of
    /// simulated time.
    pub fn schedule(&self, ns: &str, name: &str, uid: &str, grace_seconds: i64) {
        let mut g = self.lock();
        let wait = Duration::from_secs(grace_seconds.max(0) as u64).div_f64(g.speed);
        g.due.insert(DueDeletion {
            due: Instant::now() + wait,
            namespace: ns.to_string(),
            name: name.to_string(),
            uid: uid.to_string(),
        });
    }

    /// Takes every deletion due at `now`, earliest first.
    pub fn take_due(&self, now: Instant) -> Vec<DueDeletion> {
        let mut g = self.lock();
        let mut out = Vec::new();
        while g.due.first().is_some_and(|d| d.due <= now) {
            out.extend(g.due.pop_first());
        }
        out
    }

    /// When the next deletion is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.lock().due.first().map(|d| d.due)
    }

    /// How many deletions are waiting for their grace period to end.
    pub fn pending(&self) -> usize {
        self.lock().due.len()
    }

    /// A tick handled, at `now`, something that was due at `due` (the earliest such thing of
    /// the tick): records the lag, and returns a warning to log when it is past
    /// [`WARN_AFTER`] and none was given for [`WARN_EVERY`].
    pub fn observe(&self, due: Instant, now: Instant) -> Option<String> {
        let mut g = self.lock();
        let late = now.saturating_duration_since(due).as_secs_f64() * g.speed;
        let window_over =
            |(at, _): (Instant, f64)| now.saturating_duration_since(at) >= GAUGE_WINDOW;
        if g.worst.is_none_or(|w| window_over(w) || w.1 <= late) {
            g.worst = Some((now, late));
        }
        g.latest = late;
        g.lag.max_seconds = g.lag.max_seconds.max(late);
        if late < WARN_AFTER.as_secs_f64() {
            return None;
        }
        g.lag.late_ticks += 1;
        if g.warned_at
            .is_some_and(|at| now.saturating_duration_since(at) < WARN_EVERY)
        {
            return None;
        }
        g.warned_at = Some(now);
        Some(format!(
            "the simulated cluster runs {late:.1}s of simulated time behind its clock at {}x \
             (most so far {:.1}s): timeouts measured against it may fire that a real cluster \
             would not reach; lower --speed",
            g.speed, g.lag.max_seconds
        ))
    }

    /// The lag as of `now`: the window's worst tick, or the latest tick once the window is
    /// over (an idle cluster has no ticks to report on time).
    pub fn lag_at(&self, now: Instant) -> Lag {
        let g = self.lock();
        let recent = g
            .worst
            .filter(|(at, _)| now.saturating_duration_since(*at) < GAUGE_WINDOW)
            .map_or(0.0, |(_, w)| w);
        Lag {
            seconds: recent.max(g.latest),
            ..g.lag
        }
    }

    pub fn lag(&self) -> Lag {
        self.lag_at(Instant::now())
    }

    /// The lag and the waiting deletions in Prometheus's text format (the API server's
    /// `/metrics`, as a real API server has one).
    pub fn metrics_text(&self) -> String {
        let (lag, pending) = (self.lag(), self.pending());
        format!(
            "# HELP rota_sim_lag_seconds How late the simulated cluster's ticks of the last {}s handled what was due, at worst, in simulated seconds.\n\
             # TYPE rota_sim_lag_seconds gauge\n\
             rota_sim_lag_seconds {:.3}\n\
             # HELP rota_sim_lag_seconds_max The largest lag since the cluster started, in simulated seconds.\n\
             # TYPE rota_sim_lag_seconds_max gauge\n\
             rota_sim_lag_seconds_max {:.3}\n\
             # HELP rota_sim_late_ticks_total Ticks that ran more than {}s of simulated time late.\n\
             # TYPE rota_sim_late_ticks_total counter\n\
             rota_sim_late_ticks_total {}\n\
             # HELP rota_sim_terminating_pods Pods marked for deletion whose grace period is not over.\n\
             # TYPE rota_sim_terminating_pods gauge\n\
             rota_sim_terminating_pods {pending}\n",
            GAUGE_WINDOW.as_secs(),
            lag.seconds,
            lag.max_seconds,
            WARN_AFTER.as_secs(),
            lag.late_ticks,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn deletions_come_due_after_their_grace_period_in_simulated_time() {
        let t = Timekeeping::default();
        t.set_speed(10.0);
        t.schedule("shop", "web-1", "u1", 30);
        t.schedule("shop", "web-0", "u0", 10);
        let start = Instant::now();
        // 10 simulated seconds at 10x: one real second.
        assert!(t.take_due(start + Duration::from_millis(999)).is_empty());
        let due = t.take_due(start + Duration::from_secs(1));
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].name, "web-0");
        assert_eq!(t.next_due(), Some(start + Duration::from_secs(3)));
        assert_eq!(t.take_due(start + Duration::from_secs(60)).len(), 1);
        assert_eq!(t.pending(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn lag_is_in_simulated_seconds_and_warns_once_per_window() {
        let t = Timekeeping::default();
        t.set_speed(20.0);
        let due = Instant::now();
        // Half a real second late at 20x: 10 simulated seconds, a warning.
        let w = t.observe(due, due + Duration::from_millis(500));
        assert!(w.is_some_and(|w| w.contains("10.0s") && w.contains("20x")));
        assert_eq!(t.lag_at(due).seconds, 10.0);
        // Later still, within the window: recorded, not warned again.
        assert!(t.observe(due, due + Duration::from_secs(1)).is_none());
        assert_eq!(t.lag_at(due).max_seconds, 20.0);
        assert_eq!(t.lag_at(due).late_ticks, 2);
        // Nearly on time again: the gauge keeps the window's worst, then falls; the maximum
        // stays; no warning.
        let later = due + Duration::from_secs(1) + GAUGE_WINDOW / 2;
        assert!(
            t.observe(later, later + Duration::from_millis(100))
                .is_none()
        );
        assert_eq!(t.lag_at(later).seconds, 20.0);
        let after = due + Duration::from_secs(1) + GAUGE_WINDOW;
        assert_eq!(t.lag_at(after).seconds, 2.0);
        assert_eq!(t.lag_at(after).max_seconds, 20.0);
    }
}
