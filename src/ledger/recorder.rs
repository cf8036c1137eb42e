//! The agent's ledger task: every `interval`, while this replica holds the lease, observe the
//! cluster's pools and append to the ledger what changed since the last append.
//!
//! What it reads is what the agent and the controller already observe: the nodes from the
//! controller's watch-fed index (nothing when it has not synced: an unsynced index is never
//! an empty cluster, which would close every life), the pools from the NodePoolRotations
//! (selector, channel@version of their image, the rotation under way, the fleet commit), and
//! the image of each instance from the pool's cloud group, described only when a node shows
//! up whose instance it has not seen yet (a managed pool's from what its owner reports: its
//! nodes' labels, Karpenter's NodeClaims; see [`super::managed`]).
//!
//! Crash-safe by construction: what is open is read back from the ledger's tip before every
//! append, never kept in memory, and a new process first takes the pushed ledger from the
//! remote. After a restart, a node that is no longer there closes (seen gone at the first
//! pass), one that joined meanwhile opens marked `joinedBefore: restart`; nothing is
//! written twice because a life already open is never opened again.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, ListParams};
use tokio_util::sync::CancellationToken;

use super::book::{self, Book};
use super::error::LedgerError;
use super::managed;
use super::refs::ledger_ref;
use crate::cloud::NodeGroups;
use crate::controller::clock::Clock;
use crate::controller::departures::{Departures, rotation_name};
use crate::controller::leader::Leadership;
use crate::kube::crd::NodePoolRotation;
use crate::kube::index::{ClusterIndex, Kind};
use crate::report::notes::{PushTarget, fetch_ref, push_refspec};
use rota_core::fleet::resolved::Mode;
use rota_core::ledger::{Departure, PoolContext, Seen, Start, diff_with};

/// What the recorder needs.
pub struct Recorder {
    pub cluster: String,
    pub client: kube::Client,
    pub index: Arc<ClusterIndex>,
    pub groups: Arc<dyn NodeGroups>,
    /// The agent's bare mirror of the fleet repo: the ledger is written there and pushed.
    pub repo: PathBuf,
    pub push: Option<PushTarget>,
    /// The agent's SSH key: each append is signed with it (see [`super::signed_payload`]).
    pub signing_key: Option<PathBuf>,
    pub leadership: Option<Leadership>,
    pub clock: Clock,
    pub interval: Duration,
    /// rota's own drains and terminations, as the controller carries them out (`None`: the
    /// leaves are judged from what the looks see alone).
    pub departures: Option<Departures>,
}

/// How long a departure is kept after it happened: longer than any node object lingers
/// after its instance was terminated, so a lingering node is not opened again.
const DEPARTURES_KEPT: chrono::TimeDelta = chrono::TimeDelta::hours(2);

/// How long the last pass of a clean shutdown may take (a push to a slow remote).
const LAST_PASS: Duration = Duration::from_secs(30);

/// What a recorder remembers between passes: only caches, never the ledger's state.
#[derive(Default)]
struct Memory {
    /// providerID -> image, from the groups' describes, and whether a pass has seen the
    /// instance's node. An instance whose node was seen and is gone is forgotten
    /// ([`prune_gone`]): a rotation of a 20,000-node cluster replaces every instance, and the
    /// cache kept both generations for the life of the process.
    images: HashMap<String, Known>,
    /// Per pool, every `image -> channel@version` its NodePoolRotation has named.
    versions: BTreeMap<String, BTreeMap<String, String>>,
    /// Whether a pass has appended (or found nothing to append) since the start.
    continuing: bool,
    /// The remote ledger was taken (a new mirror continues the pushed chain).
    synced: bool,
    /// Per pool, the nodes present when this process first observed it while the ledger
    /// had no life of it: the nodes of its adoption.
    met: BTreeMap<String, Arc<BTreeSet<(String, String)>>>,
    /// The controller's departures of the last [`DEPARTURES_KEPT`].
    departures: Vec<Departure>,
}

/// An instance's image, as the recorder remembers it.
#[derive(Debug)]
struct Known {
    image: String,
    /// A pass has seen the instance's node.
    noded: bool,
}

/// Remembers `image` for instance `pid`, keeping whether its node was seen (a describe that
/// still lists a terminated instance must not make it new again, or it would never go).
fn remember(images: &mut HashMap<String, Known>, pid: &str, image: String) {
    match images.get_mut(pid) {
        Some(known) => known.image = image,
        None => {
            images.insert(
                pid.to_string(),
                Known {
                    image,
                    noded: false,
                },
            );
        }
    }
}

/// Forgets the images of instances whose node a pass saw and this one does not (terminated:
/// never seen again), and marks the rest as seen. Instances described before their node joined
/// (a surge booting) are kept, so their node's first pass costs no second describe.
fn prune_gone<'a>(images: &mut HashMap<String, Known>, now: impl Iterator<Item = &'a str>) {
    let now: HashSet<&str> = now.collect();
    images.retain(|pid, known| {
        let here = now.contains(pid.as_str());
        known.noded |= here;
        here || !known.noded
    });
}

impl Recorder {
    /// Runs passes until `cancel`, then one last pass (a clean shutdown writes what changed
    /// since the last look: lives that ended are not left open in the ledger).
    pub async fn run(self, cancel: CancellationToken) {
        let mut memory = Memory::default();
        loop {
            if let Err(e) = self.pass(&mut memory).await {
                tracing::warn!(cluster = %self.cluster, error = %e, "ledger pass failed; retrying");
            }
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(self.interval) => {}
            }
        }
        match tokio::time::timeout(LAST_PASS, self.pass(&mut memory)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(cluster = %self.cluster, error = %e, "ledger: the last pass failed")
            }
            Err(_) => tracing::warn!(cluster = %self.cluster, "ledger: the last pass timed out"),
        }
    }

    fn leading(&self) -> bool {
        self.leadership.as_ref().is_none_or(|l| l.check().is_ok())
    }

    /// One observation; appends and pushes when something changed.
    async fn pass(&self, memory: &mut Memory) -> Result<(), String> {
        if !self.leading() || !self.index.is_synced() {
            return Ok(());
        }
        if !memory.synced {
            self.take_remote().await?;
            memory.synced = true;
        }
        let api: Api<NodePoolRotation> = Api::all(self.client.clone());
        let nprs: Vec<NodePoolRotation> = api
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("listing NodePoolRotations: {e}"))?
            .items
            .into_iter()
            .filter(|n| n.spec.cluster == self.cluster && n.spec.mode != Mode::Ignore)
            .collect();
        let seen = self.observe(&nprs, memory).await?;
        let Some(seen) = seen else { return Ok(()) };
        let now = self.clock.now();
        if let Some(d) = &self.departures {
            memory.departures.extend(d.take());
        }
        memory
            .departures
            .retain(|d| now.signed_duration_since(d.at) < DEPARTURES_KEPT);
        let departures = memory.departures.clone();
        let start = if memory.continuing {
            Start::Continuing
        } else {
            Start::AfterRestart
        };
        let repo_path = self.repo.clone();
        let cluster = self.cluster.clone();
        let signing_key = self.signing_key.clone();
        let mut contexts = self.contexts(&nprs, memory);
        // The first observation of a pool: what is there now was there before the ledger.
        // Read (a parse of every open life) only when a pool is met for the first time.
        let open_pools = if contexts.keys().any(|p| !memory.met.contains_key(p)) {
            open_pools(&self.repo, &self.cluster).await
        } else {
            BTreeSet::new()
        };
        for (pool, ctx) in contexts.iter_mut() {
            let met = memory.met.entry(pool.clone()).or_insert_with(|| {
                Arc::new(if open_pools.contains(pool) {
                    BTreeSet::new()
                } else {
                    seen.iter()
                        .filter(|s| &s.pool == pool)
                        .map(|s| (s.node.clone(), s.instance.clone()))
                        .collect()
                })
            });
            ctx.preexisting = met.clone();
        }
        let push = self.push.clone();
        let leadership = self.leadership.clone();
        let result = tokio::task::spawn_blocking(move || -> Result<bool, String> {
            let repo = git2::Repository::open(&repo_path).map_err(|e| e.to_string())?;
            let book = book::read_book(&repo, &cluster).map_err(|e| e.to_string())?;
            let delta = diff_with(
                &cluster,
                &book.open,
                &seen,
                &contexts,
                &departures,
                start,
                now,
            );
            if delta.is_empty() {
                return Ok(false);
            }
            // Right before the write: a replica whose lease ran out writes nothing.
            if leadership.as_ref().is_some_and(|l| l.check().is_err()) {
                return Ok(false);
            }
            let sign = signing_key.as_ref().map(|key| {
                move |payload: &str| {
                    crate::report::evidence::sign(key, payload)
                        .map(|s| s.signature)
                        .map_err(|e| e.to_string())
                }
            });
            let sign_ref = sign
                .as_ref()
                .map(|f| f as &dyn Fn(&str) -> Result<String, String>);
            book::append(&repo, &cluster, book, &delta, now, sign_ref)
                .map_err(|e| e.to_string())?;
            tracing::info!(cluster = %cluster, joined = delta.opened.len(),
                left = delta.closed.len(), "ledger appended");
            // The push packs the new `open.jsonl` (libgit2 holds it inflated and deflated):
            // what the pass observed is let go first, so the two do not add up (at 5,000
            // nodes the push and the pass's lives were each several megabytes).
            drop((delta, seen, contexts, departures));
            if let Some(push) = &push {
                let name = ledger_ref(&cluster);
                push_refspec(&repo, push, &format!("{name}:{name}"))?;
            }
            Ok(true)
        })
        .await
        .map_err(|e| e.to_string())?;
        match result {
            Ok(_) => {
                memory.continuing = true;
                Ok(())
            }
            Err(e) => {
                // Rejected or failed: take the remote's chain again before the next append
                // (a previous incarnation may have pushed appends this mirror never saw).
                memory.synced = false;
                Err(e)
            }
        }
    }

    /// The remote's ledger replaces the mirror's (the agent is its single writer: what was
    /// pushed is the chain to continue). No remote ledger yet: the local one stands.
    async fn take_remote(&self) -> Result<(), String> {
        let Some(push) = self.push.clone() else {
            return Ok(());
        };
        let repo_path = self.repo.clone();
        let name = ledger_ref(&self.cluster);
        tokio::task::spawn_blocking(move || {
            let repo = git2::Repository::open(&repo_path).map_err(|e| e.to_string())?;
            match fetch_ref(&repo, &push, &name, &name) {
                Ok(()) => Ok(()),
                // "couldn't find remote ref": the first append of this cluster is still ahead.
                Err(e) if e.message().contains("find remote ref") => Ok(()),
                Err(e) => Err(format!("fetching {name}: {}", e.message())),
            }
        })
        .await
        .map_err(|e| e.to_string())?
    }

    /// The nodes of the pools, each with its instance's image where known. `None`: the
    /// index does not observe nodes now (nothing is decided from it). A self-managed pool's
    /// images come from its group's describe; a managed pool's from what its owner reports
    /// (its nodes' labels, Karpenter's NodeClaims: [`super::managed`]).
    async fn observe(
        &self,
        nprs: &[NodePoolRotation],
        memory: &mut Memory,
    ) -> Result<Option<Vec<Seen>>, String> {
        let mut seen = Vec::new();
        let mut describe = Vec::new();
        let mut karpenter = Vec::new();
        {
            let state = self.index.read();
            if state.ready(Kind::Nodes).is_err() {
                return Ok(None);
            }
            for npr in nprs {
                let managed = npr.spec.group.managed().is_some();
                // A blue-green move's selectors pick disjoint pools; a node is taken once.
                let mut taken = HashSet::new();
                for selector in managed::selectors(npr) {
                    for (node, _) in state.nodes_matching(&selector) {
                        let instance = rota_core::cloud::provider_id::parse(&node.provider_id)
                            .map(|r| r.instance)
                            .unwrap_or_default();
                        if instance.is_empty() || !taken.insert(node.name.clone()) {
                            continue;
                        }
                        let known = memory.images.contains_key(&node.provider_id);
                        match crate::kube::observe::node_image(node) {
                            Some(image) if managed => {
                                remember(&mut memory.images, &node.provider_id, image);
                            }
                            _ if known => {}
                            _ if managed
                                && managed::is_karpenter(npr)
                                && !karpenter.contains(&npr.spec.group) =>
                            {
                                karpenter.push(npr.spec.group.clone());
                            }
                            _ if !managed && !describe.contains(&npr.spec.group) => {
                                describe.push(npr.spec.group.clone());
                            }
                            _ => {}
                        }
                        seen.push((
                            node.provider_id.clone(),
                            Seen {
                                pool: npr.spec.pool.clone(),
                                node: node.name.clone(),
                                instance,
                                image: None,
                                ready: node.kubelet_ready,
                                cordoned: if node.cordoned {
                                    Some(node.cordoned_by.clone())
                                } else {
                                    // EKS's taint on the nodes its update replaces: its
                                    // cordon, by someone else than rota.
                                    node.owner_unschedulable.then_some(None)
                                },
                            },
                        ));
                    }
                }
            }
        }
        for group in describe {
            match self.groups.describe(&group).await {
                Ok(state) => {
                    for i in state.instances {
                        remember(&mut memory.images, &i.provider_id, i.image);
                    }
                }
                // Those nodes wait for the next pass; the others are recorded now.
                Err(e) => {
                    tracing::debug!(cluster = %self.cluster, error = %e, "ledger: describing a group")
                }
            }
        }
        if !karpenter.is_empty() {
            let drift = crate::kube::karpenter::KubeKarpenter::new(self.client.clone());
            let by_node = managed::karpenter_images(&drift, &karpenter).await;
            for (pid, s) in &seen {
                if let Some(image) = by_node.get(&s.node) {
                    remember(&mut memory.images, pid, image.clone());
                }
            }
        }
        prune_gone(&mut memory.images, seen.iter().map(|(pid, _)| pid.as_str()));
        Ok(Some(
            seen.into_iter()
                .map(|(pid, mut s)| {
                    s.image = memory.images.get(&pid).map(|k| k.image.clone());
                    s
                })
                .collect(),
        ))
    }

    /// Per pool: the versions its images belong to, the rotation under way, the commit.
    fn contexts(
        &self,
        nprs: &[NodePoolRotation],
        memory: &mut Memory,
    ) -> BTreeMap<String, PoolContext> {
        let mut out = BTreeMap::new();
        for npr in nprs {
            let s = &npr.spec;
            let versions = memory.versions.entry(s.pool.clone()).or_default();
            versions.insert(s.image.clone(), format!("{}@{}", s.channel, s.version));
            // A node that joins on the desired image joined under the pool's desired version
            // (a rotation to it, a rollback to it, or a scale-up on it). A checkpoint stays
            // after its rotation ended: only a rollback under way is read from it.
            let checkpoint = npr
                .status
                .as_ref()
                .filter(|st| st.phase != rota_core::rotate::Phase::Succeeded)
                .and_then(|st| st.checkpoint.as_ref());
            let rotation = Some((rotation_name(s, checkpoint), s.image.clone()));
            out.insert(
                s.pool.clone(),
                PoolContext {
                    versions: versions.clone(),
                    rotation,
                    commit: Some(s.source_commit.clone()),
                    preexisting: Default::default(),
                },
            );
        }
        out
    }
}

/// The open lives of `cluster` in `repo` (for tests and `rota audit`).
pub fn open_lives(repo: &git2::Repository, cluster: &str) -> Result<Book, LedgerError> {
    book::read_book(repo, cluster)
}

/// The pools with an open life in `cluster`'s ledger in the repo at `path` (none when it
/// cannot be read: every pool is then met as new, which only marks its nodes' lives as
/// joined before adoption).
async fn open_pools(path: &std::path::Path, cluster: &str) -> BTreeSet<String> {
    let (path, cluster) = (path.to_path_buf(), cluster.to_string());
    tokio::task::spawn_blocking(move || {
        git2::Repository::open(&path)
            .ok()
            .and_then(|r| book::read_book(&r, &cluster).ok())
            .map(|b| b.open.into_iter().map(|l| l.pool).collect())
            .unwrap_or_default()
    })
    .await
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn images(of: &HashMap<String, Known>) -> Vec<&str> {
        let mut v: Vec<&str> = of.keys().map(String::as_str).collect();
        v.sort();
        v
    }

    #[test]
    fn an_instance_is_forgotten_once_its_node_was_seen_and_went() {
        let mut cache = HashMap::new();
        remember(&mut cache, "aws:///a/i-1", "ami-1".into());
        remember(&mut cache, "aws:///a/i-2", "ami-1".into());
        // i-3 is described while it boots: no node yet.
        remember(&mut cache, "aws:///a/i-3", "ami-2".into());
        prune_gone(&mut cache, ["aws:///a/i-1", "aws:///a/i-2"].into_iter());
        assert_eq!(
            images(&cache),
            ["aws:///a/i-1", "aws:///a/i-2", "aws:///a/i-3"]
        );
        // i-1 terminated; a describe still lists it once: it goes all the same.
        remember(&mut cache, "aws:///a/i-1", "ami-1".into());
        prune_gone(&mut cache, ["aws:///a/i-2", "aws:///a/i-3"].into_iter());
        assert_eq!(images(&cache), ["aws:///a/i-2", "aws:///a/i-3"]);
        prune_gone(&mut cache, ["aws:///a/i-3"].into_iter());
        assert_eq!(images(&cache), ["aws:///a/i-3"]);
    }
}
