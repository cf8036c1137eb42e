//! A fleet-wide write budget for a forge token: a [`StatusStore`] decorator that lets an
//! agent post at most its share of what the fleet's token may write an hour, defers what
//! goes past it and catches up as the budget refills. Deferred statuses are kept per commit
//! and context, the newest replacing an older one of the same context (a superseded
//! progress report is not worth a request), so the last state of every context is always
//! written in the end, never dropped. Catching up writes final states (`success`,
//! `failure`, `error`) before progress (`pending`), oldest first.
//!
//! The share: every agent of a fleet usually posts with the same token (one bot account or
//! app), and clusters never talk to each other, so each agent takes `budget / writers` an
//! hour, `writers` being how many agents write with it (the fleet's clusters, or its waves
//! when only one agent per wave writes, see `report::rollup`). Worked example: GitHub allows
//! 5,000 requests an hour; with `--status-budget 3000` (the default on GitHub) and 400
//! clusters an agent may post 7.5 statuses an hour, in a burst of up to 3 (half an hour's
//! share, [`Bucket`]), refilled continuously at one every 8 minutes; the fleet stays under
//! 4,500 in any hour.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::status::{CommitStatus, State};
use super::store::{Posted, ReportError, StatusStore};

/// A token bucket counted in writes, refilled continuously. Pure: the caller gives the time.
#[derive(Debug, Clone)]
pub struct Bucket {
    per_hour: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A bucket of `per_hour` writes an hour holding half an hour's share: what a fleet
    /// started at once may spend at first (a share below two an hour starts below one write
    /// and waits).
    pub fn new(per_hour: f64, now: Instant) -> Self {
        Bucket {
            per_hour,
            tokens: per_hour / 2.0,
            at: now,
        }
    }

    /// Half an hour's share, and at least one write (a write is whole): in any hour an agent
    /// writes at most 1.5 times its share, so a fleet at most 1.5 times its budget, as long as
    /// each share is two or more an hour. Below that, the at-least-one lets every agent write
    /// at once after a quiet spell: a fleet too big for per-pool contexts
    /// (`report::economy::Contexts::Waves` is the answer).
    fn capacity(&self) -> f64 {
        (self.per_hour / 2.0).max(1.0)
    }

    fn refill(&mut self, now: Instant) {
        let secs = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + secs * self.per_hour / 3600.0).min(self.capacity());
        self.at = now;
    }

    /// Takes one write if the budget has it.
    pub fn take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Gives back a write that cost no request (the forge already held the status).
    pub fn refund(&mut self) {
        self.tokens = (self.tokens + 1.0).min(self.capacity());
    }

    /// A new rate, keeping what is left (cut to the new capacity).
    pub fn set_rate(&mut self, per_hour: f64, now: Instant) {
        self.refill(now);
        self.per_hour = per_hour;
        self.tokens = self.tokens.min(self.capacity());
    }
}

/// The order deferred statuses are caught up in: final states first, then the oldest.
fn catch_up_order(a: &(u64, CommitStatus), b: &(u64, CommitStatus)) -> std::cmp::Ordering {
    let pending = |s: &CommitStatus| s.state == State::Pending;
    (pending(&a.1), a.0).cmp(&(pending(&b.1), b.0))
}

struct Ledger {
    bucket: Bucket,
    writers: usize,
    seq: u64,
    /// (commit, context) → (arrival, the newest status for it).
    deferred: BTreeMap<(String, String), (u64, CommitStatus)>,
}

/// A [`StatusStore`] within a share of a fleet-wide write budget.
pub struct BudgetedStore {
    inner: Arc<dyn StatusStore>,
    fleet_per_hour: f64,
    ledger: Mutex<Ledger>,
}

impl BudgetedStore {
    /// `fleet_per_hour`: the writes an hour the fleet's token may spend on statuses, shared
    /// by the fleet's writers (one until [`StatusStore::set_writers`] says).
    pub fn new(inner: Arc<dyn StatusStore>, fleet_per_hour: f64) -> Self {
        BudgetedStore {
            inner,
            fleet_per_hour,
            ledger: Mutex::new(Ledger {
                bucket: Bucket::new(fleet_per_hour, Instant::now()),
                writers: 1,
                seq: 0,
                deferred: BTreeMap::new(),
            }),
        }
    }

    /// How many statuses wait for budget.
    pub async fn deferred(&self) -> usize {
        self.ledger.lock().await.deferred.len()
    }

    /// Writes deferred statuses while the budget lasts. Returns what became of `key`'s
    /// status if it was among them. The ledger's lock is held across the writes: one
    /// catch-up at a time, in order.
    async fn drain(&self, key: Option<&(String, String)>) -> Result<Option<Posted>, ReportError> {
        let mut ledger = self.ledger.lock().await;
        let mut queue: Vec<((String, String), (u64, CommitStatus))> =
            std::mem::take(&mut ledger.deferred).into_iter().collect();
        queue.sort_by(|a, b| catch_up_order(&a.1, &b.1));
        let mut outcome = None;
        let mut rest = queue.into_iter();
        let mut failed = None;
        for (k, (seq, status)) in rest.by_ref() {
            if !ledger.bucket.take(Instant::now()) {
                ledger.deferred.insert(k, (seq, status));
                break;
            }
            match self.inner.set(&k.0, &status).await {
                Ok(posted) => {
                    if posted == Posted::Unchanged {
                        ledger.bucket.refund();
                    }
                    if Some(&k) == key {
                        outcome = Some(posted);
                    }
                }
                Err(e) => {
                    // Kept for the next catch-up: a failed request loses nothing.
                    ledger.deferred.insert(k, (seq, status));
                    failed = Some(e);
                    break;
                }
            }
        }
        for (k, v) in rest {
            ledger.deferred.insert(k, v);
        }
        if !ledger.deferred.is_empty() {
            tracing::debug!(
                backend = self.inner.backend(),
                deferred = ledger.deferred.len(),
                writers = ledger.writers,
                "statuses deferred past the write budget"
            );
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(outcome),
        }
    }
}

#[async_trait]
impl StatusStore for BudgetedStore {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    /// What the forge holds, with what waits for budget over it (what rota means to say).
    async fn list(&self, commit: &str) -> Result<Vec<CommitStatus>, ReportError> {
        let mut by_context: BTreeMap<String, CommitStatus> = self
            .inner
            .list(commit)
            .await?
            .into_iter()
            .map(|s| (s.context.clone(), s))
            .collect();
        for ((c, context), (_, s)) in &self.ledger.lock().await.deferred {
            if c == commit {
                by_context.insert(context.clone(), s.clone());
            }
        }
        Ok(by_context.into_values().collect())
    }

    async fn set(&self, commit: &str, status: &CommitStatus) -> Result<Posted, ReportError> {
        super::store::validate(commit, status)?;
        let key = (commit.to_string(), status.context.clone());
        {
            let mut ledger = self.ledger.lock().await;
            ledger.seq += 1;
            let seq = ledger.seq;
            ledger.deferred.insert(key.clone(), (seq, status.clone()));
        }
        Ok(self.drain(Some(&key)).await?.unwrap_or(Posted::Deferred))
    }

    async fn flush(&self) -> Result<(), ReportError> {
        self.drain(None).await.map(|_| ())
    }

    async fn waiting(&self) -> usize {
        self.deferred().await
    }

    async fn set_writers(&self, writers: usize) {
        let mut ledger = self.ledger.lock().await;
        let writers = writers.max(1);
        if ledger.writers != writers {
            ledger.writers = writers;
            let share = self.fleet_per_hour / writers as f64;
            ledger.bucket.set_rate(share, Instant::now());
            // Below two an hour the at-least-one write lets the fleet's bursts pass the
            // budget (see `Bucket::capacity`): say so once per change of the fleet's size.
            if share < 2.0 {
                tracing::warn!(
                    backend = self.inner.backend(),
                    writers,
                    share,
                    budget = self.fleet_per_hour,
                    "the status budget gives this agent under two statuses an hour: per-pool \
                     contexts do not fit this forge at this fleet size; use --status-contexts \
                     waves (or raise --status-budget)"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;
    use std::time::Duration;

    /// A store that records every write it is asked for.
    #[derive(Default)]
    struct Counting {
        posted: StdMutex<Vec<(String, CommitStatus)>>,
    }

    #[async_trait]
    impl StatusStore for Counting {
        fn backend(&self) -> &'static str {
            "counting"
        }
        async fn list(&self, commit: &str) -> Result<Vec<CommitStatus>, ReportError> {
            let posted = self.posted.lock().unwrap();
            let mut last = BTreeMap::new();
            for (c, s) in posted.iter().filter(|(c, _)| c == commit) {
                let _ = c;
                last.insert(s.context.clone(), s.clone());
            }
            Ok(last.into_values().collect())
        }
        async fn set(&self, commit: &str, s: &CommitStatus) -> Result<Posted, ReportError> {
            let mut posted = self.posted.lock().unwrap();
            if posted
                .iter()
                .rev()
                .find(|(c, p)| c == commit && p.context == s.context)
                .is_some_and(|(_, p)| p.same_as(s))
            {
                return Ok(Posted::Unchanged);
            }
            posted.push((commit.to_string(), s.clone()));
            Ok(Posted::Created)
        }
    }

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    fn st(context: &str, state: State, d: &str) -> CommitStatus {
        CommitStatus::new(context, state, d)
    }

    #[tokio::test(start_paused = true)]
    async fn writes_past_the_share_are_deferred_and_caught_up_latest_state_first_final() {
        let inner = Arc::new(Counting::default());
        // 8,000 an hour shared by 400 writers: 20 an hour each, a burst of 10.
        let store = BudgetedStore::new(inner.clone(), 8000.0);
        store.set_writers(400).await;
        for i in 0..10 {
            let s = st(&format!("rota/c/p{i}"), State::Pending, "batch 1/2");
            assert_eq!(store.set(SHA, &s).await.unwrap(), Posted::Created);
        }
        // The eleventh waits; so do its later progress and then its final state, which
        // replace it: one request will carry the last.
        let p = |d: &str, state| st("rota/c/p10", state, d);
        assert_eq!(
            store
                .set(SHA, &p("batch 1/2", State::Pending))
                .await
                .unwrap(),
            Posted::Deferred
        );
        assert_eq!(
            store
                .set(SHA, &p("batch 2/2", State::Pending))
                .await
                .unwrap(),
            Posted::Deferred
        );
        store
            .set(SHA, &st("rota/c/p0", State::Pending, "batch 2/2"))
            .await
            .unwrap();
        assert_eq!(
            store
                .set(SHA, &p("4/4 nodes", State::Success))
                .await
                .unwrap(),
            Posted::Deferred
        );
        assert_eq!(store.deferred().await, 2);
        assert_eq!(inner.posted.lock().unwrap().len(), 10);
        // What rota means to say is listed, deferred or not.
        let listed = store.list(SHA).await.unwrap();
        let p10 = listed.iter().find(|s| s.context == "rota/c/p10").unwrap();
        assert_eq!(p10.description, "4/4 nodes");
        // Three minutes refill one write: the final state goes first.
        tokio::time::advance(Duration::from_secs(181)).await;
        store.flush().await.unwrap();
        assert_eq!(store.deferred().await, 1);
        let last = inner.posted.lock().unwrap().last().cloned().unwrap().1;
        assert_eq!(
            (last.context.as_str(), last.state),
            ("rota/c/p10", State::Success)
        );
        // Then the progress; nothing is ever dropped, no state written twice.
        tokio::time::advance(Duration::from_secs(181)).await;
        store.flush().await.unwrap();
        assert_eq!(store.deferred().await, 0);
        let posted = inner.posted.lock().unwrap();
        assert_eq!(posted.len(), 12);
        assert!(
            !posted
                .iter()
                .any(|(_, s)| s.context == "rota/c/p10" && s.state == State::Pending),
            "the superseded progress of p10 cost nothing"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_status_the_forge_already_holds_costs_no_budget() {
        let inner = Arc::new(Counting::default());
        // Two an hour: one write at first.
        let store = BudgetedStore::new(inner.clone(), 2.0);
        let s = st("rota/c", State::Success, "all pools on the desired image");
        assert_eq!(store.set(SHA, &s).await.unwrap(), Posted::Created);
        // Spent; half an hour later, one more. The same status again is refunded, not
        // deferred, so the next change still has its write.
        tokio::time::advance(Duration::from_secs(1801)).await;
        assert_eq!(store.set(SHA, &s).await.unwrap(), Posted::Unchanged);
        let other = st("rota/c", State::Failure, "1/1 pools failed, 0 done");
        assert_eq!(store.set(SHA, &other).await.unwrap(), Posted::Created);
        let again = st("rota/c", State::Success, "all pools on the desired image");
        assert_eq!(store.set(SHA, &again).await.unwrap(), Posted::Deferred);
    }

    #[test]
    fn the_bucket_refills_continuously_and_holds_half_an_hour() {
        let t0 = Instant::now();
        // Half a write an hour: a quarter at first, a whole one after an hour and a half.
        let mut b = Bucket::new(0.5, t0);
        assert!(!b.take(t0), "a share below two starts below one write");
        assert!(!b.take(t0 + Duration::from_secs(5399)));
        assert!(b.take(t0 + Duration::from_secs(5401)));
        // After a long quiet spell it holds one write, never more.
        assert!(b.take(t0 + Duration::from_secs(100 * 3600)));
        assert!(!b.take(t0 + Duration::from_secs(100 * 3600)));
        // 3,600 an hour: 1,800 at once, then one a second.
        let mut b = Bucket::new(3600.0, t0);
        for _ in 0..1800 {
            assert!(b.take(t0));
        }
        assert!(!b.take(t0));
        assert!(b.take(t0 + Duration::from_secs(1)));
        assert!(!b.take(t0 + Duration::from_secs(1)));
    }
}
