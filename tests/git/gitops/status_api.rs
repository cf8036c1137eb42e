//! The forge status backends against the local API double: exactly the expected requests,
//! list-first idempotency (also across restarts), pagination past other tools' statuses,
//! state mapping, auth and rate-limit errors.

use rota::forge::gitea::{GiteaConfig, GiteaStore};
use rota::forge::github::{GitHubConfig, GitHubStore};
use rota::forge::gitlab::{GitLabConfig, GitLabStore};
use rota::report::{CommitStatus, Posted, State, StatusStore};
use rota::source::Secret;
use serde_json::json;

use super::forge_double::ForgeDouble;

const SHA: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

fn github(base: &str, token: &str) -> GitHubStore {
    let mut c = GitHubConfig::new("acme", "fleet", Secret::new(token));
    c.api_url = base.to_string();
    c.requests_per_second = 1000.0;
    GitHubStore::new(c).unwrap()
}

#[tokio::test]
async fn github_double_receives_exactly_the_expected_statuses() {
    let double = ForgeDouble::start(("authorization", "Bearer ghs_tok".into())).await;
    double.seed(SHA, 150); // CI's statuses: rota must page past them
    let store = github(&double.base, "ghs_tok");

    let story = [
        CommitStatus::new("rota/canary-use1", State::Pending, "1 pool rotating"),
        CommitStatus::new(
            "rota/canary-use1/general",
            State::Pending,
            "batch 1/2 · 2/4 nodes on general@2026.11.2",
        ),
        // Reported again on the next loop: unchanged, not posted.
        CommitStatus::new(
            "rota/canary-use1/general",
            State::Pending,
            "batch 1/2 · 2/4 nodes on general@2026.11.2",
        ),
        CommitStatus::new(
            "rota/canary-use1/general",
            State::Pending,
            "batch 2/2 · 4/4 nodes on general@2026.11.2",
        ),
        CommitStatus::new(
            "rota/canary-use1/general",
            State::Success,
            "4/4 nodes on general@2026.11.2",
        )
        .with_target_url("https://grafana.acme.test/d/rota?var-pool=general"),
        CommitStatus::new(
            "rota/canary-use1",
            State::Success,
            "all pools on the desired image",
        ),
        CommitStatus::new(
            "rota/canary-use1",
            State::Success,
            "all pools on the desired image",
        ),
    ];
    let mut posted = Vec::new();
    for s in &story {
        posted.push(store.set(SHA, s).await.unwrap());
    }
    use Posted::*;
    assert_eq!(
        posted,
        [
            Created, Created, Unchanged, Created, Created, Created, Unchanged
        ]
    );

    assert_eq!(
        double.posts(),
        [
            json!({"state": "pending", "context": "rota/canary-use1", "description": "1 pool rotating"}),
            json!({"state": "pending", "context": "rota/canary-use1/general", "description": "batch 1/2 · 2/4 nodes on general@2026.11.2"}),
            json!({"state": "pending", "context": "rota/canary-use1/general", "description": "batch 2/2 · 4/4 nodes on general@2026.11.2"}),
            json!({"state": "success", "context": "rota/canary-use1/general", "description": "4/4 nodes on general@2026.11.2",
                   "target_url": "https://grafana.acme.test/d/rota?var-pool=general"}),
            json!({"state": "success", "context": "rota/canary-use1", "description": "all pools on the desired image"}),
        ]
    );
    let paths: Vec<(String, String)> = double
        .requests()
        .into_iter()
        .map(|r| (r.method, r.path))
        .collect();
    let gets = paths.iter().filter(|(m, _)| m == "GET").count();
    assert_eq!(
        gets, 2,
        "listed once per commit (two pages past CI's 150 statuses): {paths:?}"
    );
    assert!(
        paths
            .iter()
            .all(|(_, p)| p.starts_with("/repos/acme/fleet/"))
    );
    assert!(paths.contains(&("POST".into(), format!("/repos/acme/fleet/statuses/{SHA}"))));

    // Only rota's contexts are listed, latest per context.
    let listed = store.list(SHA).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[1].state, State::Success);

    // A restarted agent lists first and posts nothing that is already there.
    double.clear_requests();
    let fresh = github(&double.base, "ghs_tok");
    assert_eq!(fresh.set(SHA, &story[6]).await.unwrap(), Unchanged);
    assert!(double.posts().is_empty());
}

#[tokio::test]
async fn github_per_context_limit_keeps_the_last_slot_for_the_final_state() {
    let double = ForgeDouble::start(("authorization", "Bearer t".into())).await;
    let mut c = GitHubConfig::new("acme", "fleet", Secret::new("t"));
    c.api_url = double.base.clone();
    c.requests_per_second = 1000.0;
    c.max_statuses_per_context = 3;
    let store = GitHubStore::new(c).unwrap();
    let ctx = "rota/canary-use1/general";
    let mut posted = Vec::new();
    for n in 1..=4 {
        let s = CommitStatus::new(ctx, State::Pending, &format!("batch {n}/4"));
        posted.push(store.set(SHA, &s).await.unwrap());
    }
    posted.push(
        store
            .set(SHA, &CommitStatus::new(ctx, State::Success, "done"))
            .await
            .unwrap(),
    );
    posted.push(
        store
            .set(SHA, &CommitStatus::new(ctx, State::Failure, "late"))
            .await
            .unwrap(),
    );
    use Posted::*;
    assert_eq!(
        posted,
        [Created, Created, Unchanged, Unchanged, Created, Unchanged]
    );
    let states: Vec<String> = double
        .posts()
        .iter()
        .map(|p| p["description"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(states, ["batch 1/4", "batch 2/4", "done"]);
}

#[tokio::test]
async fn github_errors_are_classified_and_never_show_the_token() {
    let double = ForgeDouble::start(("authorization", "Bearer right".into())).await;
    let wrong = github(&double.base, "wrong-token-VALUE");
    let err = wrong
        .set(SHA, &CommitStatus::new("rota/a", State::Pending, "x"))
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "Unauthorized");
    assert!(!err.is_transient());
    assert!(!format!("{err} {err:?}").contains("VALUE"), "{err:?}");
    assert!(
        err.to_string().contains("HTTP 401") && err.to_string().contains("Bad credentials"),
        "{err}"
    );

    let ok = github(&double.base, "right");
    double.fail_next(403, &[("x-ratelimit-remaining", "0"), ("retry-after", "1")]);
    let err = ok
        .set(SHA, &CommitStatus::new("rota/a", State::Pending, "x"))
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "RateLimited");
    assert!(err.is_transient());
    // The limiter honours the forge's wait, then the next attempt goes through.
    assert_eq!(
        ok.set(SHA, &CommitStatus::new("rota/a", State::Pending, "x"))
            .await
            .unwrap(),
        Posted::Created
    );

    // Invalid input never reaches the network.
    double.clear_requests();
    assert!(
        ok.set("HEAD", &CommitStatus::new("rota/a", State::Pending, "x"))
            .await
            .is_err()
    );
    assert!(double.requests().is_empty());
}

#[tokio::test]
async fn gitlab_maps_states_and_tolerates_repeated_states() {
    let double = ForgeDouble::start(("private-token", "glpat-tok".into())).await;
    let store = GitLabStore::new(GitLabConfig {
        api_url: format!("{}/api/v4", double.base),
        project: "acme/platform/fleet".into(),
        token: Secret::new("glpat-tok"),
        requests_per_second: 1000.0,
        pr_author: None,
    })
    .unwrap();
    let ctx = "rota/canary-use1/general";
    assert_eq!(
        store
            .set(SHA, &CommitStatus::new(ctx, State::Pending, "batch 1/2"))
            .await
            .unwrap(),
        Posted::Created
    );
    // GitLab refuses pending -> pending: rota treats it as unchanged, not as an error.
    assert_eq!(
        store
            .set(SHA, &CommitStatus::new(ctx, State::Pending, "batch 2/2"))
            .await
            .unwrap(),
        Posted::Unchanged
    );
    assert_eq!(
        store
            .set(
                SHA,
                &CommitStatus::new(ctx, State::Error, "commit not signed")
            )
            .await
            .unwrap(),
        Posted::Created
    );
    // error is stored as failed; reporting error again is unchanged in GitLab's vocabulary.
    assert_eq!(
        store
            .set(
                SHA,
                &CommitStatus::new(ctx, State::Error, "commit not signed")
            )
            .await
            .unwrap(),
        Posted::Unchanged
    );
    let posts = double.posts();
    assert_eq!(
        posts[0],
        json!({"state": "pending", "name": ctx, "description": "batch 1/2"})
    );
    assert_eq!(
        posts.last().unwrap(),
        &json!({"state": "failed", "name": ctx, "description": "commit not signed"})
    );
    let paths: Vec<String> = double.requests().into_iter().map(|r| r.path).collect();
    assert!(
        paths
            .iter()
            .all(|p| p.starts_with("/api/v4/projects/acme%2Fplatform%2Ffleet/")),
        "{paths:?}"
    );
    let listed = store.list(SHA).await.unwrap();
    assert_eq!(
        listed,
        [CommitStatus::new(ctx, State::Failure, "commit not signed")]
    );
}

#[tokio::test]
async fn gitea_round_trip() {
    let double = ForgeDouble::start(("authorization", "token gitea-tok".into())).await;
    let store = GiteaStore::new(GiteaConfig {
        api_url: format!("{}/api/v1", double.base),
        owner: "acme".into(),
        repo: "fleet".into(),
        token: Secret::new("gitea-tok"),
        requests_per_second: 1000.0,
        pr_author: None,
    })
    .unwrap();
    double.seed(SHA, 60);
    let s = CommitStatus::new(
        "rota/prod-use1",
        State::Error,
        "fleet commit invalid: clusters/prod.yaml:4: unknown field `pols`",
    );
    assert_eq!(store.set(SHA, &s).await.unwrap(), Posted::Created);
    assert_eq!(store.set(SHA, &s).await.unwrap(), Posted::Unchanged);
    assert_eq!(store.list(SHA).await.unwrap(), std::slice::from_ref(&s));
    assert_eq!(
        double.posts(),
        [
            json!({"state": "error", "context": "rota/prod-use1", "description": s.description, "target_url": ""})
        ]
    );
}
