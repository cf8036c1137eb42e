//! The poll loop: fetch the fleet repo now, then every `interval`, and at once whenever a
//! trigger fires (a push webhook, a change in a watched working copy). Triggers that arrive
//! during a fetch coalesce into one more fetch right after it. The newest state is published
//! on a `watch` channel: consumers only ever care about the latest commit.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use git2::Oid;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::{Fetched, GitSource, SourceError};

/// Something that can fetch the fleet repo (the git source; a double in loop tests).
#[async_trait]
pub trait Fetch: Send + Sync {
    async fn fetch(&self) -> Result<Fetched, SourceError>;
}

#[async_trait]
impl Fetch for Arc<GitSource> {
    async fn fetch(&self) -> Result<Fetched, SourceError> {
        let source = Arc::clone(self);
        // git2 blocks on the network: keep it off the async workers.
        match tokio::task::spawn_blocking(move || GitSource::fetch(&source)).await {
            Ok(result) => result,
            Err(e) => Err(SourceError::Fetch {
                url: super::redact_url(&self.config.url),
                branch: self.config.branch.clone(),
                message: format!("fetch task failed: {e}"),
            }),
        }
    }
}

/// Wakes the poll loop for an immediate fetch. Cloneable; any number of fires while the loop
/// is busy or being woken yield a single extra fetch.
#[derive(Debug, Clone, Default)]
pub struct Trigger(Arc<Notify>);

impl Trigger {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn fire(&self) {
        self.0.notify_one();
    }

    pub async fn fired(&self) {
        self.0.notified().await
    }
}

/// What the loop publishes after every fetch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceState {
    /// The newest commit fetched so far (kept across failed fetches).
    pub commit: Option<Oid>,
    /// The error of the last fetch, if it failed (cleared by the next success).
    pub last_error: Option<String>,
    /// Fetches attempted, successful or not.
    pub fetches: u64,
}

/// Runs until `cancel` fires. The first fetch happens at once.
pub async fn poll_loop<F: Fetch>(
    fetcher: F,
    interval: Duration,
    trigger: Trigger,
    state: watch::Sender<SourceState>,
    cancel: CancellationToken,
) {
    loop {
        let result = tokio::select! {
            r = fetcher.fetch() => r,
            _ = cancel.cancelled() => return,
        };
        let next = tokio::time::Instant::now() + interval;
        state.send_modify(|s| {
            s.fetches += 1;
            match &result {
                Ok(f) => {
                    s.commit = Some(f.commit);
                    s.last_error = None;
                }
                Err(e) => {
                    tracing::warn!(reason = e.reason(), error = %e, "fetching the fleet repo failed");
                    s.last_error = Some(e.to_string());
                }
            }
        });
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = trigger.fired() => tracing::debug!("fetch triggered"),
            _ = cancel.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Returns a new commit id on each fetch, or fails when told to.
    #[derive(Default)]
    struct Counting {
        calls: Mutex<u32>,
        fail: Mutex<bool>,
    }

    #[async_trait]
    impl Fetch for Arc<Counting> {
        async fn fetch(&self) -> Result<Fetched, SourceError> {
            let mut n = self.calls.lock().unwrap();
            *n += 1;
            if *self.fail.lock().unwrap() {
                return Err(SourceError::NoBranch {
                    url: "file:///fleet".into(),
                    branch: "main".into(),
                });
            }
            let commit = Oid::from_str(&format!("{:040x}", *n)).unwrap();
            Ok(Fetched {
                commit,
                previous: None,
            })
        }
    }

    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn fetches_at_start_every_interval_and_on_trigger() {
        let fetcher = Arc::new(Counting::default());
        let trigger = Trigger::new();
        let (tx, rx) = watch::channel(SourceState::default());
        let cancel = CancellationToken::new();
        let task = tokio::spawn(poll_loop(
            Arc::clone(&fetcher),
            Duration::from_secs(60),
            trigger.clone(),
            tx,
            cancel.clone(),
        ));
        settle().await;
        assert_eq!(rx.borrow().fetches, 1, "first fetch at once");

        tokio::time::sleep(Duration::from_secs(59)).await;
        settle().await;
        assert_eq!(rx.borrow().fetches, 1, "nothing before the interval");

        trigger.fire();
        settle().await;
        assert_eq!(rx.borrow().fetches, 2, "a trigger fetches at once");

        // A burst of deliveries: the first wakes the loop, the rest collapse into at most
        // one more fetch.
        for _ in 0..5 {
            trigger.fire();
        }
        settle().await;
        assert_eq!(
            rx.borrow().fetches,
            4,
            "a burst costs two fetches, not five"
        );

        // The interval restarts after the triggered fetch: 60s from t=59s.
        tokio::time::sleep(Duration::from_secs(30)).await;
        settle().await;
        assert_eq!(rx.borrow().fetches, 4);
        tokio::time::sleep(Duration::from_secs(31)).await;
        settle().await;
        assert_eq!(rx.borrow().fetches, 5);
        assert_eq!(
            rx.borrow().commit,
            Some(Oid::from_str(&format!("{:040x}", 5)).unwrap())
        );

        cancel.cancel();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_fetch_keeps_the_last_good_commit() {
        let fetcher = Arc::new(Counting::default());
        let trigger = Trigger::new();
        let (tx, rx) = watch::channel(SourceState::default());
        let cancel = CancellationToken::new();
        let task = tokio::spawn(poll_loop(
            Arc::clone(&fetcher),
            Duration::from_secs(10),
            trigger.clone(),
            tx,
            cancel.clone(),
        ));
        settle().await;
        let good = rx.borrow().commit;
        assert!(good.is_some());
        *fetcher.fail.lock().unwrap() = true;
        trigger.fire();
        settle().await;
        let s = rx.borrow().clone();
        assert_eq!(s.commit, good);
        assert_eq!(
            s.last_error.as_deref(),
            Some("branch main not found at file:///fleet")
        );
        *fetcher.fail.lock().unwrap() = false;
        tokio::time::sleep(Duration::from_secs(10)).await;
        settle().await;
        assert_eq!(rx.borrow().last_error, None);
        cancel.cancel();
        task.await.unwrap();
    }
}
