//! The simulated fleet's GKE and AKS held to their published API descriptions: every request
//! rota's adapters send and every answer the simulated owner gives, through a rotation, a
//! failed update and a rollback, and through a blue-green move's calls (a twin created,
//! resized, a node removed, a pool deleted), is checked against Google's container v1 discovery document
//! (PyPI `google-api-python-client`) and the api-version 2026-08-01 models of PyPI
//! `azure-mgmt-containerservice` (`tests/support/api_schemas.py`, in the test peers' venv).
//! A field the description does not name, a value of the wrong type or enum, a read-only field
//! in a request, a wrong api-version: each fails here, named.

use std::time::Duration;

use rota::cloud::GroupRef;
use rota::cloud::managed::{
    MaxUnavailable, OwnerPools, PoolStatus, TwinRequest, UpdateRequest, UpdateStatus, renamed,
};
use rota::fleet::owner::ManagedGroup;
use rota::sim::cloud::{Exchange, GroupSpec, SimCloud};
use rota::sim::faults::FaultProfile;
use tokio::time::Instant;

use crate::support::api_schemas::{self, Api};

fn gke() -> ManagedGroup {
    ManagedGroup::GkeNodePool {
        project: "acme".into(),
        location: "europe-west1".into(),
        gke_cluster: "prod".into(),
        node_pool: "general".into(),
    }
}

fn aks() -> ManagedGroup {
    ManagedGroup::AksAgentPool {
        subscription_id: "00000000-0000-0000-0000-000000000001".into(),
        resource_group: "rg-prod".into(),
        aks_cluster: "prod".into(),
        agent_pool: "general".into(),
    }
}

fn req(image: &str, token: &str, batch: MaxUnavailable) -> UpdateRequest {
    UpdateRequest {
        image: image.into(),
        max_unavailable: batch,
        token: token.into(),
        drain_timeout_minutes: Some(30),
        node_soak_minutes: Some(2),
        drain_first: false,
        force: false,
    }
}

/// Run the owner's update of `pool` to its end (describing as the controller does).
async fn follow(cloud: &SimCloud, owner: &dyn OwnerPools, pool: &ManagedGroup) -> UpdateStatus {
    for _ in 0..7200 {
        cloud.step(Instant::now());
        let st = owner.describe(pool).await.unwrap();
        let u = st.update.expect("an update");
        if u.status != UpdateStatus::InProgress {
            return u.status;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    panic!("the update did not end");
}

fn as_checked(xs: Vec<Exchange>, prefix: &str) -> Vec<api_schemas::Exchange> {
    xs.into_iter()
        .filter(|x| x.path.starts_with(prefix))
        .map(|x| api_schemas::Exchange {
            status: match (x.method.as_str(), x.response.is_null()) {
                ("POST" | "DELETE", true) => 202,
                _ => 200,
            },
            method: x.method,
            path: x.path,
            request: x.request.unwrap_or(serde_json::Value::Null),
            response: x.response,
            headers: vec![],
        })
        .collect()
}

/// A GKE update forward (a percent batch), a failed one, and one back: every exchange is one
/// container v1 allows.
#[tokio::test(start_paused = true)]
async fn the_simulated_gkes_requests_and_answers_follow_container_v1() {
    let cloud = SimCloud::new(5, FaultProfile::default(), 1.0);
    let old = "1.31.4-gke.1183000/COS_CONTAINERD";
    let new = "1.31.5-gke.1023000/COS_CONTAINERD";
    cloud
        .create_group(GroupSpec::new(GroupRef::Managed(gke()), 4, old).prebooted())
        .unwrap();
    let owner = cloud.gke();
    owner
        .start_update(&gke(), &req(new, "rota-1-a", MaxUnavailable::Percent(50)))
        .await
        .unwrap();
    assert_eq!(
        follow(&cloud, &owner, &gke()).await,
        UpdateStatus::Successful
    );
    let broken = "1.31.6-gke.1000000/UBUNTU_CONTAINERD";
    cloud.fail_owner_updates_to(broken);
    owner
        .start_update(&gke(), &req(broken, "rota-2-b", MaxUnavailable::Count(1)))
        .await
        .unwrap();
    assert_eq!(follow(&cloud, &owner, &gke()).await, UpdateStatus::Failed);
    owner
        .start_update(&gke(), &req(old, "rota-3-c", MaxUnavailable::Count(1)))
        .await
        .unwrap();
    assert_eq!(
        follow(&cloud, &owner, &gke()).await,
        UpdateStatus::Successful
    );
    let xs = as_checked(cloud.owner_exchanges(), "v1/");
    assert!(xs.iter().any(|x| x.method == "PUT"), "{xs:?}");
    assert!(xs.iter().any(|x| x.path.contains("/operations/")), "{xs:?}");
    assert!(
        xs.iter().any(|x| x.response.get("error").is_some()),
        "a failed operation was checked too"
    );
    let problems = api_schemas::check(Api::Container, &xs);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// An AKS upgrade to the newest node image, a failed one, and a rollback to a recently used
/// version: every exchange is one the AKS models allow.
#[tokio::test(start_paused = true)]
async fn the_simulated_akss_requests_and_answers_follow_the_containerservice_models() {
    let cloud = SimCloud::new(6, FaultProfile::default(), 1.0);
    let old = "AKSUbuntu-2204gen2containerd-202610.01.0";
    let new = "AKSUbuntu-2204gen2containerd-202611.02.0";
    cloud
        .create_group(GroupSpec::new(GroupRef::Managed(aks()), 4, old).prebooted())
        .unwrap();
    cloud.set_aks_latest_node_image(new);
    let owner = cloud.aks();
    owner
        .start_update(&aks(), &req(new, "rota-1-a", MaxUnavailable::Percent(25)))
        .await
        .unwrap();
    assert_eq!(
        follow(&cloud, &owner, &aks()).await,
        UpdateStatus::Successful
    );
    let broken = "AKSUbuntu-2204gen2containerd-202612.01.0";
    cloud.set_aks_latest_node_image(broken);
    cloud.fail_owner_updates_to(broken);
    owner
        .start_update(&aks(), &req(broken, "rota-2-b", MaxUnavailable::Count(1)))
        .await
        .unwrap();
    assert_eq!(follow(&cloud, &owner, &aks()).await, UpdateStatus::Failed);
    owner
        .start_update(&aks(), &req(old, "rota-3-c", MaxUnavailable::Count(1)))
        .await
        .unwrap();
    assert_eq!(
        follow(&cloud, &owner, &aks()).await,
        UpdateStatus::Successful
    );
    let xs = as_checked(cloud.owner_exchanges(), "/subscriptions/");
    assert!(xs.iter().any(|x| x.method == "POST"), "{xs:?}");
    assert!(
        xs.iter()
            .any(|x| x.response["properties"]["status"]["provisioningError"].is_object()),
        "a failed upgrade was checked too"
    );
    let problems = api_schemas::check(Api::Aks, &xs);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A blue-green move's calls on `from`: the twin created (twice: once), resized, every old
/// node removed by name, the emptied pool deleted.
async fn blue_green_calls(
    cloud: &SimCloud,
    owner: &dyn OwnerPools,
    from: &ManagedGroup,
    image: &str,
) {
    let tick = |secs: u64| async move {
        for _ in 0..secs {
            cloud.step(Instant::now());
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    let twin = renamed(from, "general-rota-2026-11-2");
    let req = TwinRequest {
        from: from.clone(),
        twin: twin.clone(),
        image: image.into(),
        desired: 0,
        max: 4,
    };
    owner.create_twin(&req).await.unwrap();
    owner.create_twin(&req).await.unwrap();
    assert_eq!(cloud.twins_created().len(), 1);
    tick(300).await;
    let m = owner.members(&twin).await.unwrap().unwrap();
    assert_eq!(m.status, PoolStatus::Active);
    assert_eq!(m.twin_of.as_deref(), Some("general"));
    owner.set_size(&twin, 2, 4).await.unwrap();
    tick(600).await;
    let old = owner.members(from).await.unwrap().unwrap();
    for i in &old.instances {
        owner.remove_node(from, &i.id).await.unwrap();
    }
    tick(600).await;
    let old = owner.members(from).await.unwrap().unwrap();
    assert_eq!((old.desired, old.instances.len()), (0, 0));
    owner.delete_pool(from).await.unwrap();
    tick(300).await;
    assert_eq!(owner.members(from).await.unwrap(), None);
    let m = owner.members(&twin).await.unwrap().unwrap();
    assert_eq!(m.instances.len(), 2);
    assert!(m.instances.iter().all(|i| i.image == image));
}

/// GKE's blue-green calls: `nodePools.create`, `.setSize`, `.delete` and `.get` against
/// container v1; the node removed through Compute's `deleteInstances` against Compute v1.
#[tokio::test(start_paused = true)]
async fn the_simulated_gkes_blue_green_calls_follow_container_v1_and_compute_v1() {
    let cloud = SimCloud::new(7, FaultProfile::default(), 1.0);
    let old = "1.31.4-gke.1183000/COS_CONTAINERD";
    cloud
        .create_group(GroupSpec::new(GroupRef::Managed(gke()), 3, old).prebooted())
        .unwrap();
    blue_green_calls(
        &cloud,
        &cloud.gke(),
        &gke(),
        "1.31.5-gke.1023000/COS_CONTAINERD",
    )
    .await;
    let xs = as_checked(cloud.owner_exchanges(), "v1/");
    for m in ["POST", "DELETE"] {
        assert!(xs.iter().any(|x| x.method == m), "{m}: {xs:?}");
    }
    assert!(xs.iter().any(|x| x.path.ends_with(":setSize")), "{xs:?}");
    let problems = api_schemas::check(Api::Container, &xs);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let compute = as_checked(cloud.owner_exchanges(), "projects/");
    assert_eq!(compute.len(), 3, "{compute:?}");
    let problems = api_schemas::check(Api::Compute, &compute);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// AKS's blue-green calls: the twin's and the resize's PUTs, `deleteMachines`, the DELETE and
/// the GETs against the containerservice models.
#[tokio::test(start_paused = true)]
async fn the_simulated_akss_blue_green_calls_follow_the_containerservice_models() {
    let cloud = SimCloud::new(8, FaultProfile::default(), 1.0);
    let old = "AKSUbuntu-2204gen2containerd-202610.01.0";
    let new = "AKSUbuntu-2204gen2containerd-202611.02.0";
    cloud
        .create_group(GroupSpec::new(GroupRef::Managed(aks()), 3, old).prebooted())
        .unwrap();
    cloud.set_aks_latest_node_image(new);
    blue_green_calls(&cloud, &cloud.aks(), &aks(), new).await;
    let xs = as_checked(cloud.owner_exchanges(), "/subscriptions/");
    assert!(
        xs.iter().any(|x| x.path.contains("/deleteMachines")),
        "{xs:?}"
    );
    assert!(xs.iter().any(|x| x.method == "DELETE"), "{xs:?}");
    let problems = api_schemas::check(Api::Aks, &xs);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
