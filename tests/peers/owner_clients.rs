//! The real GKE node pool and AKS agent pool clients (`cloud::gcp::node_pools`,
//! `cloud::azure::agent_pools`) against doubles held to the published descriptions (container
//! v1's discovery document, `azure-mgmt-containerservice`'s models; `tests/support/
//! gke_double.rs`, `aks_double.rs`): the calls of a rotation (read the pool, start the update,
//! follow it to its end), a start sent twice, a restarted client finding its update, a
//! second update refused while one runs, a failed update, a rollback, and pins the owner
//! cannot take. Each double refuses a request its description does not allow, and every
//! exchange is checked again when it is dropped.

use std::sync::Arc;
use std::time::Duration;

use rota::cloud::CloudErrorKind;
use rota::cloud::managed::{MaxUnavailable, OwnerPools, UpdateRequest, UpdateStatus};
use rota::cloud::retry::RetryPolicy;
use rota::fleet::owner::ManagedGroup;

use crate::support::aks_double::AksDouble;
use crate::support::gke_double::GkeDouble;

fn retries() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(10),
        throttle_floor: Duration::from_millis(2),
        call_timeout: Duration::from_secs(10),
    }
}

/// A token as the planner makes one: `rota-<unix seconds>-<digest>`.
fn token(n: u64) -> String {
    format!("rota-{}-{n:016x}", chrono::Utc::now().timestamp())
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

mod gke {
    use super::*;
    use rota::cloud::gcp::GcpCredentials;
    use rota::cloud::gcp::node_pools::{GkeNodePools, GkeOptions, TOKEN_LABEL};

    const PATH: &str = "projects/acme/locations/europe-west1/clusters/prod/nodePools/general";
    const OLD: &str = "1.31.4-gke.1183000/COS_CONTAINERD";
    const NEW: &str = "1.31.5-gke.1023000/COS_CONTAINERD";

    fn pool() -> ManagedGroup {
        ManagedGroup::GkeNodePool {
            project: "acme".into(),
            location: "europe-west1".into(),
            gke_cluster: "prod".into(),
            node_pool: "general".into(),
        }
    }

    pub(super) fn client(double: &GkeDouble) -> GkeNodePools {
        GkeNodePools::new(GkeOptions {
            endpoint: Some(double.url.clone()),
            compute_endpoint: None,
            credentials: GcpCredentials::Anonymous,
            retry: retries(),
        })
        .unwrap()
    }

    /// The pool's size is its managed instance groups' `targetSize`s, read from Compute
    /// (the GCP double, held to Compute v1): 2 + 5 after the autoscaler grew one zone, not
    /// the 3 a zone in 2 zones it was created with. A surge by percent counts from it.
    #[tokio::test]
    async fn a_gke_pools_size_is_its_instance_groups_sizes() {
        use crate::support::gcp_double::{GcpDouble, MigSpec};
        let d = double().await;
        let compute = GcpDouble::start().await;
        let mut urls = vec![];
        for (zone, size) in [("europe-west1-b", 2), ("europe-west1-c", 5)] {
            let key = compute.add_mig(&MigSpec {
                project: "acme".into(),
                name: format!("gke-prod-general-{zone}-grp"),
                zone: Some(zone.into()),
                region: None,
                target_size: size,
                image: "projects/gke-node-images/global/images/gke-1314-cos".into(),
                autoscaler: None,
                regional_template: false,
                update_policy: "OPPORTUNISTIC",
                autoscaler_mode: "OFF",
            });
            urls.push(format!("https://www.googleapis.com/compute/v1/{key}"));
        }
        d.set_instance_groups(PATH, &urls);
        let gke = GkeNodePools::new(GkeOptions {
            endpoint: Some(d.url.clone()),
            compute_endpoint: Some(compute.url.clone()),
            credentials: GcpCredentials::Anonymous,
            retry: retries(),
        })
        .unwrap();
        let st = gke.describe(&pool()).await.unwrap();
        assert_eq!(st.desired, 7, "2 + 5, the groups' sizes");
        let reads: Vec<String> = compute
            .requests()
            .into_iter()
            .filter(|r| r.contains("instanceGroupManagers/gke-prod-general"))
            .collect();
        assert_eq!(reads.len(), 2, "{reads:?}");
        // A broken answer naming something else than a managed instance group is refused.
        d.set_instance_groups(
            PATH,
            &["https://evil.example/compute/v1/projects/acme/zones/z/instances/i-1".to_string()],
        );
        let e = gke.describe(&pool()).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Invalid, "{e}");
        assert!(e.message.contains("evil.example"), "{e}");
        assert!(d.refused().is_empty(), "{:?}", d.refused());
    }

    async fn double() -> GkeDouble {
        let d = GkeDouble::start().await;
        d.add_pool(
            PATH,
            "1.31.4-gke.1183000",
            "COS_CONTAINERD",
            3,
            &["europe-west1-b", "europe-west1-c"],
        );
        // The location's list holds other clusters' upgrades and other kinds of operation.
        d.add_other_operation(
            "europe-west1",
            "UPGRADE_NODES",
            "projects/acme/locations/europe-west1/clusters/staging/nodePools/general",
        );
        d.add_other_operation("europe-west1", "SET_LABELS", PATH);
        d
    }

    /// Read, start (twice: one operation), follow it with `operations.get`, end: the pool on
    /// the new version; the pool's own labels kept beside the token.
    #[tokio::test]
    async fn a_gke_update_is_started_once_and_followed_to_its_end() {
        let d = double().await;
        let gke = client(&d);
        let st = gke.describe(&pool()).await.unwrap();
        assert_eq!(st.image, OLD);
        assert_eq!(st.desired, 6, "3 a zone in 2 zones");
        assert_eq!(st.max_unavailable, Some(MaxUnavailable::Count(1)));
        assert!(
            st.update.is_none(),
            "other pools' and kinds' operations are not this pool's update: {:?}",
            st.update
        );

        let t = token(1);
        let r = req(NEW, &t, MaxUnavailable::Percent(50));
        let id = gke.start_update(&pool(), &r).await.unwrap();
        assert_eq!(
            gke.start_update(&pool(), &r).await.unwrap(),
            id,
            "the same token answers the same operation"
        );
        assert_eq!(d.upgrades(), 1, "{:?}", d.calls());
        let labels = d.labels(PATH);
        assert_eq!(labels.get(TOKEN_LABEL), Some(&t));
        assert_eq!(
            labels.get("team").map(String::as_str),
            Some("payments"),
            "the pool's own label kept"
        );

        let st = gke.describe(&pool()).await.unwrap();
        let u = st.update.unwrap();
        assert_eq!(
            (
                u.id.as_str(),
                u.token.as_deref(),
                u.status,
                u.image.as_str()
            ),
            (id.as_str(), Some(t.as_str()), UpdateStatus::InProgress, NEW)
        );
        assert!(
            d.calls().iter().any(|c| c
                .starts_with("GET v1/projects/acme/locations/europe-west1/operations/operation-")),
            "{:?}",
            d.calls()
        );

        d.finish(true);
        let st = gke.describe(&pool()).await.unwrap();
        assert_eq!(st.image, NEW);
        assert_eq!(st.update.unwrap().status, UpdateStatus::Successful);
        assert!(d.refused().is_empty(), "{:?}", d.refused());
    }

    /// A restarted agent (a new client) finds its update from the location's operations and
    /// the pool's label; sending its start again starts nothing.
    #[tokio::test]
    async fn a_restarted_client_finds_its_operation_by_the_pools_label() {
        let d = double().await;
        let t = token(2);
        let r = req(NEW, &t, MaxUnavailable::Count(2));
        let id = client(&d).start_update(&pool(), &r).await.unwrap();
        let fresh = client(&d);
        let u = fresh.describe(&pool()).await.unwrap().update.unwrap();
        assert_eq!(
            (u.id.as_str(), u.token.as_deref(), u.status),
            (id.as_str(), Some(t.as_str()), UpdateStatus::InProgress)
        );
        assert_eq!(client(&d).start_update(&pool(), &r).await.unwrap(), id);
        assert_eq!(d.upgrades(), 1);
        assert!(
            d.calls()
                .iter()
                .any(|c| c == "GET v1/projects/acme/locations/europe-west1/operations"),
            "{:?}",
            d.calls()
        );
    }

    const CLUSTER: &str = "projects/acme/locations/europe-west1/clusters/prod";
    const ZONES: [&str; 2] = ["europe-west1-b", "europe-west1-c"];

    /// The GKE double linked to a Compute double, the pool `general` of 3 nodes a zone in
    /// two zones with its groups there, and a client of both.
    async fn blue_green_doubles() -> (
        GkeDouble,
        crate::support::gcp_double::GcpDouble,
        GkeNodePools,
    ) {
        use crate::support::gcp_double::GcpDouble;
        let d = double().await;
        let compute = GcpDouble::start().await;
        let link = compute.link();
        let urls: Vec<String> = ZONES
            .iter()
            .map(|z| {
                let key = link.add_group(
                    "acme",
                    z,
                    &format!("gke-prod-general-{z}-grp"),
                    3,
                    "projects/gke-node-images/global/images/gke-1314-cos",
                );
                format!("https://www.googleapis.com/compute/v1/{key}")
            })
            .collect();
        d.set_instance_groups(PATH, &urls);
        d.link_compute(link);
        let gke = GkeNodePools::new(GkeOptions {
            endpoint: Some(d.url.clone()),
            compute_endpoint: Some(compute.url.clone()),
            credentials: GcpCredentials::Anonymous,
            retry: retries(),
        })
        .unwrap();
        (d, compute, gke)
    }

    fn twin_request() -> rota::cloud::managed::TwinRequest {
        rota::cloud::managed::TwinRequest {
            from: pool(),
            twin: rota::cloud::managed::renamed(
                &pool(),
                &rota::cloud::managed::twin_name("general", "2026.11.2"),
            ),
            image: NEW.into(),
            desired: 0,
            max: 6,
        }
    }

    /// `managedUpdate: blueGreen` on GKE through container v1 and Compute v1: the twin made
    /// in the old pool's shape on the new node version, labelled rota's, once however often
    /// asked (a restarted client finds it and creates nothing); followed while GKE provisions
    /// it (a size asked then waits for the next pass); sized with `setSize` (per zone) or, for
    /// a total that does not split over the zones, its groups' `resize`; found by its label;
    /// one drained node of the old pool removed by name (twice is once) and the pool's size
    /// down with it; the old pool deleted, `STOPPING` then gone.
    #[tokio::test]
    async fn a_gke_twin_is_made_once_sized_and_the_old_pool_emptied_and_deleted() {
        use rota::cloud::managed::PoolStatus;
        let (d, compute, gke) = blue_green_doubles().await;
        let req = twin_request();
        let twin = req.twin.clone();
        let twin_path = format!("{CLUSTER}/nodePools/{}", twin.name());
        gke.create_twin(&req).await.unwrap();
        let sent = d.created(&twin_path).expect("created");
        assert_eq!(
            (
                &sent["version"],
                &sent["config"]["imageType"],
                &sent["initialNodeCount"]
            ),
            (
                &serde_json::json!("1.31.5-gke.1023000"),
                &serde_json::json!("COS_CONTAINERD"),
                &serde_json::json!(0)
            )
        );
        assert_eq!(sent["locations"], serde_json::json!(ZONES));
        assert_eq!(
            sent["config"]["resourceLabels"],
            serde_json::json!({"team": "payments", "rota-twin-of": "general"})
        );
        assert_eq!(sent["config"]["machineType"], "e2-standard-4");
        assert!(sent.get("instanceGroupUrls").is_none() && sent.get("status").is_none());
        // Asked again, by this client and by a restarted one: the same twin, no second.
        gke.create_twin(&req).await.unwrap();
        client(&d).create_twin(&req).await.unwrap();
        assert_eq!(d.creates(), 1, "{:?}", d.calls());

        let m = gke.members(&twin).await.unwrap().unwrap();
        assert_eq!(
            (
                m.status,
                m.desired,
                m.instances.len(),
                m.twin_of.as_deref(),
                m.image.as_str()
            ),
            (PoolStatus::Creating, 0, 0, Some("general"), NEW)
        );
        let busy = gke.set_size(&twin, 2, 6).await.unwrap_err();
        assert_eq!(busy.kind, CloudErrorKind::Transient, "{busy}");
        assert!(busy.message.contains("PROVISIONING"), "{busy}");
        d.finish(true);
        assert_eq!(
            gke.members(&twin).await.unwrap().unwrap().status,
            PoolStatus::Active
        );

        // 2 over two zones: setSize of 1 a zone.
        gke.set_size(&twin, 2, 6).await.unwrap();
        let set_sizes =
            |d: &GkeDouble| d.calls().iter().filter(|c| c.ends_with(":setSize")).count();
        assert_eq!(set_sizes(&d), 1);
        compute.advance(Duration::from_secs(120));
        let m = gke.members(&twin).await.unwrap().unwrap();
        assert_eq!((m.desired, m.instances.len()), (2, 2), "{m:?}");
        for i in &m.instances {
            assert!(
                i.provider_id.starts_with("gce://acme/europe-west1-"),
                "{i:?}"
            );
            assert_eq!(i.image, NEW);
        }
        // 3 over two zones: the groups themselves, 2 and 1; no setSize.
        gke.set_size(&twin, 3, 6).await.unwrap();
        assert_eq!(set_sizes(&d), 1);
        let m = gke.members(&twin).await.unwrap().unwrap();
        assert_eq!(m.desired, 3);
        // The same size again writes nothing.
        let before = d.calls().len();
        gke.set_size(&twin, 3, 6).await.unwrap();
        assert!(
            d.calls()[before..].iter().all(|c| c.starts_with("GET ")),
            "{:?}",
            &d.calls()[before..]
        );

        // The twin is found by its label, whatever its name (a lost checkpoint).
        let found = gke.twins_of(&pool()).await.unwrap();
        assert_eq!(
            found.iter().map(|m| m.pool.name()).collect::<Vec<_>>(),
            [twin.name()]
        );

        // One drained node of the old pool, by name: its group deletes it, one smaller.
        let old = gke.members(&pool()).await.unwrap().unwrap();
        assert_eq!(
            (old.desired, old.instances.len(), old.image.as_str()),
            (6, 6, OLD)
        );
        let gone = old.instances[0].id.clone();
        gke.remove_node(&pool(), &gone).await.unwrap();
        gke.remove_node(&pool(), &gone).await.unwrap();
        let deletes = compute
            .requests()
            .iter()
            .filter(|r| r.contains("/deleteInstances"))
            .count();
        assert_eq!(
            deletes,
            1,
            "the second removal finds it going: {:?}",
            compute.requests()
        );
        let old = gke.members(&pool()).await.unwrap().unwrap();
        assert_eq!(old.desired, 5);
        let going = old.instances.iter().find(|i| i.id == gone).unwrap();
        assert_eq!(going.lifecycle, rota::cloud::Lifecycle::Terminating);
        // A node no group lists is gone already.
        gke.remove_node(&pool(), "gke-prod-general-nosuch")
            .await
            .unwrap();

        // The old pool deleted: STOPPING, then gone (and asked again, nothing more).
        gke.delete_pool(&pool()).await.unwrap();
        gke.delete_pool(&pool()).await.unwrap();
        assert_eq!(
            gke.members(&pool()).await.unwrap().unwrap().status,
            PoolStatus::Deleting
        );
        d.finish(true);
        assert!(gke.members(&pool()).await.unwrap().is_none());
        gke.delete_pool(&pool()).await.unwrap();
        assert_eq!(
            d.calls()
                .iter()
                .filter(|c| c.starts_with("DELETE "))
                .count(),
            1
        );
        assert!(d.refused().is_empty(), "{:?}", d.refused());
    }

    /// Compute's `deleteInstances` and `resize` answer with a zonal operation (`PENDING`):
    /// the call follows it with `zoneOperations.get` until `DONE` before it returns, so the
    /// next call does not race it, and an operation that ends in an error is the call's error
    /// (classified by its code), with nothing done.
    #[tokio::test]
    async fn compute_operations_are_followed_to_done_and_their_errors_are_the_calls() {
        let (_d, compute, gke) = blue_green_doubles().await;
        compute.set_polls_to_done(3);
        let ops = |c: &crate::support::gcp_double::GcpDouble| {
            c.requests()
                .iter()
                .filter(|r| r.starts_with("GET ") && r.contains("/operations/operation-"))
                .count()
        };
        let old = gke.members(&pool()).await.unwrap().unwrap();
        let gone = old.instances[0].id.clone();
        gke.remove_node(&pool(), &gone).await.unwrap();
        assert_eq!(
            ops(&compute),
            3,
            "followed until DONE: {:?}",
            compute.requests()
        );
        assert!(
            compute
                .requests()
                .iter()
                .filter(|r| r.contains("/operations/"))
                .all(|r| r.contains(&format!("zones/{}/operations/", old.instances[0].zone))),
            "{:?}",
            compute.requests()
        );

        // An operation Compute ends in an error: the call's error, nothing removed.
        compute.fail_next_operation(
            "deleteInstances",
            "CONDITION_NOT_MET",
            "The resource is not ready to be deleted",
            412,
        );
        let next = old.instances[1].id.clone();
        let e = gke.remove_node(&pool(), &next).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Invalid, "{e}");
        assert!(
            e.message.contains("CONDITION_NOT_MET")
                && e.call == "instanceGroupManagers.deleteInstances",
            "{e}"
        );
        let m = gke.members(&pool()).await.unwrap().unwrap();
        assert!(
            m.instances
                .iter()
                .any(|i| i.id == next && i.lifecycle != rota::cloud::Lifecycle::Terminating),
            "{m:?}"
        );

        // A resize (3 over two zones: the groups themselves) is followed the same way, and
        // its failure is the size's error.
        compute.fail_next_operation("resize", "RESOURCE_NOT_READY", "busy", 400);
        let before = ops(&compute);
        let e = gke.set_size(&pool(), 3, 6).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Transient, "{e}");
        assert!(e.message.contains("RESOURCE_NOT_READY"), "{e}");
        assert!(ops(&compute) > before);
        gke.set_size(&pool(), 3, 6).await.unwrap();
        assert_eq!(gke.members(&pool()).await.unwrap().unwrap().desired, 3);
    }

    /// What rota does not act on: a pool of the twin's name that is not rota's twin, a twin
    /// whose creation GKE failed (`Failed`, GKE's words), a custom image, and a pool whose
    /// answer names an instance group that is not one (nothing removed, the field named).
    #[tokio::test]
    async fn a_gke_twin_is_not_made_over_a_stranger_and_broken_answers_act_on_nothing() {
        use rota::cloud::managed::PoolStatus;
        let (d, compute, gke) = blue_green_doubles().await;
        let mut req = twin_request();
        let imposter = format!("{CLUSTER}/nodePools/{}", req.twin.name());
        d.add_pool(&imposter, "1.31.4-gke.1183000", "COS_CONTAINERD", 1, &ZONES);
        let e = gke.create_twin(&req).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Invalid, "{e}");
        assert!(
            e.message.contains("rota-twin-of") && e.message.contains("ALREADY_EXISTS"),
            "{e}"
        );
        assert_eq!(d.creates(), 0);

        req.twin = rota::cloud::managed::renamed(&pool(), "general-rota-v3");
        req.image = "projects/acme/global/images/node-7".into();
        let e = gke.create_twin(&req).await.unwrap_err();
        assert!(
            e.message.contains("node-7") && e.call == "nodePools.create",
            "{e}"
        );
        assert_eq!(d.creates(), 0);

        req.image = NEW.into();
        gke.create_twin(&req).await.unwrap();
        d.finish(false);
        let m = gke.members(&req.twin).await.unwrap().unwrap();
        assert_eq!(m.status, PoolStatus::Failed);
        assert!(
            m.issues.iter().any(|i| i.contains("CPUS")),
            "{:?}",
            m.issues
        );

        d.set_instance_groups(
            PATH,
            &["https://evil.example/compute/v1/projects/acme/zones/z/instances/i-1".to_string()],
        );
        let before = compute.requests().len();
        for e in [
            gke.members(&pool()).await.unwrap_err(),
            gke.remove_node(&pool(), "gke-prod-general-1")
                .await
                .unwrap_err(),
            gke.set_size(&pool(), 4, 6).await.unwrap_err(),
        ] {
            assert_eq!(e.kind, CloudErrorKind::Invalid, "{e}");
            assert!(
                e.message.contains("evil.example") && e.message.contains("instanceGroupUrls"),
                "{e}"
            );
        }
        assert_eq!(compute.requests().len(), before, "nothing asked of Compute");
        assert!(d.refused().is_empty(), "{:?}", d.refused());
    }

    /// GKE runs one operation at a time on a cluster: while a twin of another pool is being
    /// created, this pool's update, its size and a twin of its own are refused with
    /// `FAILED_PRECONDITION` ("Operation ... is currently creating node pool ..."). Each is
    /// `Transient`, naming what it waits on (the pool waits and asks again on a later pass,
    /// not a pause a person must clear), and asked again once the operation ended, each
    /// goes through.
    #[tokio::test]
    async fn a_cluster_busy_with_another_pools_operation_makes_the_pool_wait_not_stop() {
        let (d, _compute, gke) = blue_green_doubles().await;
        let batch = format!("{CLUSTER}/nodePools/batch");
        d.add_pool(&batch, "1.31.4-gke.1183000", "COS_CONTAINERD", 1, &ZONES);
        let batch_pool = rota::cloud::managed::renamed(&pool(), "batch");
        let batch_twin = rota::cloud::managed::TwinRequest {
            from: batch_pool.clone(),
            twin: rota::cloud::managed::renamed(&batch_pool, "batch-rota-2026-11-2"),
            ..twin_request()
        };
        gke.create_twin(&batch_twin).await.unwrap();
        let update = req(NEW, &token(6), MaxUnavailable::Count(1));
        let waits = [
            gke.start_update(&pool(), &update).await.unwrap_err(),
            gke.set_size(&pool(), 4, 6).await.unwrap_err(),
            gke.create_twin(&twin_request()).await.unwrap_err(),
        ];
        for e in &waits {
            assert_eq!(e.kind, CloudErrorKind::Transient, "{e}");
            assert!(
                e.message
                    .contains("currently creating node pool batch-rota-2026-11-2")
                    && e.message.contains("asks again on a later pass"),
                "{e}"
            );
        }
        assert_eq!(d.upgrades(), 0);
        d.finish(true);
        gke.start_update(&pool(), &update).await.unwrap();
        assert_eq!(d.upgrades(), 1);
        assert!(d.refused().is_empty(), "{:?}", d.refused());
    }

    /// A second update while one runs is refused as GKE refuses it; a failed operation is
    /// `Failed` with GKE's message; a custom image is refused before any write.
    #[tokio::test]
    async fn a_busy_pool_refuses_a_failed_upgrade_reports_and_custom_images_are_named() {
        let d = double().await;
        let gke = client(&d);
        let broken = "1.31.6-gke.1000000/UBUNTU_CONTAINERD";
        gke.start_update(&pool(), &req(broken, &token(3), MaxUnavailable::Count(1)))
            .await
            .unwrap();
        let busy = gke
            .start_update(&pool(), &req(NEW, &token(4), MaxUnavailable::Count(1)))
            .await
            .unwrap_err();
        // GKE refuses it while its upgrade runs: the pool waits and asks again, no pause.
        assert_eq!(busy.kind, CloudErrorKind::Transient, "{busy}");
        assert!(
            busy.message.contains("FAILED_PRECONDITION")
                && busy.message.contains("currently upgrading"),
            "{busy}"
        );
        d.finish(false);
        let st = gke.describe(&pool()).await.unwrap();
        assert_eq!(
            st.image, OLD,
            "a failed upgrade leaves the pool where it was"
        );
        let u = st.update.unwrap();
        assert_eq!(u.status, UpdateStatus::Failed);
        assert!(u.errors[0].contains("does not boot"), "{:?}", u.errors);
        let before = d.upgrades();
        let e = gke
            .start_update(
                &pool(),
                &req(
                    "projects/acme/global/images/node-7",
                    &token(5),
                    MaxUnavailable::Count(1),
                ),
            )
            .await
            .unwrap_err();
        assert!(e.message.contains("node-7"), "{e}");
        assert_eq!(d.upgrades(), before);
        assert!(d.refused().is_empty(), "{:?}", d.refused());
    }
}

mod aks {
    use super::*;
    use async_trait::async_trait;
    use azure_core::credentials::{AccessToken, TokenCredential, TokenRequestOptions};
    use rota::cloud::azure::AzureOptions;
    use rota::cloud::azure::agent_pools::{AksAgentPools, IMAGE_TAG, TOKEN_TAG};
    use rota::cloud::azure::arm::LroOptions;

    const SUB: &str = "1b2c3d4e-0000-4000-8000-000000000001";
    const OLD: &str = "AKSUbuntu-2204gen2containerd-202610.01.0";
    const NEW: &str = "AKSUbuntu-2204gen2containerd-202611.02.0";

    pub(super) fn path() -> String {
        format!(
            "/subscriptions/{SUB}/resourceGroups/rg-prod/providers/Microsoft.ContainerService/managedClusters/prod/agentPools/general"
        )
    }

    pub(super) fn pool() -> ManagedGroup {
        ManagedGroup::AksAgentPool {
            subscription_id: SUB.into(),
            resource_group: "rg-prod".into(),
            aks_cluster: "prod".into(),
            agent_pool: "general".into(),
        }
    }

    #[derive(Debug)]
    struct FixedToken;

    #[async_trait]
    impl TokenCredential for FixedToken {
        async fn get_token(
            &self,
            _: &[&str],
            _: Option<TokenRequestOptions<'_>>,
        ) -> azure_core::Result<AccessToken> {
            Ok(AccessToken::new(
                "aks-double-token".to_string(),
                azure_core::time::OffsetDateTime::now_utc() + azure_core::time::Duration::hours(1),
            ))
        }
    }

    pub(super) fn client(d: &AksDouble) -> AksAgentPools {
        AksAgentPools::new(
            Arc::new(FixedToken),
            AzureOptions {
                endpoint: d.url.clone(),
                retry: retries(),
                lro: LroOptions {
                    poll_interval: Duration::from_millis(1),
                    min_poll_interval: Duration::ZERO,
                    max_poll_interval: Duration::from_millis(1),
                    timeout: Duration::from_secs(30),
                },
            },
        )
        .unwrap()
    }

    async fn double() -> AksDouble {
        let d = AksDouble::start().await;
        d.add_pool(&path(), 4, OLD);
        d.set_latest(NEW);
        d
    }

    /// Read, start (the settings PUT waited for, then the POST), start again (nothing new),
    /// end: the pool on the newest image, the batch as maxSurge, the drain timeout and soak as
    /// AKS's own, the pool's tags kept beside rota's.
    #[tokio::test]
    async fn an_aks_upgrade_is_started_once_and_followed_to_its_end() {
        let d = double().await;
        let aks = client(&d);
        let st = aks.describe(&pool()).await.unwrap();
        assert_eq!(
            (st.image.as_str(), st.desired, st.max_unavailable),
            (OLD, 4, Some(MaxUnavailable::Percent(10)))
        );
        assert!(st.update.is_none());

        let t = token(1);
        let r = req(NEW, &t, MaxUnavailable::Percent(25));
        assert_eq!(aks.start_update(&pool(), &r).await.unwrap(), t);
        assert_eq!(aks.start_update(&pool(), &r).await.unwrap(), t);
        assert_eq!(d.upgrades(), 1, "{:?}", d.calls());
        let p = d.properties(&path());
        assert_eq!(
            p["upgradeSettings"],
            serde_json::json!({"maxSurge": "25%", "maxUnavailable": "0", "drainTimeoutInMinutes": 30,
                "nodeSoakDurationInMinutes": 2, "undrainableNodeBehavior": "Schedule"}),
            "drain.onTimeout pause: an undrainable node fails the upgrade (held to the models)"
        );
        assert_eq!(p["tags"]["team"], "payments");
        assert_eq!(
            (p["tags"][TOKEN_TAG].as_str(), p["tags"][IMAGE_TAG].as_str()),
            (Some(t.as_str()), Some(NEW))
        );

        let u = aks.describe(&pool()).await.unwrap().update.unwrap();
        assert_eq!(
            (u.token.as_deref(), u.status, u.image.as_str()),
            (Some(t.as_str()), UpdateStatus::InProgress, NEW)
        );
        d.finish(true);
        let st = aks.describe(&pool()).await.unwrap();
        assert_eq!(st.image, NEW);
        assert_eq!(st.update.unwrap().status, UpdateStatus::Successful);
        let calls = d.calls();
        let put = calls.iter().position(|c| c.starts_with("PUT ")).unwrap();
        let post = calls.iter().position(|c| c.starts_with("POST ")).unwrap();
        assert!(
            put < post && calls[put + 1..post].iter().any(|c| c.starts_with("GET ")),
            "the PUT is waited for before the POST: {calls:?}"
        );
        assert!(d.refused().is_empty(), "{:?}", d.refused());
    }

    /// A failed upgrade reports AKS's error and can be tried again; the way back from a
    /// finished one is a rollback to the recently used image (a PUT naming it, no POST); a pin AKS cannot reach is refused before any write;
    /// a second upgrade while one runs is refused.
    #[tokio::test]
    async fn a_failed_upgrade_rolls_back_and_unreachable_pins_are_refused() {
        let d = double().await;
        let aks = client(&d);
        aks.start_update(&pool(), &req(NEW, &token(2), MaxUnavailable::Count(1)))
            .await
            .unwrap();
        let busy = aks
            .start_update(&pool(), &req(OLD, &token(3), MaxUnavailable::Count(1)))
            .await
            .unwrap_err();
        assert_eq!(busy.kind, CloudErrorKind::Invalid, "{busy}");
        d.finish(false);
        let u = aks.describe(&pool()).await.unwrap().update.unwrap();
        assert_eq!(u.status, UpdateStatus::Failed);
        assert!(
            u.errors[0].starts_with("VMExtensionProvisioningError"),
            "{:?}",
            u.errors
        );
        // Tried again (a new token): the POST again, this time to its end.
        aks.start_update(&pool(), &req(NEW, &token(6), MaxUnavailable::Count(1)))
            .await
            .unwrap();
        d.finish(true);
        assert_eq!(aks.describe(&pool()).await.unwrap().image, NEW);

        let before = d.calls().iter().filter(|c| c.starts_with("POST ")).count();
        let back = token(4);
        aks.start_update(&pool(), &req(OLD, &back, MaxUnavailable::Count(1)))
            .await
            .unwrap();
        assert_eq!(
            d.calls().iter().filter(|c| c.starts_with("POST ")).count(),
            before,
            "a rollback is a PUT"
        );
        let u = aks.describe(&pool()).await.unwrap().update.unwrap();
        assert_eq!(
            (u.token.as_deref(), u.status, u.image.as_str()),
            (Some(back.as_str()), UpdateStatus::InProgress, OLD)
        );
        d.finish(true);
        assert_eq!(aks.describe(&pool()).await.unwrap().image, OLD);

        let writes = d.calls().iter().filter(|c| !c.starts_with("GET ")).count();
        let e = aks
            .start_update(
                &pool(),
                &req(
                    "AKSUbuntu-2204gen2containerd-202501.01.0",
                    &token(5),
                    MaxUnavailable::Count(1),
                ),
            )
            .await
            .unwrap_err();
        assert!(
            e.message.contains(NEW) && e.message.contains("202501.01.0"),
            "{e}"
        );
        assert_eq!(
            d.calls().iter().filter(|c| !c.starts_with("GET ")).count(),
            writes
        );
        assert!(d.refused().is_empty(), "{:?}", d.refused());
    }
}

mod aks_blue_green {
    use super::aks::{client, path as general_path, pool};
    use super::*;
    use rota::cloud::managed::{PoolStatus, TwinRequest, renamed};

    const SUB: &str = "1b2c3d4e-0000-4000-8000-000000000001";
    const OLD: &str = "AKSUbuntu-2204gen2containerd-202610.01.0";
    const NEW: &str = "AKSUbuntu-2204gen2containerd-202611.02.0";
    const NODE_RG: &str = "MC_rg-prod_prod_westeurope";

    fn pool_path(name: &str) -> String {
        general_path().replace("/agentPools/general", &format!("/agentPools/{name}"))
    }

    async fn double() -> AksDouble {
        let d = AksDouble::start().await;
        d.add_pool(&general_path(), 4, OLD);
        d.set_latest(NEW);
        d.set_node_resource_group(NODE_RG);
        d
    }

    fn twin_request(name: &str) -> TwinRequest {
        TwinRequest {
            from: pool(),
            twin: renamed(&pool(), name),
            image: NEW.into(),
            desired: 0,
            max: 4,
        }
    }

    /// `managedUpdate: blueGreen` on AKS through Microsoft.ContainerService 2026-08-01 and
    /// Microsoft.Compute 2024-07-01: the twin agent pool made in the old pool's shape on the
    /// newest node image, tagged rota's, once however often asked (a restarted client finds
    /// it); followed while AKS creates it (a size asked then waits for the next pass); sized by
    /// its `count`; its machines read from its scale set in the node resource group, named by
    /// host name with the node's providerID; found by its tag; one drained machine of the old
    /// pool removed by name (`deleteMachines`, the count with it; twice is once); the old pool
    /// deleted, `Deleting` then gone.
    #[tokio::test]
    async fn an_aks_twin_is_made_once_sized_and_the_old_pool_emptied_and_deleted() {
        let d = double().await;
        let aks = client(&d);
        // The name the planner gives an AKS twin of `general` (AKS takes 12 letters or digits).
        let name = rota::cloud::managed::twin_name_for(
            rota::fleet::owner::Owner::AksAgentPool,
            "general",
            "2026.11.2",
        );
        let req = twin_request(&name);
        let twin = req.twin.clone();
        aks.create_twin(&req).await.unwrap();
        let sent = d.created(&pool_path(&name)).expect("created")["properties"].clone();
        assert_eq!(
            (
                &sent["count"],
                &sent["nodeImageVersion"],
                &sent["vmSize"],
                &sent["enableAutoScaling"]
            ),
            (
                &serde_json::json!(0),
                &serde_json::json!(NEW),
                &serde_json::json!("Standard_D4s_v5"),
                &serde_json::json!(false)
            )
        );
        assert_eq!(
            sent["tags"],
            serde_json::json!({"team": "payments", "rota-twin-of": "general"})
        );
        assert_eq!(sent["nodeLabels"]["workload"], "general");
        aks.create_twin(&req).await.unwrap();
        client(&d).create_twin(&req).await.unwrap();
        assert_eq!(d.creates(), 1, "{:?}", d.calls());

        let m = aks.members(&twin).await.unwrap().unwrap();
        assert_eq!(
            (
                m.status,
                m.desired,
                m.instances.len(),
                m.twin_of.as_deref(),
                m.image.as_str()
            ),
            (PoolStatus::Creating, 0, 0, Some("general"), NEW)
        );
        let busy = aks.set_size(&twin, 2, 4).await.unwrap_err();
        assert_eq!(busy.kind, CloudErrorKind::Transient, "{busy}");
        d.settle(&pool_path(&name));

        aks.set_size(&twin, 2, 4).await.unwrap();
        let m = aks.members(&twin).await.unwrap().unwrap();
        assert_eq!((m.desired, m.instances.len()), (2, 2), "{m:?}");
        let i = &m.instances[0];
        assert_eq!(i.id, format!("aks-{name}-12345678-vmss000000"));
        assert_eq!(
            i.provider_id,
            format!(
                "azure:///subscriptions/{SUB}/resourceGroups/mc_rg-prod_prod_westeurope/providers/Microsoft.Compute/virtualMachineScaleSets/aks-{name}-12345678-vmss/virtualMachines/0"
            )
        );
        // The same size again writes nothing.
        let puts = |d: &AksDouble| d.calls().iter().filter(|c| c.starts_with("PUT ")).count();
        let before = puts(&d);
        aks.members(&twin).await.unwrap();
        aks.set_size(&twin, 2, 4).await.unwrap();
        assert_eq!(puts(&d), before);

        let found = aks.twins_of(&pool()).await.unwrap();
        assert_eq!(
            found.iter().map(|m| m.pool.name()).collect::<Vec<_>>(),
            [name.as_str()]
        );

        let old = aks.members(&pool()).await.unwrap().unwrap();
        assert_eq!(
            (old.desired, old.instances.len(), old.image.as_str()),
            (4, 4, OLD)
        );
        let gone = old.instances[1].id.clone();
        aks.remove_node(&pool(), &gone).await.unwrap();
        // The pool is at work after the removal: read once more, it is done.
        aks.members(&pool()).await.unwrap();
        aks.remove_node(&pool(), &gone).await.unwrap();
        let posts = d
            .calls()
            .iter()
            .filter(|c| c.contains("/deleteMachines"))
            .count();
        assert_eq!(posts, 1, "{:?}", d.calls());
        assert!(!d.machines(&general_path()).contains(&gone));
        assert_eq!(aks.members(&pool()).await.unwrap().unwrap().desired, 3);

        aks.delete_pool(&pool()).await.unwrap();
        aks.delete_pool(&pool()).await.unwrap();
        assert_eq!(
            aks.members(&pool()).await.unwrap().unwrap().status,
            PoolStatus::Deleting
        );
        d.settle(&general_path());
        assert!(aks.members(&pool()).await.unwrap().is_none());
        aks.delete_pool(&pool()).await.unwrap();
        assert_eq!(
            d.calls()
                .iter()
                .filter(|c| c.starts_with("DELETE "))
                .count(),
            1
        );
        assert!(d.refused().is_empty(), "{:?}", d.refused());
    }

    /// What rota does not act on, before anything is written: a pool of the twin's name that
    /// is not rota's twin, a twin name AKS does not take (the planner's `general-rota-…`), a
    /// pin that is not AKS's newest node image, and a machine the pool does not have.
    #[tokio::test]
    async fn an_aks_twin_is_not_made_over_a_stranger_an_invalid_name_or_an_old_image() {
        let d = double().await;
        let aks = client(&d);
        d.add_pool(&pool_path("general2"), 1, OLD);
        let e = aks
            .create_twin(&twin_request("general2"))
            .await
            .unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Invalid, "{e}");
        assert!(e.message.contains("rota-twin-of"), "{e}");

        // The readable name the planner gives other owners' twins is not one AKS takes.
        let planned = rota::cloud::managed::twin_name("general", "2026.11.2");
        let e = aks.create_twin(&twin_request(&planned)).await.unwrap_err();
        assert!(
            e.message.contains(&planned) && e.message.contains("at most 12"),
            "{e}"
        );

        let mut old_image = twin_request("general3");
        old_image.image = OLD.into();
        let e = aks.create_twin(&old_image).await.unwrap_err();
        assert!(e.message.contains(NEW) && e.message.contains(OLD), "{e}");
        assert_eq!(d.creates(), 0);

        let writes = d.calls().iter().filter(|c| !c.starts_with("GET ")).count();
        aks.remove_node(&pool(), "aks-general-12345678-vmss0000zz")
            .await
            .unwrap();
        assert_eq!(
            d.calls().iter().filter(|c| !c.starts_with("GET ")).count(),
            writes
        );
        assert!(d.refused().is_empty(), "{:?}", d.refused());
    }
}

/// The doubles' request check finds what the descriptions do not allow in the very bodies
/// the clients build: an unknown field, a read-only field sent back, a wrong api-version.
#[test]
fn the_descriptions_refuse_what_they_do_not_allow() {
    use crate::support::api_schemas::{Api, check_request};
    use rota::cloud::azure::agent_pools::put_body;
    use rota::cloud::gcp::node_pools::update_request;
    use serde_json::json;

    let path = "projects/acme/locations/europe-west1/clusters/prod/nodePools/general";
    let np = json!({"initialNodeCount": 2, "config": {"resourceLabels": {}}});
    let r = req(
        "1.31.5-gke.1023000/COS_CONTAINERD",
        "rota-1-a",
        MaxUnavailable::Count(1),
    );
    let body = update_request(path, &np, 2, &r).unwrap();
    let ok = check_request(Api::Container, "PUT", &format!("v1/{path}"), &body);
    assert!(ok.is_empty(), "{ok:?}");
    let mut bad = body.clone();
    bad["maxSurge"] = json!(1);
    let problems = check_request(Api::Container, "PUT", &format!("v1/{path}"), &bad);
    assert!(
        problems.iter().any(|p| p.contains("maxSurge")),
        "{problems:?}"
    );

    let aks = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c/agentPools/general";
    let current =
        json!({"properties": {"count": 2, "provisioningState": "Succeeded", "eTag": "1"}});
    let body = put_body(&current, &r, false);
    let url = format!("{aks}?api-version=2026-08-01");
    let ok = check_request(Api::Aks, "PUT", &url, &body);
    assert!(ok.is_empty(), "{ok:?}");
    let mut bad = body.clone();
    bad["properties"]["provisioningState"] = json!("Succeeded");
    let problems = check_request(Api::Aks, "PUT", &url, &bad);
    assert!(
        problems.iter().any(|p| p.contains("read-only")),
        "{problems:?}"
    );
    let old = check_request(
        Api::Aks,
        "PUT",
        &format!("{aks}?api-version=2024-01-01"),
        &body,
    );
    assert!(old.iter().any(|p| p.contains("api-version")), "{old:?}");
}

/// `rota clusters import --cloud gcp` and `--cloud azure`'s listing against the doubles: each
/// cluster's pools written as `clusters/<name>.yaml` into a fleet repo whose channel has GKE's
/// and AKS's version forms, valid, resolving to the very node pools and agent pools with the
/// labels GKE and AKS put on their nodes, a comment per pool on where it came from; a second
/// import writes the same bytes, and a hand edit is kept and named.
#[tokio::test]
async fn gke_and_aks_clusters_are_imported_valid_and_byte_stable() {
    use rota_core::onboard::{Outcome, outcome};

    let (g, a) = import_doubles().await;
    let sub = SUB_IMPORT;
    let gke = gke::client(&g);
    let aks = aks::client(&a);
    let gcp = [("project", "acme"), ("region", "europe-west1")];
    let azure = [
        ("subscriptionId", sub),
        ("resourceGroup", "rg-prod"),
        ("aksCluster", "aks-prod"),
    ];
    let found_gke = || async {
        let pools = gke
            .list_cluster_pools("acme", "europe-west1", "prod-euw1")
            .await;
        found("prod-euw1", "gcp", &gcp, pools.unwrap())
    };
    let found_aks = || async {
        let pools = aks.list_cluster_pools(sub, "rg-prod", "aks-prod").await;
        found("prod-weu", "azure", &azure, pools.unwrap())
    };

    let repo = fleet_with_gke_and_aks_forms();
    let mut texts = Vec::new();
    for f in [found_gke().await, found_aks().await] {
        let rel = format!("clusters/{}.yaml", f.name);
        let Outcome::New { text } = outcome(&rel, None, &f).unwrap() else {
            panic!("no file yet")
        };
        std::fs::write(repo.path().join(&rel), &text).unwrap();
        texts.push(text);
    }
    assert!(
        texts[0].contains(
            "# GKE node pool general of cluster prod-euw1 in acme/europe-west1 (nodePools.list)"
        ),
        "{}",
        texts[0]
    );
    assert!(
        texts[0].contains("gcp: {project: acme, region: europe-west1}"),
        "{}",
        texts[0]
    );
    assert!(!texts[0].contains("staging"), "{}", texts[0]);
    assert!(texts[1].contains("a System pool"), "{}", texts[1]);
    let fleet = rota::fleet::load_dir(repo.path()).unwrap_or_else(|d| {
        panic!(
            "the imported files do not validate:\n{d}\n{}\n{}",
            texts[0], texts[1]
        )
    });
    let gke_pool = |n: &str| ManagedGroup::GkeNodePool {
        project: "acme".into(),
        location: "europe-west1".into(),
        gke_cluster: "prod-euw1".into(),
        node_pool: n.into(),
    };
    let aks_pool = |n: &str| ManagedGroup::AksAgentPool {
        subscription_id: sub.into(),
        resource_group: "rg-prod".into(),
        aks_cluster: "aks-prod".into(),
        agent_pool: n.into(),
    };
    let gke_label = "cloud.google.com/gke-nodepool";
    let aks_label = "kubernetes.azure.com/agentpool";
    assert_eq!(
        resolved(&fleet, "prod-euw1"),
        [
            managed(gke_pool("general"), gke_label),
            managed(gke_pool("spot"), gke_label)
        ]
    );
    assert_eq!(
        resolved(&fleet, "prod-weu"),
        [
            managed(aks_pool("general"), aks_label),
            managed(aks_pool("system"), aks_label)
        ]
    );

    // Again: the same bytes. A hand edit is kept, and the owners' view named only where it differs.
    assert_eq!(
        outcome(
            "clusters/prod-euw1.yaml",
            Some(&texts[0]),
            &found_gke().await
        )
        .unwrap(),
        Outcome::Unchanged
    );
    assert_eq!(
        outcome(
            "clusters/prod-weu.yaml",
            Some(&texts[1]),
            &found_aks().await
        )
        .unwrap(),
        Outcome::Unchanged
    );
    let edited = texts[1].replace("mode: readOnly", "mode: reconcile");
    match outcome("clusters/prod-weu.yaml", Some(&edited), &found_aks().await).unwrap() {
        Outcome::Differs { changes, .. } => assert!(changes.is_empty(), "{changes:?}"),
        other => panic!("a hand edit is not overwritten: {other:?}"),
    }
}

/// `rota clusters import --cloud gcp`'s self-managed groups against the Compute double (held
/// to Compute v1): the groups whose template carries the cluster's kops label are listed
/// beside the GKE node pools, each with a comment and its zone, picked by kops's instance
/// group label; GKE's own groups and another cluster's are not; the file validates and a
/// second import writes the same bytes.
#[tokio::test]
async fn labelled_migs_are_imported_beside_gke_node_pools_and_byte_stable() {
    use crate::support::gcp_double::{GcpDouble, MigSpec};
    use rota::cloud::gcp::GcpCredentials;
    use rota::cloud::gcp::node_pools::{GkeNodePools, GkeOptions};
    use rota_core::onboard::{Outcome, outcome};

    let (g, _a) = import_doubles().await;
    let compute = GcpDouble::start().await;
    let spec = |name: &str, zone: &str| MigSpec {
        project: "acme".into(),
        name: name.into(),
        zone: Some(zone.into()),
        region: None,
        target_size: 2,
        image: "projects/acme/global/images/general-2026-11-1".into(),
        autoscaler: None,
        regional_template: false,
        update_policy: "OPPORTUNISTIC",
        autoscaler_mode: "OFF",
    };
    let ours = compute.add_mig(&spec("nodes-europe-west1-b", "europe-west1-b"));
    compute.label_template(
        &ours,
        &[
            ("k8s-io-cluster-name", "prod-euw1"),
            ("k8s-io-instance-group", "nodes-europe-west1-b"),
        ],
    );
    // GKE's own group (its template labelled goog-gke-node) and another cluster's.
    compute.add_mig(&spec("gke-prod-euw1-general-1a2b-grp", "europe-west1-b"));
    let theirs = compute.add_mig(&spec("nodes-staging", "europe-west1-c"));
    compute.label_template(&theirs, &[("k8s-io-cluster-name", "staging")]);
    let client = GkeNodePools::new(GkeOptions {
        endpoint: Some(g.url.clone()),
        compute_endpoint: Some(compute.url.clone()),
        credentials: GcpCredentials::Anonymous,
        retry: retries(),
    })
    .unwrap();
    let gcp = [("project", "acme"), ("region", "europe-west1")];
    let found_all = || async {
        let mut pools = client
            .list_cluster_pools("acme", "europe-west1", "prod-euw1")
            .await
            .unwrap();
        pools.extend(client.list_cluster_migs("acme", "prod-euw1").await.unwrap());
        found("prod-euw1", "gcp", &gcp, pools)
    };
    let f = found_all().await;
    let names: Vec<&str> = f.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["general", "spot", "nodes-europe-west1-b"]);
    let (text, mig) = imported(
        &f,
        "# managed instance group nodes-europe-west1-b in europe-west1-b, its template labelled k8s-io-cluster-name=prod-euw1 (instanceGroupManagers.aggregatedList)",
        "nodes-europe-west1-b",
    );
    assert_eq!(
        mig.group,
        rota::cloud::GroupRef::Gcp {
            project: "acme".into(),
            zone: Some("europe-west1-b".into()),
            region: None,
            instance_group_manager: "nodes-europe-west1-b".into(),
        }
    );
    assert_eq!(
        mig.node_selector,
        std::collections::BTreeMap::from([(
            "kops.k8s.io/instancegroup".to_string(),
            "nodes-europe-west1-b".to_string()
        )])
    );
    assert_eq!(
        outcome("clusters/prod-euw1.yaml", Some(&text), &found_all().await).unwrap(),
        Outcome::Unchanged
    );
}

/// `rota clusters import --cloud azure`'s self-managed scale sets against the ARM double
/// (held to Microsoft.Compute 2024-07-01): the resource group's scale sets tagged as the
/// cluster's (Cluster API for Azure's tag) are listed beside the AKS agent pools, picked by
/// the autoscaler's node template tags; AKS's own and another cluster's are not; the file
/// validates and a second import writes the same bytes.
#[tokio::test]
async fn tagged_scale_sets_are_imported_beside_aks_agent_pools_and_byte_stable() {
    use crate::support::azure_double::{AzureDouble, TOKEN};
    use azure_core::credentials::{AccessToken, TokenCredential, TokenRequestOptions};
    use rota::cloud::azure::AzureOptions;
    use rota::cloud::azure::agent_pools::AksAgentPools;
    use rota_core::onboard::{Outcome, outcome};

    #[derive(Debug)]
    struct ArmToken;
    #[async_trait::async_trait]
    impl TokenCredential for ArmToken {
        async fn get_token(
            &self,
            _: &[&str],
            _: Option<TokenRequestOptions<'_>>,
        ) -> azure_core::Result<AccessToken> {
            Ok(AccessToken::new(
                TOKEN.to_string(),
                azure_core::time::OffsetDateTime::now_utc() + azure_core::time::Duration::hours(1),
            ))
        }
    }
    let (_g, a) = import_doubles().await;
    let arm = AzureDouble::start().await;
    let sub = SUB_IMPORT;
    let image = serde_json::json!({"publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": "latest"});
    for name in ["prod-md-0", "aks-general-1-vmss", "staging-md-0"] {
        arm.create_scale_set(sub, "rg-prod", name, 2, 10, image.clone(), "Manual");
    }
    arm.set_tags(
        sub,
        "rg-prod",
        "prod-md-0",
        &[
            (
                "sigs.k8s.io_cluster-api-provider-azure_cluster_aks-prod",
                "owned",
            ),
            ("k8s.io_cluster-autoscaler_node-template_label_pool", "md-0"),
        ],
    );
    arm.set_tags(
        sub,
        "rg-prod",
        "staging-md-0",
        &[("kubernetes.io_cluster_staging", "owned")],
    );
    // aks-general-1-vmss keeps the double's AKS tag (aks-managed-poolName): AKS's own.
    let compute = AksAgentPools::new(
        Arc::new(ArmToken),
        rota::cloud::azure::AzureOptions {
            endpoint: arm.url.clone(),
            retry: retries(),
            ..AzureOptions::default()
        },
    )
    .unwrap();
    let aks = aks::client(&a);
    let azure = [
        ("subscriptionId", sub),
        ("resourceGroup", "rg-prod"),
        ("aksCluster", "aks-prod"),
    ];
    let found_all = || async {
        let mut pools = aks
            .list_cluster_pools(sub, "rg-prod", "aks-prod")
            .await
            .unwrap();
        pools.extend(
            compute
                .list_cluster_scale_sets(sub, "rg-prod", "aks-prod")
                .await
                .unwrap(),
        );
        found("prod-weu", "azure", &azure, pools)
    };
    let f = found_all().await;
    let names: Vec<&str> = f.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["general", "system", "prod-md-0"]);
    let (text, ss) = imported(
        &f,
        "# scale set prod-md-0 in resource group rg-prod, tagged sigs.k8s.io_cluster-api-provider-azure_cluster_aks-prod (VirtualMachineScaleSets_List)",
        "prod-md-0",
    );
    assert_eq!(
        ss.group,
        rota::cloud::GroupRef::Azure {
            subscription_id: sub.into(),
            resource_group: "rg-prod".into(),
            scale_set: "prod-md-0".into(),
        }
    );
    assert_eq!(
        ss.node_selector,
        std::collections::BTreeMap::from([("pool".to_string(), "md-0".to_string())])
    );
    assert_eq!(
        outcome("clusters/prod-weu.yaml", Some(&text), &found_all().await).unwrap(),
        Outcome::Unchanged
    );
}

const SUB_IMPORT: &str = "1b2c3d4e-0000-4000-8000-000000000001";

/// A GKE cluster `prod-euw1` of two node pools (beside another cluster's) and an AKS cluster
/// `aks-prod` of a System and a User agent pool.
async fn import_doubles() -> (GkeDouble, AksDouble) {
    let g = GkeDouble::start().await;
    for name in ["general", "spot"] {
        g.add_pool(
            &format!("projects/acme/locations/europe-west1/clusters/prod-euw1/nodePools/{name}"),
            "1.31.4-gke.1183000",
            "COS_CONTAINERD",
            2,
            &["europe-west1-b"],
        );
    }
    // Another cluster's pool is not this cluster's.
    g.add_pool(
        "projects/acme/locations/europe-west1/clusters/staging/nodePools/general",
        "1.31.4-gke.1183000",
        "COS_CONTAINERD",
        1,
        &["europe-west1-b"],
    );
    let a = AksDouble::start().await;
    let sub = SUB_IMPORT;
    let ap = |n: &str| {
        format!(
            "/subscriptions/{sub}/resourceGroups/rg-prod/providers/Microsoft.ContainerService/managedClusters/aks-prod/agentPools/{n}"
        )
    };
    a.add_pool(&ap("system"), 3, "AKSUbuntu-2204gen2containerd-202611.02.0");
    a.set_property(&ap("system"), "mode", serde_json::json!("System"));
    a.add_pool(
        &ap("general"),
        4,
        "AKSUbuntu-2204gen2containerd-202611.02.0",
    );

    (g, a)
}

/// A fleet repo whose channel `general` has GKE's and AKS's version forms (and a GCP and an
/// Azure image for self-managed groups), a wave for
/// `ring: early`, and no cluster yet.
fn fleet_with_gke_and_aks_forms() -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(repo.path().join("clusters")).unwrap();
    std::fs::write(
        repo.path().join("fleet.yaml"),
        r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {name: acme}
spec:
  images:
    general:
      versions:
        "2026.11.2":
          gke: {nodeVersion: "1.31.5-gke.1023000", imageType: COS_CONTAINERD}
          aks: {nodeImageVersion: "AKSUbuntu-2204gen2containerd-202611.02.0"}
          gcp: projects/acme/global/images/general-2026-11-2
          azure: /subscriptions/1b2c3d4e-0000-4000-8000-000000000001/resourceGroups/images/providers/Microsoft.Compute/galleries/acme/images/general/versions/2026.11.2
  waves:
    - name: early
      clusterSelector: {matchLabels: {ring: early}}
      images: {general: "2026.11.2"}
"#,
    )
    .unwrap();
    repo
}

/// The file an import writes for `f` (`clusters/<name>.yaml`, new), written into a fleet with
/// the GKE and AKS version forms: it says where `pool` came from (`comment`), and the fleet
/// validates with it. Returns the file's text and `pool` as the fleet resolves it.
fn imported(
    f: &rota_core::onboard::FoundCluster,
    comment: &str,
    pool: &str,
) -> (String, rota::fleet::resolved::DesiredPool) {
    use rota_core::onboard::{Outcome, outcome};
    let repo = fleet_with_gke_and_aks_forms();
    let rel = format!("clusters/{}.yaml", f.name);
    let Outcome::New { text } = outcome(&rel, None, f).unwrap() else {
        panic!("no file yet")
    };
    std::fs::write(repo.path().join(&rel), &text).unwrap();
    assert!(text.contains(comment), "{text}");
    let fleet = rota::fleet::load_dir(repo.path())
        .unwrap_or_else(|d| panic!("the imported file does not validate:\n{d}\n{text}"));
    let resolved = fleet
        .resolve_cluster(&f.name)
        .unwrap()
        .pools
        .into_iter()
        .find(|p| p.name == pool)
        .unwrap_or_else(|| panic!("no pool {pool} in:\n{text}"));
    (text, resolved)
}

/// `pool` as a resolved pool's (group, node selector), its nodes picked by `label: NAME`.
fn managed(
    pool: ManagedGroup,
    label: &str,
) -> (
    rota::cloud::GroupRef,
    std::collections::BTreeMap<String, String>,
) {
    let selector = std::collections::BTreeMap::from([(label.to_string(), pool.name().to_string())]);
    (rota::cloud::GroupRef::Managed(pool), selector)
}

/// Cluster `name`'s pools as the fleet resolves them: (group, node selector), by group.
fn resolved(
    fleet: &rota::fleet::Fleet,
    name: &str,
) -> Vec<(
    rota::cloud::GroupRef,
    std::collections::BTreeMap<String, String>,
)> {
    let mut v: Vec<_> = fleet
        .resolve_cluster(name)
        .unwrap()
        .pools
        .iter()
        .map(|p| (p.group.clone(), p.node_selector.clone()))
        .collect();
    v.sort_by_key(|(g, _)| g.to_string());
    v
}

/// The Cluster an import writes for `pools` found in `cloud` (`fields` its section), in wave
/// `ring: early`, read-only.
fn found(
    name: &str,
    cloud: &'static str,
    fields: &[(&'static str, &str)],
    pools: Vec<rota_core::onboard::FoundPool>,
) -> rota_core::onboard::FoundCluster {
    rota_core::onboard::FoundCluster {
        name: name.into(),
        labels: std::collections::BTreeMap::from([("ring".into(), "early".into())]),
        cloud: rota_core::onboard::FoundCloud {
            cloud,
            fields: fields.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        },
        channel: "general".into(),
        pools,
        read_only: true,
        command: format!("rota clusters import {name}"),
    }
}
