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

/// An owner's client `T`, built by `build` on the first pool call. A build that fails is
/// answered, on that call and every later one, as a `Permission` error naming the call and
/// the pool (the pool pauses and says why; the agent does not crash). The failure is kept,
/// as each owner's adapter kept it before they were one (unlike `cloud::registry`, which
/// builds again on the next call).
pub struct LazyOwner<T, F> {
    facts: OwnerFacts,
    build: F,
    cell: OnceCell<Result<T, String>>,
}

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
        }
    }

    /// The client, built on the first call; `call` and `pool` name a failed build's error.
    async fn get(&self, call: &'static str, pool: &ManagedGroup) -> Result<&T, CloudError> {
        self.cell
            .get_or_init(|| (self.build)())
            .await
            .as_ref()
            .map_err(|m| {
                CloudError::about(
                    CloudErrorKind::Permission,
                    call,
                    &pool.to_string(),
                    m.clone(),
                )
            })
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
    /// a write alike, and it is not tried again.
    #[tokio::test]
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
}
