//! Commit statuses on a forge, what the three forges share: list first, compare, post only on
//! change, and a per-commit cache of what the forge holds so that an unchanged report costs
//! no request. Each forge's file supplies the wire format through [`ForgeApi`].

use std::collections::{BTreeMap, HashMap, VecDeque};

use async_trait::async_trait;
use tokio::sync::Mutex;

use super::http::ForgeClient;
use crate::report::{CommitStatus, Posted, ReportError, StatusStore, validate};

/// Commits whose statuses are cached (an agent reports on the newest few).
const CACHED_COMMITS: usize = 64;

/// One forge's commit-status API.
#[async_trait]
pub trait ForgeApi: Send + Sync {
    fn backend(&self) -> &'static str;
    /// Every status the forge holds for `sha` (latest per context), in rota's vocabulary.
    async fn fetch(
        &self,
        client: &ForgeClient,
        sha: &str,
    ) -> Result<Vec<CommitStatus>, ReportError>;
    /// Creates one status.
    async fn post(
        &self,
        client: &ForgeClient,
        sha: &str,
        status: &CommitStatus,
    ) -> Result<Posted, ReportError>;
    /// The status as the forge will store it (a forge without an `error` state stores
    /// `failure`): comparisons are made in the forge's vocabulary.
    /// The most statuses the forge keeps per commit and context (GitHub: 1000), if any.
    fn max_per_context(&self) -> Option<u32> {
        None
    }
    fn as_stored(&self, status: &CommitStatus) -> CommitStatus {
        status.clone()
    }
}

/// A [`StatusStore`] over a forge API.
pub struct ForgeStore<A> {
    api: A,
    client: ForgeClient,
    cache: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    order: VecDeque<String>,
    by_commit: HashMap<String, BTreeMap<String, CommitStatus>>,
    /// Posts this process made per commit and context, against the forge's limit.
    posts: HashMap<(String, String), u32>,
}

impl Cache {
    fn put(&mut self, sha: &str, statuses: BTreeMap<String, CommitStatus>) {
        if !self.by_commit.contains_key(sha) {
            self.order.push_back(sha.to_string());
            if self.order.len() > CACHED_COMMITS
                && let Some(old) = self.order.pop_front()
            {
                self.by_commit.remove(&old);
                self.posts.retain(|(sha, _), _| *sha != old);
            }
        }
        self.by_commit.insert(sha.to_string(), statuses);
    }
}

impl<A: ForgeApi> ForgeStore<A> {
    pub fn from_parts(api: A, client: ForgeClient) -> Self {
        ForgeStore {
            api,
            client,
            cache: Mutex::new(Cache::default()),
        }
    }
}

fn rota_only(statuses: Vec<CommitStatus>) -> BTreeMap<String, CommitStatus> {
    statuses
        .into_iter()
        .filter(|s| s.context.starts_with("rota/"))
        .map(|s| (s.context.clone(), s))
        .collect()
}

#[async_trait]
impl<A: ForgeApi> StatusStore for ForgeStore<A> {
    fn backend(&self) -> &'static str {
        self.api.backend()
    }

    async fn list(&self, commit: &str) -> Result<Vec<CommitStatus>, ReportError> {
        let fresh = rota_only(self.api.fetch(&self.client, commit).await?);
        let out = fresh.values().cloned().collect();
        self.cache.lock().await.put(commit, fresh);
        Ok(out)
    }

    async fn set(&self, commit: &str, status: &CommitStatus) -> Result<Posted, ReportError> {
        validate(commit, status)?;
        let wanted = self.api.as_stored(status);
        // One writer per context (this agent), so the cache stays true once filled; it is
        // filled from the forge on the first report of each commit (after a restart too).
        // The cache lock is never held across a request: a forge that answers slowly (or
        // not at all) must not queue every other report behind it.
        let cached = self.cache.lock().await.by_commit.contains_key(commit);
        if !cached {
            let fresh = rota_only(self.api.fetch(&self.client, commit).await?);
            let mut cache = self.cache.lock().await;
            if !cache.by_commit.contains_key(commit) {
                cache.put(commit, fresh);
            }
        }
        let key = (commit.to_string(), wanted.context.clone());
        {
            let cache = self.cache.lock().await;
            if cache
                .by_commit
                .get(commit)
                .and_then(|known| known.get(&wanted.context))
                .is_some_and(|r| wanted.same_as(r))
            {
                return Ok(Posted::Unchanged);
            }
            // Within the forge's per-context limit, progress updates stop one short of it so
            // the last slot is left for the final state (success, failure or error).
            let count = cache.posts.get(&key).copied().unwrap_or(0);
            if let Some(limit) = self.api.max_per_context() {
                let room = if wanted.state == crate::report::State::Pending {
                    limit.saturating_sub(1)
                } else {
                    limit
                };
                if count >= room {
                    tracing::warn!(backend = self.api.backend(), commit, context = %wanted.context,
                        limit, "forge status limit reached for this commit and context; not posting");
                    return Ok(Posted::Unchanged);
                }
            }
        }
        let posted = self.api.post(&self.client, commit, status).await?;
        let mut cache = self.cache.lock().await;
        *cache.posts.entry(key).or_insert(0) += 1;
        if let Some(m) = cache.by_commit.get_mut(commit) {
            m.insert(wanted.context.clone(), wanted);
        }
        Ok(posted)
    }
}
