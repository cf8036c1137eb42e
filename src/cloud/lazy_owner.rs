//! One managed-pool owner's adapter built on its first call ([`LazyOwner`]): an agent allowed
//! several clouds (`--cloud auto`) loads a cloud's credentials only once it meets a pool of
//! that cloud's owner, as the self-managed providers are built on first use
//! (`cloud::registry`).
//!
//! What the agent asks of an owner before any pool call (whose pools these are, what it lets
//! rota do, whether it offers `managedUpdate: blueGreen`) must be answered without building
//! the client: each owner's client states it once, as its [`OwnerFacts`], and both the client
//! and its lazy adapter answer from there.

use std::future::Future;

use async_trait::async_trait;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use rota_core::cloud::managed::{
    OwnerCapabilities, OwnerPoolMembers, OwnerPoolState, OwnerPools, TwinRequest, UpdateRequest,
};
use rota_core::cloud::{CloudError, CloudErrorKind};
use rota_core::fleet::owner::{ManagedGroup, Owner};

/// What an owner's client says of itself, known before it is built.
#[derive(Clone, Copy, Debug)]
pub struct OwnerFacts {
    pub owner: Owner,
    pub capabilities: OwnerCapabilities,
    /// Whether the owner offers `managedUpdate: blueGreen` ([`OwnerPools::blue_green`]).
    pub blue_green: bool,
    /// The calls a failed build is reported against: the owner's read of a pool (for
    /// `describe`, `members`, `twins_of`) and its update (for every call that writes).
    pub describe_call: &'static str,
    pub update_call: &'static str,
}

/// An owner's client `T`, built by `build` on the first pool call and kept once built. A
/// build that fails is answered as a `Permission` error naming the call and the pool (the
/// pool pauses and says why; the agent does not crash), and built again on a later call, as
/// `cloud::registry` builds a provider again: credentials mounted late (a projected token
/// that appears after start-up, a secret mounted once the pod runs) are picked up without a
/// restart. Not on every call, though: a pass per pool asks the owner several times, and a
/// build may itself call out (a credential chain, a token exchange), so a failed build is
/// tried again only once [`REBUILD_AFTER`] has passed on the agent's clock (tokio's, which
/// the tests pause), and its error is answered meanwhile.
pub struct LazyOwner<T, F> {
    facts: OwnerFacts,
    build: F,
    cell: OnceCell<T>,
    /// The last failed build: when (the agent's clock) and its error.
    failed: std::sync::Mutex<Option<(Instant, String)>>,
}

/// How long a failed build is answered before the client is built again.
pub const REBUILD_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

impl<T, F, Fut> LazyOwner<T, F>
where
    T: OwnerPools,
    F: Fn() -> Fut + Send + Sync,
    Fut: Future<Output = Result<T, String>> + Send,
{
    pub fn new(facts: OwnerFacts, build: F) -> LazyOwner<T, F> {
        LazyOwner {
            facts,
            build,
            cell: OnceCell::new(),
            failed: std::sync::Mutex::new(None),
        }
    }

    /// The client, built on the first call (and after a failed build, on the first call
    /// [`REBUILD_AFTER`] later); `call` and `pool` name a failed build's error.
    async fn get(&self, call: &'static str, pool: &ManagedGroup) -> Result<&T, CloudError> {
        // The cell lets one caller build at a time: a caller that waited on a build that
        // failed finds the failure recent here and answers it, without a second build.
        self.cell
            .get_or_try_init(|| async {
                if let Some(error) = self.recent_failure() {
                    return Err(error);
                }
                let built = (self.build)().await;
                if let Err(error) = &built {
                    *self.failed.lock().expect("not poisoned") =
                        Some((Instant::now(), error.clone()));
                }
                built
            })
            .await
            .map_err(|m| CloudError::about(CloudErrorKind::Permission, call, &pool.to_string(), m))
    }

    /// The last failed build's error while it is younger than [`REBUILD_AFTER`].
    fn recent_failure(&self) -> Option<String> {
        let failed = self.failed.lock().expect("not poisoned");
        let (at, error) = failed.as_ref()?;
        (at.elapsed() < REBUILD_AFTER).then(|| error.clone())
    }

    async fn reader(&self, pool: &ManagedGroup) -> Result<&T, CloudError> {
        self.get(self.facts.describe_call, pool).await
    }

    async fn writer(&self, pool: &ManagedGroup) -> Result<&T, CloudError> {
        self.get(self.facts.update_call, pool).await
    }
}

#[async_trait]
impl<T, F, Fut> OwnerPools for LazyOwner<T, F>
where
    T: OwnerPools,
    F: Fn() -> Fut + Send + Sync,
    Fut: Future<Output = Result<T, String>> + Send,
{
    fn owner(&self) -> Owner {
        self.facts.owner
    }

    fn capabilities(&self) -> OwnerCapabilities {
        self.facts.capabilities
    }

    async fn describe(&self, pool: &ManagedGroup) -> Result<OwnerPoolState, CloudError> {
        self.reader(pool).await?.describe(pool).await
    }

    async fn start_update(
        &self,
        pool: &ManagedGroup,
        req: &UpdateRequest,
    ) -> Result<String, CloudError> {
        self.writer(pool).await?.start_update(pool, req).await
    }

    fn blue_green(&self) -> bool {
        self.facts.blue_green
    }

    async fn create_twin(&self, req: &TwinRequest) -> Result<(), CloudError> {
        self.writer(&req.from).await?.create_twin(req).await
    }

    async fn members(&self, pool: &ManagedGroup) -> Result<Option<OwnerPoolMembers>, CloudError> {
        self.reader(pool).await?.members(pool).await
    }

    async fn set_size(
        &self,
        pool: &ManagedGroup,
        desired: u32,
        max: u32,
    ) -> Result<(), CloudError> {
        self.writer(pool).await?.set_size(pool, desired, max).await
    }

    async fn remove_node(&self, pool: &ManagedGroup, instance_id: &str) -> Result<(), CloudError> {
        self.writer(pool)
            .await?
            .remove_node(pool, instance_id)
            .await
    }

    async fn delete_pool(&self, pool: &ManagedGroup) -> Result<(), CloudError> {
        self.writer(pool).await?.delete_pool(pool).await
    }

    async fn twins_of(&self, pool: &ManagedGroup) -> Result<Vec<OwnerPoolMembers>, CloudError> {
        self.reader(pool).await?.twins_of(pool).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rota_core::cloud::managed::MaxUnavailable;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const FACTS: OwnerFacts = OwnerFacts {
        owner: Owner::GkeNodePool,
        capabilities: OwnerCapabilities {
            service_update: true,
            max_unavailable: false,
            cancel_update: false,
        },
        blue_green: false,
        describe_call: "pools.get",
        update_call: "pools.update",
    };

    /// An owner whose pools all stand at one image.
    struct Fixed;

    #[async_trait]
    impl OwnerPools for Fixed {
        fn owner(&self) -> Owner {
            FACTS.owner
        }
        fn capabilities(&self) -> OwnerCapabilities {
            FACTS.capabilities
        }
        async fn describe(&self, pool: &ManagedGroup) -> Result<OwnerPoolState, CloudError> {
            Ok(OwnerPoolState {
                pool: pool.clone(),
                image: "img-1".into(),
                desired: 3,
                max_unavailable: None,
                update: None,
            })
        }
        async fn start_update(
            &self,
            _: &ManagedGroup,
            req: &UpdateRequest,
        ) -> Result<String, CloudError> {
            Ok(format!("update-{}", req.token))
        }
    }

    fn pool() -> ManagedGroup {
        ManagedGroup::GkeNodePool {
            project: "acme".into(),
            location: "europe-west1".into(),
            gke_cluster: "prod".into(),
            node_pool: "general".into(),
        }
    }

    fn request() -> UpdateRequest {
        UpdateRequest {
            image: "img-2".into(),
            max_unavailable: MaxUnavailable::Percent(33),
            token: "rota-1-a".into(),
            drain_timeout_minutes: None,
            node_soak_minutes: None,
            drain_first: false,
            force: false,
        }
    }

    /// The owner and its capabilities are answered without a build; the first pool call
    /// builds once and later calls reuse it.
    #[tokio::test]
    async fn the_client_is_built_once_on_the_first_pool_call() {
        let builds = Arc::new(AtomicUsize::new(0));
        let counted = builds.clone();
        let lazy = LazyOwner::new(FACTS, move || {
            counted.fetch_add(1, Ordering::SeqCst);
            async { Ok(Fixed) }
        });
        assert_eq!(lazy.owner(), Owner::GkeNodePool);
        assert_eq!(lazy.capabilities(), FACTS.capabilities);
        assert!(!lazy.blue_green());
        assert_eq!(builds.load(Ordering::SeqCst), 0);
        assert_eq!(lazy.describe(&pool()).await.unwrap().image, "img-1");
        let started = lazy.start_update(&pool(), &request()).await.unwrap();
        assert_eq!(started, "update-rota-1-a");
        assert_eq!(builds.load(Ordering::SeqCst), 1);
    }

    /// A failed build is a `Permission` error naming the call and the pool, on a read and
    /// a write alike, and it is not tried again within [`REBUILD_AFTER`].
    #[tokio::test(start_paused = true)]
    async fn a_failed_build_pauses_the_pool_naming_the_call() {
        let builds = Arc::new(AtomicUsize::new(0));
        let counted = builds.clone();
        let lazy = LazyOwner::new(FACTS, move || {
            counted.fetch_add(1, Ordering::SeqCst);
            async { Err::<Fixed, _>("no application default credentials".to_string()) }
        });
        let e = lazy.describe(&pool()).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Permission);
        assert_eq!(e.call, "pools.get");
        assert_eq!(e.group, pool().to_string());
        assert!(e.message.contains("no application default credentials"));
        let e = lazy.start_update(&pool(), &request()).await.unwrap_err();
        assert_eq!(
            (e.kind, e.call),
            (CloudErrorKind::Permission, "pools.update")
        );
        let e = lazy.twins_of(&pool()).await.unwrap_err();
        assert_eq!(e.call, "pools.get");
        assert_eq!(builds.load(Ordering::SeqCst), 1);
    }

    /// A build that fails once (no credentials yet) and succeeds later is used: the calls
    /// within [`REBUILD_AFTER`] of the failure answer it without building, the first call
    /// after it builds again, and the client built then is kept.
    #[tokio::test(start_paused = true)]
    async fn a_failed_build_is_built_again_a_minute_later_and_kept_once_built() {
        let builds = Arc::new(AtomicUsize::new(0));
        let counted = builds.clone();
        let lazy = LazyOwner::new(FACTS, move || {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            async move {
                match n {
                    0 => Err("the projected token is not there yet".to_string()),
                    _ => Ok(Fixed),
                }
            }
        });
        let e = lazy.describe(&pool()).await.unwrap_err();
        assert!(e.message.contains("the projected token is not there yet"));
        // A pass per pool, every few seconds, for most of a minute: no build, the same error.
        for _ in 0..11 {
            tokio::time::advance(std::time::Duration::from_secs(5)).await;
            let e = lazy.describe(&pool()).await.unwrap_err();
            assert_eq!(e.kind, CloudErrorKind::Permission);
            assert!(e.message.contains("the projected token is not there yet"));
        }
        assert_eq!(builds.load(Ordering::SeqCst), 1);
        tokio::time::advance(std::time::Duration::from_secs(5)).await;
        assert_eq!(lazy.describe(&pool()).await.unwrap().image, "img-1");
        assert_eq!(builds.load(Ordering::SeqCst), 2);
        tokio::time::advance(REBUILD_AFTER * 3).await;
        let started = lazy.start_update(&pool(), &request()).await.unwrap();
        assert_eq!(started, "update-rota-1-a");
        assert_eq!(builds.load(Ordering::SeqCst), 2);
    }

    /// A build that keeps failing is tried once per [`REBUILD_AFTER`], however many calls
    /// ask for it, concurrent ones included.
    #[tokio::test(start_paused = true)]
    async fn a_failing_build_is_tried_once_a_minute_not_on_every_call() {
        let builds = Arc::new(AtomicUsize::new(0));
        let counted = builds.clone();
        let lazy = Arc::new(LazyOwner::new(FACTS, move || {
            counted.fetch_add(1, Ordering::SeqCst);
            async {
                // A build that takes a while (a credential chain): callers meanwhile wait.
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                Err::<Fixed, _>("no application default credentials".to_string())
            }
        }));
        for minute in 1..=3 {
            let calls: Vec<_> = (0..4)
                .map(|_| {
                    let lazy = lazy.clone();
                    tokio::spawn(async move { lazy.describe(&pool()).await })
                })
                .collect();
            for c in calls {
                assert!(c.await.unwrap().is_err());
            }
            for _ in 0..10 {
                tokio::time::advance(std::time::Duration::from_secs(5)).await;
                assert!(lazy.start_update(&pool(), &request()).await.is_err());
            }
            assert_eq!(builds.load(Ordering::SeqCst), minute);
            tokio::time::advance(std::time::Duration::from_secs(11)).await;
        }
    }
}
