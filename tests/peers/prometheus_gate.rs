//! The Prometheus gate against a real Prometheus (Debian's `prometheus`, installed by
//! `scripts/test`) scraping a target this test binary serves, and against servers that are
//! not Prometheus. Last, the controller on the simulated fleet with a pool gated by it: a
//! high error rate reported by the real Prometheus fails the batch.
//!
//! Real time throughout (Prometheus scrapes on its own clock): each test takes seconds.

use crate::support::prometheus as prom;
use crate::support::sim_fleet;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use rota::cloud::{GroupRef, Lifecycle, NodeGroups};
use rota::controller::{Config, Controller};
use rota::fleet::duration::GoDuration;
use rota::fleet::resolved::{
    BatchSize, Cloud, EffectivePolicy, GateCheck, NoData, OnGateFailure, ResolvedGate,
};
use rota::gates::prometheus::{PrometheusGate, QueryError};
use rota::gates::{Gate, GateInputs, Sample};
use rota::kube::crd::{self, NodePoolRotation, NodePoolRotationSpec};
use rota::rotate::{Phase, Stage};
use rota::sim::faults::FaultProfile;
use rota::sim::scenario::{ClusterScenario, PoolScenario, Scenario, WorkloadProfile};
use rota::sim::world::Fleet;
use tokio::time::Instant;

fn gate(address: &str, query: &str, max: f64, on_no_data: NoData) -> ResolvedGate {
    ResolvedGate {
        name: "error-rate".into(),
        interval: GoDuration::from_secs(30),
        samples: 2,
        failure_limit: 0,
        check: GateCheck::Prometheus {
            address: address.into(),
            query: query.into(),
            min: None,
            max: Some(max),
            on_no_data,
        },
    }
}

async fn sample(spec: &ResolvedGate) -> Sample {
    let g = rota::gates::build(spec).unwrap();
    let inputs = GateInputs {
        pods: &rota::gates::PodTally::default(),
        events: &[],
        now: Utc::now(),
    };
    g.sample(&inputs).await
}

/// The shared Prometheus with `app` at `ratio` (blocking setup off the runtime).
async fn prometheus_with(app: &'static str, ratio: f64) -> String {
    tokio::task::spawn_blocking(move || prom::app_at(app, ratio).0.url())
        .await
        .unwrap()
}

#[tokio::test]
async fn the_gate_passes_at_a_low_error_rate() {
    let url = prometheus_with("low", 0.002).await;
    let q = prom::error_ratio_query("low");
    match sample(&gate(&url, &q, 0.05, NoData::Fail)).await {
        Sample::Pass(d) => {
            assert!(d.starts_with("0.002 within max 0.05"), "{d}");
            assert!(d.contains(&q), "{d}");
        }
        s => panic!("{s:?}"),
    }
}

#[tokio::test]
async fn the_gate_fails_at_a_high_error_rate() {
    let url = prometheus_with("high", 0.3).await;
    let q = prom::error_ratio_query("high");
    match sample(&gate(&url, &q, 0.05, NoData::Pass)).await {
        Sample::Fail(d) => assert!(d.starts_with("0.3 above max 0.05"), "{d}"),
        s => panic!("{s:?}"),
    }
    // Per series: the 500s of the app, by code, against a bound on the request rate.
    let by_code = r#"sum by (code) (rate(http_requests_total{app="high"}[4s]))"#;
    let mut g = gate(&url, by_code, 1e6, NoData::Fail);
    if let GateCheck::Prometheus { min, max, .. } = &mut g.check {
        *max = None;
        *min = Some(1.0);
    }
    match sample(&g).await {
        // No series is below 1 request/s: 200s and 500s both flow.
        Sample::Pass(d) => assert!(d.starts_with("2 series from"), "{d}"),
        s => panic!("{s:?}"),
    }
}

#[tokio::test]
async fn on_no_data_decides_for_a_query_without_series_and_for_nan() {
    let url = prometheus_with("idle", f64::NAN).await;
    let none = r#"sum(rate(http_requests_total{app="nobody"}[4s]))"#;
    match sample(&gate(&url, none, 0.05, NoData::Fail)).await {
        Sample::Fail(d) => assert!(
            d.starts_with("no data (empty result) (onNoData: fail)"),
            "{d}"
        ),
        s => panic!("{s:?}"),
    }
    match sample(&gate(&url, none, 0.05, NoData::Pass)).await {
        Sample::Pass(d) => assert!(
            d.starts_with("no data (empty result) (onNoData: pass)"),
            "{d}"
        ),
        s => panic!("{s:?}"),
    }
    // An app without traffic: its error ratio is 0/0.
    let idle = prom::error_ratio_query("idle");
    match sample(&gate(&url, &idle, 0.05, NoData::Fail)).await {
        Sample::Fail(d) => assert!(d.starts_with("no data (NaN) (onNoData: fail)"), "{d}"),
        s => panic!("{s:?}"),
    }
    assert!(matches!(
        sample(&gate(&url, &idle, 0.05, NoData::Pass)).await,
        Sample::Pass(_)
    ));
}

#[tokio::test]
async fn prometheus_errors_name_the_gate_and_the_query() {
    let url = prometheus_with("errors", 0.0).await;
    for (query, want) in [
        ("sum(rate(http_requests_total[4s]", "bad_data"),
        (r#"http_requests_total{app="errors"}[10s]"#, "range vector"),
        (r#""a string""#, "returns a string"),
    ] {
        match sample(&gate(&url, query, 0.05, NoData::Pass)).await {
            Sample::Fail(d) => {
                assert!(d.contains("prometheus gate error-rate"), "{d}");
                assert!(d.contains(&format!("query `{query}`")), "{d}");
                assert!(d.contains(want), "{query}: {d}");
            }
            s => panic!("{query}: {s:?}"),
        }
    }
}

/// The query error a server that is not Prometheus causes, and the failing sample.
async fn impostor_error(response: Option<Vec<u8>>, timeout: Duration) -> QueryError {
    let port = prom::impostor(response);
    let spec = gate(
        &format!("http://127.0.0.1:{port}"),
        "up",
        0.05,
        NoData::Pass,
    );
    let g = PrometheusGate::new(&spec).unwrap().with_timeout(timeout);
    let e = g.query(Utc::now()).await.unwrap_err();
    assert_eq!((e.gate.as_str(), e.query.as_str()), ("error-rate", "up"));
    let inputs = GateInputs {
        pods: &rota::gates::PodTally::default(),
        events: &[],
        now: Utc::now(),
    };
    match g.sample(&inputs).await {
        Sample::Fail(d) => assert!(d.contains("prometheus gate error-rate: query `up`"), "{d}"),
        s => panic!("a server that is not Prometheus passed the gate: {s:?}"),
    }
    e.error
}

#[tokio::test]
async fn a_server_that_is_not_prometheus_is_a_gate_error_never_a_pass() {
    let t = Duration::from_secs(5);
    let login = prom::response(
        "200 OK",
        "text/html",
        b"<!doctype html><title>Sign in</title>",
    );
    let e = impostor_error(Some(login), t).await;
    assert!(
        matches!(&e, QueryError::Malformed(m) if m.contains("not JSON") && m.contains("Sign in")),
        "{e:?}"
    );

    let wrong_types = prom::response(
        "200 OK",
        "application/json",
        br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,0.001]}]}}"#,
    );
    let e = impostor_error(Some(wrong_types), t).await;
    assert!(
        matches!(&e, QueryError::Malformed(m) if m.contains("(the value) is not a string")),
        "{e:?}"
    );

    let refused = prom::response(
        "503 Service Unavailable",
        "application/json",
        br#"{"status":"error","errorType":"unavailable","error":"too many queries"}"#,
    );
    let e = impostor_error(Some(refused), t).await;
    assert_eq!(
        e,
        QueryError::Api {
            http_status: 503,
            error_type: "unavailable".into(),
            error: "too many queries".into()
        }
    );

    // 5 MiB of a valid-looking answer: refused on its declared length...
    let mut huge = br#"{"status":"success","data":{"resultType":"vector","result":["#.to_vec();
    huge.extend(std::iter::repeat_n(b' ', 5 << 20));
    huge.extend(b"]}}");
    let e = impostor_error(Some(prom::response("200 OK", "application/json", &huge)), t).await;
    assert!(matches!(e, QueryError::TooLarge(_)), "{e:?}");
    // ... and without one, while reading.
    let mut unsized_answer =
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n".to_vec();
    unsized_answer.extend(&huge);
    let e = impostor_error(Some(unsized_answer), t).await;
    assert!(matches!(e, QueryError::TooLarge(_)), "{e:?}");

    // A server that accepts and never answers.
    let e = impostor_error(None, Duration::from_millis(300)).await;
    assert_eq!(e, QueryError::Timeout(Duration::from_millis(300)));
}

// ------------------------------------------------------------------------------ controller

/// Simulated time runs this much faster than real time, in the fleet and the controller
/// alike: a gate `interval` of 60s is one real second between Prometheus queries.
const SPEED: f64 = 60.0;
const OLD: &str = "ami-0000000000000old1";
const NEW: &str = "ami-0000000000000new2";

fn group() -> GroupRef {
    GroupRef::Aws {
        region: "us-east-1".into(),
        auto_scaling_group: "general".into(),
    }
}

struct Sim {
    fleet: Fleet,
    client: kube::Client,
}

/// One cluster, one pool of 3 nodes, a replicated web tier with a PDB; settled.
async fn sim() -> Sim {
    let workloads = WorkloadProfile::from_yaml(
        r#"
nodes: {perPool: 3, registerAfter: 10s, readyAfter: 10s}
deployments:
  - {name: web, namespace: shop, replicas: 3, pdb: {maxUnavailable: 1}, readyAfter: 5s}
"#,
        "workloads",
    )
    .unwrap();
    let scenario = Scenario {
        clusters: vec![ClusterScenario {
            name: "sim-1".into(),
            cloud: Cloud::Aws,
            pools: vec![PoolScenario {
                name: "general".into(),
                group: group(),
                image: OLD.into(),
                node_selector: BTreeMap::from([("rota.dev/pool".into(), "general".into())]),
                nodes: 3,
            }],
        }],
        workloads,
        faults: FaultProfile::from_yaml("boot: {min: 10s, max: 20s}", "faults").unwrap(),
        seed: 1,
    };
    let fleet = Fleet::start(&scenario, SPEED).await.unwrap();
    let client = rota::kube::sim::client(fleet.store("sim-1").unwrap().clone());
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd::definition())
        .await
        .unwrap();
    // Settled: every web pod Ready (polled; the deadline only catches a broken setup).
    let end = Instant::now() + prom::SETUP_DEADLINE;
    loop {
        let pods = Api::<Pod>::namespaced(client.clone(), "shop")
            .list(&ListParams::default())
            .await
            .unwrap();
        let ready = pods
            .items
            .iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        if ready == 3 {
            break;
        }
        assert!(Instant::now() < end, "the web pods never got Ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Sim { fleet, client }
}

fn rotation(gate: ResolvedGate, on_gate_failure: OnGateFailure) -> NodePoolRotation {
    let mut policy = EffectivePolicy {
        batch: BatchSize::Count(1),
        on_gate_failure,
        ..EffectivePolicy::default()
    };
    // Long enough for a few samples after the first batch.
    policy.batch_soak = GoDuration::from_secs(240);
    sim_fleet::npr(NodePoolRotationSpec {
        gates: vec![gate],
        ..sim_fleet::spec("general", group(), "rota.dev/pool", NEW, policy)
    })
}

async fn status(s: &Sim) -> rota::kube::crd::NodePoolRotationStatus {
    Api::<NodePoolRotation>::all(s.client.clone())
        .get("general")
        .await
        .unwrap()
        .status
        .unwrap_or_default()
}

/// Runs the controller until the pool settles. At the soak of batch 1 (batch 1 went through
/// its gate check at a low error rate and replaced its node), the app's error rate goes up.
/// Returns the final status and the log of phases and messages.
async fn run_with_error_spike(
    app: &'static str,
    on_gate_failure: OnGateFailure,
) -> (Sim, rota::kube::crd::NodePoolRotationStatus, String) {
    let url = prometheus_with(app, 0.002).await;
    let s = sim().await;
    let mut g = gate(&url, &prom::error_ratio_query(app), 0.05, NoData::Fail);
    g.interval = GoDuration::from_secs(60);
    Api::<NodePoolRotation>::all(s.client.clone())
        .create(&PostParams::default(), &rotation(g, on_gate_failure))
        .await
        .unwrap();
    let mut cfg = Config::new("0.1.0", "test");
    cfg.events = false;
    cfg.speed = SPEED;
    let mut c = Controller::new(s.client.clone(), Arc::new(s.fleet.cloud.clone()), cfg);
    let mut log = String::new();
    let mut raised = false;
    let end = Instant::now() + Duration::from_secs(120);
    loop {
        c.step().await;
        let st = status(&s).await;
        let line = format!("{:?}: {}\n", st.phase, st.message);
        if !log.ends_with(&line) {
            log.push_str(&line);
        }
        let stage = st.checkpoint.as_ref().map(|c| &c.stage);
        if !raised && matches!(stage, Some(Stage::Soaking { batch, .. }) if batch.number == 1) {
            let app = app.to_string();
            tokio::task::spawn_blocking(move || prom::shared().1.app(&app, 0.5))
                .await
                .unwrap();
            log.push_str("-- error rate raised to 0.5\n");
            raised = true;
        }
        if raised && matches!(st.phase, Phase::Paused | Phase::Failed | Phase::Succeeded) {
            return (s, st, log);
        }
        assert!(
            Instant::now() < end,
            "the pool did not settle within 2 minutes\n{log}"
        );
        c.wait(Instant::now() + Duration::from_secs(1), true).await;
    }
}

/// Steps a controller until the checkpoint holds no pipelined batch any more.
async fn until_the_pipelined_batch_is_undone(
    s: &Sim,
    mut st: rota::kube::crd::NodePoolRotationStatus,
) -> rota::kube::crd::NodePoolRotationStatus {
    let mut cfg = Config::new("0.1.0", "test");
    cfg.events = false;
    cfg.speed = SPEED;
    let mut c = Controller::new(s.client.clone(), Arc::new(s.fleet.cloud.clone()), cfg);
    let end = Instant::now() + Duration::from_secs(120);
    while st.checkpoint.as_ref().is_some_and(|c| c.next.is_some()) {
        assert!(
            Instant::now() < end,
            "the pipelined batch was not undone: {}",
            st.message
        );
        c.step().await;
        c.wait(Instant::now() + Duration::from_secs(1), true).await;
        st = status(s).await;
    }
    st
}

/// The issue's "done when": the Prometheus gate fails a batch when the real Prometheus
/// reports a high error rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_error_rate_from_prometheus_pauses_the_pool_after_the_first_batch() {
    let (s, st, log) = run_with_error_spike("ctl-pause", OnGateFailure::Pause).await;
    assert_eq!(st.phase, Phase::Paused, "{log}");
    assert!(
        st.message.contains("health gate error-rate failed"),
        "{}\n{log}",
        st.message
    );
    assert!(
        st.message.contains("above max 0.05"),
        "{}\n{log}",
        st.message
    );
    // Batch 1 passed its gate check at the low rate (it reached its soak) and replaced one
    // node; nothing was disrupted after it. Batch 2 may have been brought up during batch
    // 1's soak (pipelining): it disrupted nothing and is undone while the pool is halted.
    // (Its Ready node counts as on the target until it is gone: the live instances below
    // are what shows the pool's state.)
    let cp = st.checkpoint.as_ref().unwrap();
    assert!(cp.batches_started <= 2, "{log}");
    let paused = st.conditions.iter().find(|c| c.type_ == "Paused").unwrap();
    assert_eq!(paused.reason, "GateFailed", "{log}");
    let st = until_the_pipelined_batch_is_undone(&s, st).await;
    assert_eq!(st.phase, Phase::Paused, "{}", st.message);
    let g = s.fleet.cloud.describe(&group()).await.unwrap();
    let live: Vec<_> = g
        .instances
        .iter()
        .filter(|i| i.lifecycle != Lifecycle::Terminating)
        .collect();
    assert_eq!(live.len(), 3, "{live:?}");
    assert_eq!(
        live.iter().filter(|i| i.image == NEW).count(),
        1,
        "{live:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_on_gate_failure_rollback_the_pool_goes_back_to_the_old_image() {
    let (s, st, log) = run_with_error_spike("ctl-rollback", OnGateFailure::Rollback).await;
    assert_eq!(st.phase, Phase::Failed, "{}\n{log}", st.message);
    assert!(
        st.message.contains("rolled back from") && st.message.contains("health gate error-rate"),
        "{}\n{log}",
        st.message
    );
    assert!(st.message.contains("above max 0.05"), "{}", st.message);
    let g = s.fleet.cloud.describe(&group()).await.unwrap();
    let live: Vec<_> = g
        .instances
        .iter()
        .filter(|i| i.lifecycle != Lifecycle::Terminating)
        .collect();
    assert_eq!(live.len(), 3, "{live:?}\n{log}");
    assert!(live.iter().all(|i| i.image == OLD), "{live:?}\n{log}");
}
