//! `rota agent`'s status-store and credential flags, parsed as the command line parses them
//! and driven against the forge double: GitLab and Gitea (and GitHub) statuses are reachable
//! from the CLI, tokens come from a file or the environment, and a missing token is refused
//! before anything runs.

use std::sync::Arc;

use clap::Parser;
use rota::cli::agent::{AgentArgs, fetch_auth, status_store};
use rota::cli::{Cli, Command};
use rota::forge::{StoreConfig, store_from_config};
use rota::report::{CommitStatus, GitNotesStore, Posted, State};
use rota::source::Auth;
use serde_json::json;

use super::forge_double::ForgeDouble;

const SHA: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

fn agent_args(extra: &[&str]) -> AgentArgs {
    let mut argv = vec![
        "rota",
        "agent",
        "--repo",
        "/srv/fleet.git",
        "--cluster",
        "c1",
    ];
    argv.extend_from_slice(extra);
    match Cli::try_parse_from(argv).unwrap().command {
        Command::Agent(a) => *a,
        other => panic!("parsed as {other:?}"),
    }
}

fn no_env(_: &str) -> Option<String> {
    None
}

/// The store the flags select, built as the agent builds it, with its rate limit lifted.
fn store(config: StoreConfig) -> Arc<dyn rota::report::StatusStore> {
    let config = match config {
        StoreConfig::GitLab(mut c) => {
            c.requests_per_second = 1000.0;
            StoreConfig::GitLab(c)
        }
        StoreConfig::Gitea(mut c) => {
            c.requests_per_second = 1000.0;
            StoreConfig::Gitea(c)
        }
        other => other,
    };
    let tmp = tempfile::tempdir().unwrap();
    let notes = Arc::new(GitNotesStore::new(tmp.path(), None, None));
    store_from_config(&config, notes).unwrap()
}

#[tokio::test]
async fn gitlab_flags_with_a_token_file_reach_the_gitlab_api() {
    let double = ForgeDouble::start(("private-token", "glpat-from-file".into())).await;
    let tmp = tempfile::tempdir().unwrap();
    let token = tmp.path().join("token");
    std::fs::write(&token, "glpat-from-file\n").unwrap();
    let api = format!("{}/api/v4", double.base);
    let args = agent_args(&[
        "--gitlab-project",
        "acme/platform/fleet",
        "--gitlab-api-url",
        &api,
        "--gitlab-token-file",
        token.to_str().unwrap(),
    ]);
    let config = status_store(&args, &no_env)
        .unwrap()
        .expect("a GitLab store");
    assert!(matches!(config, StoreConfig::GitLab(_)), "{config:?}");
    let s = CommitStatus::new("rota/c1/general", State::Pending, "batch 1/2");
    assert_eq!(store(config).set(SHA, &s).await.unwrap(), Posted::Created);
    assert_eq!(
        double.posts(),
        [json!({"state": "pending", "name": "rota/c1/general", "description": "batch 1/2"})]
    );
    assert!(
        double.requests().iter().all(|r| r
            .path
            .starts_with("/api/v4/projects/acme%2Fplatform%2Ffleet/")),
        "{:?}",
        double.requests()
    );
}

#[tokio::test]
async fn gitea_flags_with_the_token_from_the_environment_reach_the_gitea_api() {
    let double = ForgeDouble::start(("authorization", "token gitea-from-env".into())).await;
    let api = format!("{}/api/v1", double.base);
    let args = agent_args(&["--gitea-repo", "acme/fleet", "--gitea-api-url", &api]);
    let env = |v: &str| (v == "ROTA_GITEA_TOKEN").then(|| "gitea-from-env".to_string());
    let config = status_store(&args, &env).unwrap().expect("a Gitea store");
    let s = CommitStatus::new("rota/c1", State::Success, "all pools on the desired image");
    assert_eq!(store(config).set(SHA, &s).await.unwrap(), Posted::Created);
    assert_eq!(double.posts()[0]["context"], "rota/c1");
    assert_eq!(double.posts()[0]["state"], "success");
}

#[test]
fn a_forge_without_a_token_or_a_bad_name_is_refused_before_anything_runs() {
    let e = status_store(&agent_args(&["--gitlab-project", "acme/fleet"]), &no_env).unwrap_err();
    assert!(
        e.contains("--gitlab-token-file") && e.contains("ROTA_GITLAB_TOKEN"),
        "{e}"
    );
    let e = status_store(
        &agent_args(&["--gitea-repo", "acme", "--gitea-api-url", "http://x"]),
        &|_: &str| Some("t".into()),
    )
    .unwrap_err();
    assert!(e.contains("--gitea-repo must be owner/repo"), "{e}");
    let e = status_store(&agent_args(&["--github-repo", "acme/fleet"]), &no_env).unwrap_err();
    assert!(e.contains("ROTA_GITHUB_TOKEN"), "{e}");
    // Gitea has no public default API.
    assert!(
        Cli::try_parse_from([
            "rota",
            "agent",
            "--repo",
            "r",
            "--cluster",
            "c",
            "--gitea-repo",
            "a/b"
        ])
        .is_err()
    );
    // One forge at a time.
    assert!(
        Cli::try_parse_from([
            "rota",
            "agent",
            "--repo",
            "r",
            "--cluster",
            "c",
            "--github-repo",
            "a/b",
            "--gitlab-project",
            "a/b",
        ])
        .is_err()
    );
    // Neither: git notes.
    assert!(status_store(&agent_args(&[]), &no_env).unwrap().is_none());
}

#[test]
fn the_fetch_token_and_the_ssh_passphrase_come_from_the_environment_as_documented() {
    let env = |v: &str| match v {
        "ROTA_TOKEN" => Some("tok-from-env".to_string()),
        "ROTA_SSH_KEY_PASSPHRASE" => Some("pass-from-env".to_string()),
        _ => None,
    };
    match fetch_auth(&agent_args(&[]), &env).unwrap() {
        Auth::HttpsToken { username, token } => {
            assert_eq!(username, "x-access-token");
            assert_eq!(token.expose(), "tok-from-env");
        }
        other => panic!("{other:?}"),
    }
    let args = agent_args(&["--ssh-key", "/k", "--known-hosts", "/kh"]);
    match fetch_auth(&args, &env).unwrap() {
        Auth::SshKey { passphrase, .. } => {
            assert_eq!(passphrase.unwrap().expose(), "pass-from-env")
        }
        other => panic!("{other:?}"),
    }
    // A file wins over the environment.
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("pass");
    std::fs::write(&f, "pass-from-file\n").unwrap();
    let args = agent_args(&[
        "--ssh-key",
        "/k",
        "--known-hosts",
        "/kh",
        "--ssh-key-passphrase-file",
        f.to_str().unwrap(),
    ]);
    match fetch_auth(&args, &env).unwrap() {
        Auth::SshKey { passphrase, .. } => {
            assert_eq!(passphrase.unwrap().expose(), "pass-from-file")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        fetch_auth(&agent_args(&[]), &no_env).unwrap(),
        Auth::None
    ));
    let empty = |v: &str| (v == "ROTA_TOKEN").then(String::new);
    assert!(
        fetch_auth(&agent_args(&[]), &empty)
            .unwrap_err()
            .contains("ROTA_TOKEN")
    );
}

#[test]
fn the_status_economy_flags_parse_and_refuse_what_they_cannot_use() {
    use rota::report::economy::Contexts;
    let a = agent_args(&[]);
    assert_eq!(a.status_contexts, Contexts::Pools);
    assert_eq!(a.status_budget, None, "the forge's default applies");
    let a = agent_args(&[
        "--status-contexts",
        "waves",
        "--status-budget",
        "600",
        "--status-page-url",
        "https://rota.example.com",
    ]);
    assert_eq!(a.status_contexts, Contexts::Waves);
    assert_eq!(a.status_budget, Some(600.0));
    assert_eq!(
        a.status_page_url.as_deref(),
        Some("https://rota.example.com")
    );
    let bad: [&[&str]; 4] = [
        &["--status-contexts", "wave"],
        &["--status-budget", "0"],
        &["--status-budget=-5"],
        &["--status-budget", "lots"],
    ];
    for bad in bad {
        let mut argv = vec![
            "rota",
            "agent",
            "--repo",
            "/srv/fleet.git",
            "--cluster",
            "c1",
        ];
        argv.extend_from_slice(bad);
        let e = Cli::try_parse_from(argv).unwrap_err().to_string();
        let flag = bad[0].split('=').next().unwrap();
        assert!(e.contains(flag), "{bad:?}: {e}");
    }
}
