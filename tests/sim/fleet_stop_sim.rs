//! `rota stop` end to end on the simulated fleet: the order written and pushed by the command
//! in a working clone, the agents reading the stop ref at their next poll, the controllers
//! holding their pools, a restart while stopped, and the clear.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use rota::cli::stop::{StopArgs, order};
use rota::report::State;

use super::agent_sim::{LONG, Setup, commit, fleet_yaml, npr, setup, state_of, wait_for};

fn stop_args(s: &Setup, wave: Option<&str>, reason: Option<&str>, clear: bool) -> StopArgs {
    StopArgs {
        wave: wave.map(Into::into),
        cluster: None,
        reason: reason.map(Into::into),
        clear,
        ids: vec![],
        list: false,
        repo: s.repo.clone(),
        remote: "origin".into(),
        no_push: false,
        sign: false,
    }
}

/// Every node of `cluster` (name, Ready) and every pod's name: what a surge, an eviction or a
/// terminate would change.
async fn world(s: &Setup, cluster: &str) -> (BTreeSet<(String, bool)>, BTreeSet<String>) {
    let client = s.fleet.clients[cluster].clone();
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| {
            let ready = n
                .status
                .as_ref()
                .and_then(|st| st.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            (n.metadata.name.unwrap_or_default(), ready)
        })
        .collect();
    let pods = Api::<Pod>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| p.metadata.name.unwrap_or_default())
        .collect();
    (nodes, pods)
}

fn stopped(n: &rota::kube::crd::NodePoolRotation) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.stop.as_ref())
        .is_some_and(|n| n.reason == "Stopped")
}

/// A stop racing a batch: the canary's rotation is under way when `rota stop --wave canary`
/// is pushed. Within one poll its pool is held (Paused, Stopped, in its commit status with who
/// and why); the boot already asked of the cloud completes, and then nothing moves: no node
/// added or removed, no pod evicted, for half an hour and across a crash and restart of the
/// cluster's agent and controller. The main wave, out of the stop's scope, is not held. The
/// clear lets the canary finish.
#[tokio::test(start_paused = true)]
async fn a_stop_racing_a_batch_holds_it_across_a_restart_and_a_clear_resumes_it() {
    let mut s = setup(None).await;
    // Who the stop names: the operator's git identity in the clone it is written from.
    crate::support::git::git(&s.repo, &["config", "user.name", "Rota Test"]);
    crate::support::git::git(&s.repo, &["config", "user.email", "oncall@example.com"]);
    wait_for(&s, &s.first, "rota/canary-1", State::Success, LONG).await;
    wait_for(&s, &s.first, "rota/main-1", State::Success, LONG).await;
    let bump = commit(
        &s.repo,
        &[("fleet.yaml", &fleet_yaml("2026.11.2", "2026.11.1"))],
        "canary: general 2026.11.2",
    );
    s.fleet.poke();
    loop {
        let d = wait_for(&s, &bump, "rota/canary-1/general", State::Pending, LONG).await;
        if d.starts_with("batch") {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // A typo stops nothing: refused, naming the waves.
    let e = order(&stop_args(&s, Some("canari"), Some("INC-4711"), false)).unwrap_err();
    assert_eq!(
        e,
        "wave canari is not in the fleet at HEAD (waves: canary, main)"
    );
    let said = order(&stop_args(
        &s,
        Some("canary"),
        Some("INC-4711: 5xx up"),
        false,
    ))
    .unwrap();
    assert!(
        said.contains("(wave canary) written on refs/rota/stop and pushed to origin"),
        "{said}"
    );
    let mut list = stop_args(&s, None, None, false);
    list.list = true;
    let listed = order(&list).unwrap();
    assert!(
        listed.starts_with("fleet stop ")
            && listed.contains("(wave canary) by Rota Test <oncall@example.com>, unverified"),
        "{listed}"
    );
    // A clear with another scope finds nothing to lift, and says what is in force.
    let e = order(&stop_args(&s, None, None, true)).unwrap_err();
    assert!(e.starts_with("no stop in force for the whole fleet"), "{e}");
    s.fleet.poke();
    // Held within one poll (10s) and the controller's next pass.
    let start = tokio::time::Instant::now();
    while !stopped(&npr(&s, "canary-1").await) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "not held 30s after the stop: {:?}",
            npr(&s, "canary-1").await.status
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let held = npr(&s, "canary-1").await;
    let stop = held
        .spec
        .policy
        .stop
        .clone()
        .expect("the spec carries the stop");
    assert_eq!(stop.wave.as_deref(), Some("canary"));
    assert_eq!(stop.reason, "INC-4711: 5xx up");
    let stage = held
        .status
        .as_ref()
        .unwrap()
        .checkpoint
        .clone()
        .unwrap()
        .stage;
    // Out of scope: not held.
    assert_eq!(npr(&s, "main-1").await.spec.policy.stop, None);

    // What the controller asked before it saw the stop completes by itself (a boot: its
    // nodes come up Ready; a terminate: its node goes); the rotation's stage does not move.
    let stage_now = || async {
        npr(&s, "canary-1")
            .await
            .status
            .and_then(|st| st.checkpoint)
            .map(|c| c.stage)
    };
    tokio::time::sleep(Duration::from_secs(10 * 60)).await;
    assert_eq!(
        stage_now().await.as_ref(),
        Some(&stage),
        "held at {stage:?}"
    );
    let before = world(&s, "canary-1").await;
    assert!(before.0.iter().all(|(_, ready)| *ready), "{:?}", before.0);
    let d = wait_for(&s, &bump, "rota/canary-1/general", State::Pending, LONG).await;
    assert!(
        d.starts_with("paused; next: rota stop --clear --wave canary · stopped by Rota Test"),
        "{d}"
    );
    assert!(d.contains("(wave canary): INC-4711: 5xx up"), "{d}");
    // Then nothing moves: no node added or removed, no pod evicted.
    tokio::time::sleep(Duration::from_secs(30 * 60)).await;
    assert_eq!(
        world(&s, "canary-1").await,
        before,
        "moved while stopped (held at {stage:?})"
    );
    assert_eq!(stage_now().await.as_ref(), Some(&stage));

    // Restarted while stopped: still held, still nothing moves.
    let after_crash = s._tmp.path().join("state-after-crash");
    s.fleet
        .crash_and_restart("canary-1", &after_crash)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(10 * 60)).await;
    let n = npr(&s, "canary-1").await;
    assert!(stopped(&n), "{:?}", n.status);
    assert_eq!(
        n.status.as_ref().unwrap().checkpoint.clone().unwrap().stage,
        stage
    );
    assert_eq!(
        world(&s, "canary-1").await,
        before,
        "moved after the restart"
    );

    // Cleared: the canary finishes.
    let said = order(&stop_args(&s, Some("canary"), None, true)).unwrap();
    assert!(said.starts_with("clear "), "{said}");
    s.fleet.poke();
    let done = wait_for(&s, &bump, "rota/canary-1/general", State::Success, LONG).await;
    assert_eq!(done, "4/4 nodes on general@2026.11.2");
    assert_eq!(npr(&s, "canary-1").await.spec.policy.stop, None);
    let (st, _) = state_of(&s.origin, &bump, "rota/canary-1").await.unwrap();
    assert_eq!(st, State::Success);
}

/// An ssh key pair made with ssh-keygen: (private key path, public key line).
fn keygen(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, String) {
    let key = dir.join(name);
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .output()
        .expect("ssh-keygen (openssh-client) must be installed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    (key, public.trim().to_string())
}

/// A forged clear, end to end: agents that trust one signer (`--allowed-signers`) see a
/// signed stop hold the canary's rotation; an unsigned clear pushed to the stop ref (anyone
/// with push rights and no trusted key) is refused and the pool stays held, across polls;
/// a signed clear lifts it and the canary finishes.
#[tokio::test(start_paused = true)]
async fn a_forged_clear_leaves_a_signed_stop_in_force_and_a_signed_clear_lifts_it() {
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = keygen(keys.path(), "oncall");
    let signers = keys.path().join("allowed_signers");
    std::fs::write(
        &signers,
        format!("oncall@example.com namespaces=\"git\" {public}\n"),
    )
    .unwrap();
    let s = setup(Some(rota::source::trust::TrustPolicy {
        ssh_allowed_signers: Some(signers),
        gpg_keyring: None,
    }))
    .await;
    // The clone signs with the trusted key: its fleet commits, and `rota stop --sign`.
    let g = |args: &[&str]| crate::support::git::git(&s.repo, args);
    g(&["config", "user.name", "On Call"]);
    g(&["config", "user.email", "oncall@example.com"]);
    g(&["config", "gpg.format", "ssh"]);
    g(&["config", "user.signingkey", key.to_str().unwrap()]);
    let signed_commit = |files: &[(&str, &str)], message: &str| {
        for (p, c) in files {
            std::fs::write(s.repo.join(p), c).unwrap();
        }
        g(&["add", "-A"]);
        g(&["commit", "-S", "-q", "-m", message]);
        g(&["push", "-q", "origin", "main"]);
        g(&["rev-parse", "HEAD"])
    };
    let first = signed_commit(
        &[(
            "fleet.yaml",
            &fleet_yaml("2026.11.1", "2026.11.1").replace("soak: 30m", "soak: 31m"),
        )],
        "signed: fleet on 2026.11.1",
    );
    s.fleet.poke();
    wait_for(&s, &first, "rota/canary-1", State::Success, LONG).await;
    let bump = signed_commit(
        &[(
            "fleet.yaml",
            &fleet_yaml("2026.11.2", "2026.11.1").replace("soak: 30m", "soak: 31m"),
        )],
        "canary: general 2026.11.2",
    );
    s.fleet.poke();
    loop {
        let d = wait_for(&s, &bump, "rota/canary-1/general", State::Pending, LONG).await;
        if d.starts_with("batch") {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // A signed stop: held within a poll, as signed.
    let mut stop = stop_args(
        &s,
        Some("canary"),
        Some("INC-5150: GPU jobs failing"),
        false,
    );
    stop.sign = true;
    order(&stop).unwrap();
    s.fleet.poke();
    let start = tokio::time::Instant::now();
    while !stopped(&npr(&s, "canary-1").await) {
        assert!(start.elapsed() < Duration::from_secs(60), "not held");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let held = npr(&s, "canary-1").await.spec.policy.stop.expect("held");
    assert_eq!(held.trust, rota::fleet::stops::Trust::Signed, "{held:?}");
    let stage = npr(&s, "canary-1")
        .await
        .status
        .and_then(|st| st.checkpoint)
        .map(|c| c.stage);

    // The forged clear: unsigned, pushed to the ref all the same. Refused: still held,
    // through several polls, nothing moved.
    let forged = order(&stop_args(&s, Some("canary"), None, true)).unwrap();
    assert!(forged.starts_with("clear "), "{forged}");
    s.fleet.poke();
    tokio::time::sleep(Duration::from_secs(5 * 60)).await;
    let n = npr(&s, "canary-1").await;
    assert!(
        stopped(&n),
        "a forged clear lifted a signed stop: {:?}",
        n.status
    );
    assert_eq!(n.spec.policy.stop.as_ref().map(|x| &x.id), Some(&held.id));
    assert_eq!(
        n.status.and_then(|st| st.checkpoint).map(|c| c.stage),
        stage
    );
    let d = wait_for(&s, &bump, "rota/canary-1/general", State::Pending, LONG).await;
    assert!(
        d.starts_with("paused; next: rota stop --clear --wave canary"),
        "{d}"
    );

    // The signed clear lifts it: the canary finishes.
    let mut clear = stop_args(&s, Some("canary"), None, true);
    clear.sign = true;
    // The clone's own fold (it checks no signature) counts the stop as cleared already: the
    // clear names it by its id.
    clear.ids = vec![held.id.clone()];
    order(&clear).unwrap();
    s.fleet.poke();
    let done = wait_for(&s, &bump, "rota/canary-1/general", State::Success, LONG).await;
    assert_eq!(done, "4/4 nodes on general@2026.11.2");
    assert_eq!(npr(&s, "canary-1").await.spec.policy.stop, None);
}
