//! A [`StatusStore`] decorator counting the statuses posted:
//! `rota_statuses_posted_total{backend, outcome}`. A status already recorded (the stores
//! write only on change) is not a post and is not counted.

use std::sync::Arc;

use async_trait::async_trait;

use super::{CommitStatus, Posted, ReportError, StatusStore};
use crate::metrics::{Metrics, Outcome};

pub struct MeteredStore {
    inner: Arc<dyn StatusStore>,
    metrics: Metrics,
}

impl MeteredStore {
    pub fn new(inner: Arc<dyn StatusStore>, metrics: Metrics) -> Self {
        MeteredStore { inner, metrics }
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
            Ok(Posted::Created) => self
                .metrics
                .record_status_posted(self.backend(), Outcome::Ok),
            Ok(Posted::Unchanged | Posted::Deferred) => {}
            Err(_) => self
                .metrics
                .record_status_posted(self.backend(), Outcome::Error),
        }
        r
    }

    async fn flush(&self) -> Result<(), ReportError> {
        self.inner.flush().await
    }

    async fn set_writers(&self, writers: usize) {
        self.inner.set_writers(writers).await
    }
}
