//! The NodePoolRotations a controller reconciles, kept from a watch instead of listed on every
//! pass (at scale those lists were most of rota's reads).
//!
//! What a pass reads here may lag its own last status write by the watch's latency. That is
//! safe: the checkpoint is written with the object's `resourceVersion` as a precondition
//! before any side effect (`controller::apply`), so a plan made from an older status loses with
//! 409 Conflict and the pool is observed again on a later pass. Until the first list has
//! completed there is no answer ([`Rotations::snapshot`] is an error), never an empty set of
//! pools. A watch that fails after that keeps the last set it saw while it reconnects (the
//! same precondition guards against its age); the failure is logged.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;

use super::wake::Wake;
use crate::kube::crd::NodePoolRotation;

#[derive(Default)]
struct State {
    synced: bool,
    items: BTreeMap<String, NodePoolRotation>,
}

/// The watched NodePoolRotations of the cluster (every version's; ownership is the
/// controller's filter).
#[derive(Clone)]
pub(super) struct Rotations {
    state: Arc<RwLock<State>>,
    /// Turns true once, when the first list completes.
    listed: tokio::sync::watch::Sender<bool>,
}

impl Rotations {
    /// Start watching; a pool whose spec changed (or that appeared) is sent on `wakes`. Status
    /// writes (our own) do not change the generation and wake nobody.
    pub(super) fn start(
        client: kube::Client,
        wakes: mpsc::UnboundedSender<Wake>,
    ) -> (Rotations, tokio::task::JoinHandle<()>) {
        let r = Rotations {
            state: Arc::default(),
            listed: tokio::sync::watch::Sender::new(false),
        };
        let task = tokio::spawn(r.clone().watch(client, wakes));
        (r, task)
    }

    /// Every NodePoolRotation as last seen, or why there is no answer yet.
    pub(super) fn snapshot(&self) -> Result<Vec<NodePoolRotation>, String> {
        let s = self
            .state
            .read()
            .expect("no writer panics holding the lock");
        if !s.synced {
            return Err("the NodePoolRotations have not been listed yet".into());
        }
        Ok(s.items.values().cloned().collect())
    }

    /// Resolves once the first list has completed.
    pub(super) async fn synced(&self) {
        let _ = self.listed.subscribe().wait_for(|listed| *listed).await;
    }

    async fn watch(self, client: kube::Client, wakes: mpsc::UnboundedSender<Wake>) {
        let api: Api<NodePoolRotation> = Api::all(client);
        let mut generations: HashMap<String, Option<i64>> = HashMap::new();
        let stream = watcher(api, watcher::Config::default()).default_backoff();
        tokio::pin!(stream);
        // A relist under way is built aside and swapped in whole, so a pass never sees half
        // a list (pools missing from it would only be forgotten, but needlessly).
        let mut relist: Option<BTreeMap<String, NodePoolRotation>> = None;
        while let Some(ev) = stream.next().await {
            let mut changed = None;
            {
                let mut s = self
                    .state
                    .write()
                    .expect("no writer panics holding the lock");
                match ev {
                    Ok(watcher::Event::Init) => relist = Some(BTreeMap::new()),
                    Ok(watcher::Event::InitApply(n)) => {
                        changed = Some((n.name_any(), n.metadata.generation));
                        relist
                            .get_or_insert_with(BTreeMap::new)
                            .insert(n.name_any(), n);
                    }
                    Ok(watcher::Event::InitDone) => {
                        s.items = relist.take().unwrap_or_default();
                        s.synced = true;
                        self.listed.send_replace(true);
                        generations.retain(|name, _| s.items.contains_key(name));
                    }
                    Ok(watcher::Event::Apply(n)) => {
                        changed = Some((n.name_any(), n.metadata.generation));
                        s.items.insert(n.name_any(), n);
                    }
                    Ok(watcher::Event::Delete(n)) => {
                        s.items.remove(&n.name_any());
                        generations.remove(&n.name_any());
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "watching NodePoolRotations failed; retrying");
                    }
                }
            }
            if let Some((name, generation)) = changed
                && generations.insert(name.clone(), generation) != Some(generation)
                && wakes.send(Wake::Npr(name)).is_err()
            {
                return;
            }
        }
    }
}
