//! What the simulated cluster's own controllers (kubelets, workloads) get while handling an
//! event: the store, and timers for what they asked to happen later (a node registering, a
//! pod starting), on the simulated clock. `world` runs them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use tokio::time::Instant;

use super::store::Store;

/// Something a controller asked to happen later.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    RegisterNode(String),
    NodeReady(String),
    PodStart {
        ns: String,
        name: String,
        uid: String,
    },
    PodReady {
        ns: String,
        name: String,
        uid: String,
    },
    FlushStatus,
    Poll,
}

/// What controllers get while handling an event: the store and a way to act later.
pub struct Ctx {
    pub store: Store,
    speed: f64,
    seq: u64,
    timers: BinaryHeap<Reverse<(Instant, u64, Timer)>>,
}

impl Ctx {
    pub fn new(store: Store, speed: f64) -> Self {
        Ctx {
            store,
            speed: if speed > 0.0 { speed } else { 1.0 },
            seq: 0,
            timers: BinaryHeap::new(),
        }
    }

    /// How much faster than real time the simulation runs.
    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// Run `timer` after `delay` of simulated time (divided by the speed).
    pub fn after(&mut self, delay: Duration, timer: Timer) {
        self.seq += 1;
        let at = Instant::now() + delay.div_f64(self.speed);
        self.timers.push(Reverse((at, self.seq, timer)));
    }

    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((at, _, _))| *at)
    }

    /// The next timer due at `now`, with when it was due (how late it runs is the lag).
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(Instant, Timer)> {
        if self.next_due()? <= now {
            self.timers.pop().map(|Reverse((at, _, t))| (at, t))
        } else {
            None
        }
    }
}
