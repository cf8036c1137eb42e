//! The git-notes status store with real git: each agent writes its own
//! `refs/notes/rota/<cluster>`, pushes it to the fleet repo's remote, and reads the others'
//! after a fetch. Read back with the git CLI.

use std::path::Path;

use rota::report::notes::PushTarget;
use rota::report::{CommitStatus, GitNotesStore, Posted, State, StatusStore};
use rota::source::{Auth, GitSource, SourceConfig};
use rota::waves::PoolRecord;

use super::support::{commit_file, git, init_repo, tmp};

fn agent(origin: &Path, mirror: &Path, cluster: &str) -> (GitSource, GitNotesStore) {
    let url = format!("file://{}", origin.display());
    let source = GitSource::open(
        SourceConfig {
            url,
            branch: "main".into(),
            auth: Auth::None,
            depth: Some(1),
        },
        mirror,
    )
    .unwrap();
    let store = GitNotesStore::for_source(&source, cluster);
    // The fleet's clusters, as the agent learns them from the fleet repo.
    store.scope_to(["canary-use1".to_string(), "prod-use1".to_string()]);
    (source, store)
}

fn show(origin: &Path, cluster: &str, commit: &str) -> serde_json::Value {
    let text = git(
        origin,
        &["notes", "--ref", &format!("rota/{cluster}"), "show", commit],
    );
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn each_agent_writes_its_own_ref_and_reads_everyones() {
    let t = tmp();
    let work = t.path().join("work");
    init_repo(&work);
    let c1 = commit_file(&work, "fleet.yaml", "kind: Fleet\n# bump\n", "bump canary");
    let origin = t.path().join("origin.git");
    git(
        t.path(),
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            origin.to_str().unwrap(),
        ],
    );

    let (canary_src, canary) = agent(&origin, &t.path().join("canary"), "canary-use1");
    let (prod_src, prod) = agent(&origin, &t.path().join("prod"), "prod-use1");
    assert_eq!(canary_src.fetch().unwrap().commit.to_string(), c1);
    prod_src.fetch().unwrap();

    let rolling = CommitStatus::new(
        "rota/canary-use1/general",
        State::Pending,
        "batch 1/4 · 1/4 nodes on general@2026.11.2",
    );
    assert_eq!(canary.set(&c1, &rolling).await.unwrap(), Posted::Created);
    assert_eq!(
        canary.set(&c1, &rolling).await.unwrap(),
        Posted::Unchanged,
        "same status: nothing written"
    );
    let cluster = CommitStatus::new("rota/canary-use1", State::Pending, "1/1 pools rotating")
        .with_target_url("https://grafana.acme.test/d/rota");
    assert_eq!(canary.set(&c1, &cluster).await.unwrap(), Posted::Created);

    // Pushed: the remote has the note, readable with plain git.
    let doc = show(&origin, "canary-use1", &c1);
    assert_eq!(doc["cluster"], "canary-use1");
    assert_eq!(doc["statuses"][0]["context"], "rota/canary-use1");
    assert_eq!(
        doc["statuses"][0]["targetUrl"],
        "https://grafana.acme.test/d/rota"
    );
    assert_eq!(
        doc["statuses"][1]["description"],
        "batch 1/4 · 1/4 nodes on general@2026.11.2"
    );
    let log = git(
        &origin,
        &["log", "--format=%s", "refs/notes/rota/canary-use1"],
    );
    assert_eq!(
        log.lines().count(),
        2,
        "two changes, two notes commits: {log}"
    );

    // An agent writes only its own contexts.
    let err = prod.set(&c1, &rolling).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("not a context of cluster prod-use1"),
        "{err}"
    );

    // prod sees canary's statuses after a fetch, and adds its own.
    prod_src.fetch().unwrap();
    prod.set(
        &c1,
        &CommitStatus::new(
            "rota/prod-use1/general",
            State::Pending,
            "waiting for wave canary to soak general@2026.11.2: 1h left",
        ),
    )
    .await
    .unwrap();
    let seen: Vec<(String, State)> = prod
        .list(&c1)
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.context, s.state))
        .collect();
    assert_eq!(
        seen,
        [
            ("rota/canary-use1".to_string(), State::Pending),
            ("rota/canary-use1/general".to_string(), State::Pending),
            ("rota/prod-use1/general".to_string(), State::Pending),
        ]
    );

    // Canary finishes; records for the guard ride along.
    let done = CommitStatus::new(
        "rota/canary-use1/general",
        State::Success,
        "4/4 nodes on general@2026.11.2",
    );
    assert_eq!(canary.set(&c1, &done).await.unwrap(), Posted::Created);
    let at = chrono::DateTime::parse_from_rfc3339("2026-11-22T10:00:00Z")
        .unwrap()
        .to_utc();
    let rec = vec![PoolRecord::new("canary-use1", "general").completed("general", "2026.11.2", at)];
    assert_eq!(
        canary.set_pool_records(&c1, rec.clone()).await.unwrap(),
        Posted::Created
    );
    assert_eq!(
        canary.set_pool_records(&c1, rec.clone()).await.unwrap(),
        Posted::Unchanged
    );
    prod_src.fetch().unwrap();
    assert_eq!(prod.pool_records(&c1).await.unwrap(), rec);
    let states: Vec<State> = prod
        .list(&c1)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.state)
        .collect();
    assert_eq!(states, [State::Pending, State::Success, State::Pending]);
    assert_eq!(
        show(&origin, "canary-use1", &c1)["pools"][0]["completions"][0]["completedAt"],
        "2026-11-22T10:00:00Z"
    );

    // A read-only store (`rota status`) reads but never writes.
    let viewer = GitNotesStore::new(&t.path().join("prod"), None, None);
    viewer.scope_to(["canary-use1".to_string(), "prod-use1".to_string()]);
    assert_eq!(viewer.list(&c1).await.unwrap().len(), 3);
    assert!(viewer.set(&c1, &done).await.is_err());

    // Someone pushes a note rota cannot read: it is skipped, the others still show.
    git(
        &origin,
        &[
            "notes",
            "--ref",
            "rota/broken",
            "add",
            "-m",
            "not json",
            &c1,
        ],
    );
    prod_src.fetch().unwrap();
    assert_eq!(prod.list(&c1).await.unwrap().len(), 3);
    assert_eq!(prod.pool_records(&c1).await.unwrap(), rec);
}

#[tokio::test]
async fn a_restarted_agent_continues_the_pushed_history() {
    let t = tmp();
    let work = t.path().join("work");
    let c0 = init_repo(&work);
    let origin = t.path().join("origin.git");
    git(
        t.path(),
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            origin.to_str().unwrap(),
        ],
    );

    let (src, store) = agent(&origin, &t.path().join("before"), "canary-use1");
    src.fetch().unwrap();
    store
        .set(
            &c0,
            &CommitStatus::new(
                "rota/canary-use1",
                State::Success,
                "all pools on the desired image",
            ),
        )
        .await
        .unwrap();

    // New pod, new mirror: the fetch brings the pushed notes, the store continues them.
    git(
        &work,
        &["push", "-q", origin.to_str().unwrap(), "HEAD:main"],
    );
    let c1 = commit_file(&work, "fleet.yaml", "kind: Fleet\n# 1\n", "one");
    git(
        &work,
        &["push", "-q", origin.to_str().unwrap(), "HEAD:main"],
    );
    let (src2, store2) = agent(&origin, &t.path().join("after"), "canary-use1");
    src2.fetch().unwrap();
    store2
        .set(
            &c1,
            &CommitStatus::new("rota/canary-use1", State::Pending, "rotating"),
        )
        .await
        .unwrap();
    assert_eq!(
        show(&origin, "canary-use1", &c0)["statuses"][0]["state"],
        "success"
    );
    assert_eq!(
        show(&origin, "canary-use1", &c1)["statuses"][0]["state"],
        "pending"
    );

    // A store whose repo never saw the remote notes (no fetch) writes a fresh history: the
    // push is refused as non-fast-forward, and the store redoes its change on top of the
    // remote's notes instead of losing either.
    let stale = t.path().join("stale");
    git(
        t.path(),
        &[
            "clone",
            "-q",
            "--bare",
            origin.to_str().unwrap(),
            stale.to_str().unwrap(),
        ],
    );
    let blind = GitNotesStore::new(
        &stale,
        Some("canary-use1"),
        Some(PushTarget {
            url: origin.display().to_string(),
            auth: Auth::None,
            known_hosts: None,
        }),
    );
    assert_eq!(
        blind
            .set(
                &c1,
                &CommitStatus::new("rota/canary-use1/general", State::Pending, "batch 1/2")
            )
            .await
            .unwrap(),
        Posted::Created
    );
    assert_eq!(
        show(&origin, "canary-use1", &c0)["statuses"][0]["state"],
        "success",
        "old notes kept"
    );
    let c1_doc = show(&origin, "canary-use1", &c1);
    assert_eq!(c1_doc["statuses"].as_array().unwrap().len(), 2, "{c1_doc}");
}
