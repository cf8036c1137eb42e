//! A [`StatusStore`] decorator counting the statuses posted:
//! `rota_statuses_posted_total{backend, outcome}`. A status already recorded (the stores
//! write only on change) is not a post and is not counted. A status the write budget
//! deferred (`report::budget`) is counted in `rota_statuses_deferred_total{backend}`, and
//! `rota_statuses_waiting{backend}` says how many wait for the budget after each write or
//! catch-up: a queue that only grows means the fleet's budget is too small for its changes.
//!
//! With a budget, the posts are counted under it ([`MeteredStore::posts`] around the forge)
//! and the deferrals over it ([`MeteredStore::deferrals`] around the budget): a status the
//! budget writes later, at a catch-up, is a post too.

use std::sync::Arc;

use async_trait::async_trait;

use super::status::CommitStatus;
use super::store::{Posted, ReportError, StatusStore};
use crate::metrics::{Metrics, Outcome};

pub struct MeteredStore {
    inner: Arc<dyn StatusStore>,
    metrics: Metrics,
    /// Counts what reaches the forge (posts and their errors).
    posts: bool,
    /// Counts what the budget defers and gauges what waits.
    deferrals: bool,
}

impl MeteredStore {
    /// Both counts, around a store with no budget between it and the forge.
    pub fn new(inner: Arc<dyn StatusStore>, metrics: Metrics) -> Self {
        MeteredStore {
            inner,
            metrics,
            posts: true,
            deferrals: true,
        }
    }

    /// The posts only: around the forge, under a budget whose catch-ups write through it.
    pub fn posts(inner: Arc<dyn StatusStore>, metrics: Metrics) -> Self {
        MeteredStore {
            deferrals: false,
            ..MeteredStore::new(inner, metrics)
        }
    }

    /// The deferrals and the queue only: around a budget over a [`MeteredStore::posts`].
    pub fn deferrals(inner: Arc<dyn StatusStore>, metrics: Metrics) -> Self {
        MeteredStore {
            posts: false,
            ..MeteredStore::new(inner, metrics)
        }
    }

    async fn gauge_waiting(&self) {
        if self.deferrals {
            let waiting = self.inner.waiting().await;
            self.metrics.set_statuses_waiting(self.backend(), waiting);
        }
    }
}

#[async_trait]
impl StatusStore for MeteredStore {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn list(&self, commit: &str) -> Result<Vec<CommitStatus>, ReportError> {
        self.inner.list(commit).await
    }

    async fn set(&self, commit: &str, status: &CommitStatus) -> Result<Posted, ReportError> {
        let r = self.inner.set(commit, status).await;
        match &r {
            Ok(Posted::Created) if self.posts => self
                .metrics
                .record_status_posted(self.backend(), Outcome::Ok),
            Ok(Posted::Deferred) if self.deferrals => {
                self.metrics.record_status_deferred(self.backend())
            }
            Err(_) if self.posts => self
                .metrics
                .record_status_posted(self.backend(), Outcome::Error),
            _ => {}
        }
        self.gauge_waiting().await;
        r
    }

    async fn flush(&self) -> Result<(), ReportError> {
        let r = self.inner.flush().await;
        self.gauge_waiting().await;
        r
    }

    async fn waiting(&self) -> usize {
        self.inner.waiting().await
    }

    async fn set_writers(&self, writers: usize) {
        self.inner.set_writers(writers).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::report::budget::BudgetedStore;
    use crate::report::status::State;

    /// A forge that takes every write.
    #[derive(Default)]
    struct Forge(Mutex<Vec<CommitStatus>>);

    #[async_trait]
    impl StatusStore for Forge {
        fn backend(&self) -> &'static str {
            "github"
        }
        async fn list(&self, _commit: &str) -> Result<Vec<CommitStatus>, ReportError> {
            Ok(self.0.lock().unwrap().clone())
        }
        async fn set(&self, _commit: &str, status: &CommitStatus) -> Result<Posted, ReportError> {
            self.0.lock().unwrap().push(status.clone());
            Ok(Posted::Created)
        }
    }

    /// Past the budget's burst, writes are deferred: counted as such, not as posts, and the
    /// queue's length is on the gauge.
    #[tokio::test(start_paused = true)]
    async fn statuses_past_the_write_budget_are_counted_deferred_and_the_queue_gauged() {
        let metrics = Metrics::for_cluster("c1");
        // 2 writes an hour: a burst of one, then one every 30 minutes.
        let forge = Arc::new(MeteredStore::posts(
            Arc::new(Forge::default()),
            metrics.clone(),
        ));
        let budgeted = Arc::new(BudgetedStore::new(forge, 2.0));
        let store = MeteredStore::deferrals(budgeted, metrics.clone());
        let commit = "0123456789abcdef0123456789abcdef01234567";
        for pool in ["a", "b", "c"] {
            let s = CommitStatus::new(format!("rota/c1/{pool}"), State::Pending, "batch 1/2");
            store.set(commit, &s).await.unwrap();
        }
        let text = metrics.render();
        assert!(
            text.contains(
                r#"rota_statuses_posted_total{backend="github",cluster="c1",outcome="ok"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"rota_statuses_deferred_total{backend="github",cluster="c1"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"rota_statuses_waiting{backend="github",cluster="c1"} 2"#),
            "{text}"
        );
        // The bucket refills one write every 30 minutes and holds one: each catch-up half an
        // hour apart writes one, and the gauge follows the queue down.
        for left in [1, 0] {
            tokio::time::advance(std::time::Duration::from_secs(1800)).await;
            store.flush().await.unwrap();
            let text = metrics.render();
            let want = format!(r#"rota_statuses_waiting{{backend="github",cluster="c1"}} {left}"#);
            assert!(text.contains(&want), "{want}\n{text}");
            // What a catch-up writes is a post like any other.
            let posted = 3 - left;
            let want = format!(
                r#"rota_statuses_posted_total{{backend="github",cluster="c1",outcome="ok"}} {posted}"#
            );
            assert!(text.contains(&want), "{want}\n{text}");
        }
    }
}
