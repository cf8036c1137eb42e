//! The hostile-repo corpus, git side: what someone with push access to the fleet repo (or
//! with one agent's key) can throw at rota through git itself, each with real git and, where
//! the attack is on a process, the real `rota` binary on loopback. Every case here failed on
//! rota before the defence it names (docs/gitops.md, "Threat model").
//!
//! - history: a force-push of an older signed commit (or another branch) is not acted on
//!   until a human confirms that exact rewrite; a revert still rolls back;
//! - evidence: forged git notes (under the canary's ref, under another ref, copied from
//!   another commit) neither advance a later wave nor flip `rota promote --check`;
//! - tree walks: tree bombs, deep, wide and repeated trees finish, refused with the path;
//! - fetches: pack size and notes-ref floods are capped;
//! - keys: a retired SSH key does not verify back-dated commits; a verifier that fails to
//!   run is retried, not a verdict.

use crate::support::canary_fleet;
use crate::support::git::{git, git_stdin, origin_and_clone, rota};
use crate::support::processes::{Kill, SimServe};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use git2::Oid;
use rota::report::GitNotesStore;
use rota::report::evidence::EvidenceKeys;
use rota::waves::PoolRecord;

// ---------------------------------------------------------------------------------------
// helpers

fn ssh_keygen_new(dir: &Path, name: &str) -> PathBuf {
    let key = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .output()
        .expect("ssh-keygen is installed (openssh-client)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    key
}

fn public(key: &Path) -> String {
    std::fs::read_to_string(key.with_extension("pub"))
        .unwrap()
        .trim()
        .to_string()
}

/// A bare origin and a clone `work` on branch main.
/// Commits everything in `work` (signed with `key` when given) and returns the id.
fn commit(work: &Path, message: &str, key: Option<&Path>, date: Option<&str>) -> String {
    git(work, &["add", "-A"]);
    let mut args: Vec<String> = Vec::new();
    if let Some(k) = key {
        args.extend([
            "-c".into(),
            "gpg.format=ssh".into(),
            "-c".into(),
            format!("user.signingkey={}", k.with_extension("pub").display()),
        ]);
    }
    args.extend(["commit".into(), "-q".into(), "--allow-empty".into()]);
    if key.is_some() {
        args.push("-S".into());
    }
    args.extend(["-m".into(), message.into()]);
    let mut c = Command::new("git");
    c.args(&args)
        .current_dir(work)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com");
    if let Some(d) = date {
        c.env("GIT_COMMITTER_DATE", d).env("GIT_AUTHOR_DATE", d);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    git(work, &["rev-parse", "HEAD"])
}

const AMI_1: &str = "ami-0a1b2c3d4e5f60718";
const AMI_2: &str = "ami-0f9e8d7c6b5a40312";

/// Two waves: canary (canary-1) then main (main-1), one pool `general` each.
fn two_waves(canary: &str, main: &str) -> String {
    two_waves_guarded(canary, main, true)
}

/// [`two_waves`], with the promotion guard on or off.
fn two_waves_guarded(canary: &str, main: &str, guard: bool) -> String {
    let extra = format!("  rollout: {{batch: 2}}\n  promotion: {{guard: {guard}}}\n");
    canary_fleet::two_waves_yaml(canary, main, &extra)
}

/// `rota sim serve` over the fleet in `work`: every cluster of it, on loopback.
fn sim(tmp: &Path, work: &Path) -> (Kill, PathBuf) {
    let kubeconfig = tmp.join("kubeconfig");
    let (child, _) = SimServe::new(work, &kubeconfig)
        .workloads(
            &tmp.join("workloads.yaml"),
            "nodes: {perPool: 2, registerAfter: 15s, readyAfter: 20s}\n",
        )
        .speed(30)
        .start();
    (child, kubeconfig)
}

/// A `rota agent` process for `cluster`; its log goes to `<tmp>/<name>.log`.
struct Agent {
    child: Kill,
    log: PathBuf,
}

impl Agent {
    fn start(
        tmp: &Path,
        name: &str,
        origin: &Path,
        cluster: &str,
        kubeconfig: &Path,
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Agent {
        let log = tmp.join(format!("{name}.log"));
        let mut c = Command::new(rota());
        // Tests run in parallel: never the default metrics port.
        c.env("ROTA_METRICS_ADDR", free_addr());
        c.arg("agent")
            .env("ROTA_REPO", origin)
            .env("ROTA_CLUSTER", cluster)
            .env("ROTA_INSTALL_CRD", "true")
            .env("ROTA_KUBECONFIG", kubeconfig)
            .env("ROTA_CONTEXT", cluster)
            .env("ROTA_STATE_DIR", tmp.join(format!("state-{cluster}")))
            .env("ROTA_POLL", "300ms")
            .env("ROTA_RESYNC", "500ms")
            .env("ROTA_SPEED", "30")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        for (k, v) in env {
            c.env(k, v);
        }
        Agent {
            child: Kill(c.spawn().unwrap()),
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until `what` holds (up to 90 s), panicking with the log.
    fn wait<T>(&mut self, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let start = Instant::now();
        loop {
            if let Some(v) = f() {
                return v;
            }
            if let Ok(Some(code)) = self.child.0.try_wait() {
                panic!(
                    "rota agent exited ({code}) waiting for {what}:\n{}",
                    self.log()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(90),
                "{what}: never happened\nagent log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The status `context` of `cluster`'s agent on `commit`, from its git note on the origin.
fn status(origin: &Path, cluster: &str, commit: &str, context: &str) -> Option<(String, String)> {
    let out = Command::new("git")
        .args(["notes", "--ref", &format!("rota/{cluster}"), "show", commit])
        .current_dir(origin)
        .output()
        .ok()?;
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    doc["statuses"].as_array()?.iter().find_map(|s| {
        (s["context"] == context).then(|| {
            (
                s["state"].as_str().unwrap_or("").to_string(),
                s["description"].as_str().unwrap_or("").to_string(),
            )
        })
    })
}

/// `spec.image` and `spec.sourceCommit` of NodePoolRotation `general` in `cluster`.
fn npr(kubeconfig: &Path, cluster: &str) -> Option<(String, String)> {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "--context",
            cluster,
            "get",
            "npr",
            "general",
            "-o",
            "jsonpath={.spec.image} {.spec.sourceCommit}",
        ])
        .output()
        .expect("kubectl is installed (scripts/test installs it)");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (image, commit) = text.split_once(' ')?;
    (!image.is_empty()).then(|| (image.to_string(), commit.to_string()))
}

/// The agent's `/metrics` text (plain HTTP/1.0 on loopback), or "" while it is not up.
fn metrics(addr: &str) -> String {
    use std::io::Read;
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

// ---------------------------------------------------------------------------------------
// history moves forward only

/// The rollback attack: with signed commits required, a force-push of an older commit signed
/// by a trusted key made the agent act on it (the pool went back to the old image). Now the
/// old head gets an `error` status and a metric naming it, the pool stays; a `git revert`
/// (a new commit) still rolls back; and the rewrite is acted on once a human confirms
/// exactly it on the agent (a flag, which push access cannot set).
#[test]
fn a_force_push_of_an_older_signed_commit_is_not_acted_on_until_confirmed() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (origin, work) = origin_and_clone(t, "work");
    let admin = ssh_keygen_new(t, "admin");
    let allowed = t.join("allowed_signers");
    std::fs::write(&allowed, format!("admin@acme.test {}\n", public(&admin))).unwrap();

    std::fs::write(work.join("fleet.yaml"), two_waves("2026.11.1", "2026.11.1")).unwrap();
    let old = commit(&work, "fleet", Some(&admin), None);
    std::fs::write(work.join("fleet.yaml"), two_waves("2026.11.2", "2026.11.1")).unwrap();
    let new = commit(&work, "canary: 2026.11.2", Some(&admin), None);
    git(&work, &["push", "-q", "origin", "main"]);

    let (_sim, kubeconfig) = sim(t, &work);
    let listen = free_addr();
    let env = [
        ("ROTA_ALLOWED_SIGNERS", allowed.as_os_str()),
        ("ROTA_METRICS_ADDR", std::ffi::OsStr::new(&listen)),
    ];
    let mut agent = Agent::start(t, "agent", &origin, "canary-1", &kubeconfig, &env);
    agent.wait("the new commit in force", || {
        npr(&kubeconfig, "canary-1").filter(|(i, c)| i == AMI_2 && c == &new)
    });

    // The attacker force-pushes the older, validly signed commit.
    git(
        &work,
        &["push", "-q", "-f", "origin", &format!("{old}:main")],
    );
    let (state, description) = agent.wait("an error status on the old head", || {
        status(&origin, "canary-1", &old, "rota/canary-1").filter(|(s, _)| s == "error")
    });
    assert_eq!(state, "error");
    assert!(
        description.contains(&format!(
            "commit {} does not descend from {} in force",
            &old[..12],
            &new[..12]
        )),
        "{description}"
    );
    // Still on the new image, still the new commit: nothing of the old head acted on.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        npr(&kubeconfig, "canary-1"),
        Some((AMI_2.to_string(), new.clone()))
    );
    let m = agent.wait("the metric", || {
        let m = metrics(&listen);
        m.contains("rota_fleet_history_rewritten{").then_some(m)
    });
    let line = m
        .lines()
        .find(|l| l.starts_with("rota_fleet_history_rewritten{"))
        .unwrap_or_default();
    assert!(
        line.contains(&format!("head=\"{old}\""))
            && line.contains(&format!("in_force=\"{new}\""))
            && line.ends_with(" 1"),
        "{m}"
    );
    let log = agent.log();
    assert!(log.contains(&format!("{new}..{old}")), "{log}");

    // A restart does not forget what is in force (the NodePoolRotations remember it).
    drop(agent);
    let mut agent = Agent::start(t, "agent2", &origin, "canary-1", &kubeconfig, &env);
    let log = agent.log.clone();
    agent.wait("the restarted agent refusing the old head", || {
        log_has(&log, "does not descend from the commit in force")
    });
    assert_eq!(
        npr(&kubeconfig, "canary-1"),
        Some((AMI_2.to_string(), new.clone()))
    );

    // A human with access to the cluster confirms exactly this rewrite: acted on.
    drop(agent);
    let confirm = format!("{new}..{old}");
    let mut env2 = env.to_vec();
    env2.push(("ROTA_CONFIRM_REWRITE", std::ffi::OsStr::new(&confirm)));
    let mut agent = Agent::start(t, "agent3", &origin, "canary-1", &kubeconfig, &env2);
    agent.wait("the confirmed rewrite in force", || {
        npr(&kubeconfig, "canary-1").filter(|(i, c)| i == AMI_1 && c == &old)
    });

    // Going forward again and then back by revert: a revert is a new commit, acted on.
    git(&work, &["reset", "-q", "--hard", &old]);
    std::fs::write(work.join("fleet.yaml"), two_waves("2026.11.2", "2026.11.1")).unwrap();
    let bump = commit(&work, "canary: 2026.11.2 again", Some(&admin), None);
    git(&work, &["push", "-q", "-f", "origin", "main"]);
    agent.wait("the bump in force", || {
        npr(&kubeconfig, "canary-1").filter(|(_, c)| c == &bump)
    });
    git(&work, &["revert", "--no-edit", "--no-commit", "HEAD"]);
    let revert = commit(&work, "revert the bump", Some(&admin), None);
    git(&work, &["push", "-q", "origin", "main"]);
    agent.wait("the revert in force", || {
        npr(&kubeconfig, "canary-1").filter(|(i, c)| i == AMI_1 && c == &revert)
    });
    // The confirmation left in place does not let the attack through again: history moved
    // on, so `<new>..<old>` no longer matches what is in force.
    git(
        &work,
        &["push", "-q", "-f", "origin", &format!("{old}:main")],
    );
    agent.wait("the old head refused again", || {
        status(&origin, "canary-1", &old, "rota/canary-1")
            .filter(|(_, d)| d.contains(&format!("does not descend from {}", &revert[..12])))
    });
    assert_eq!(
        npr(&kubeconfig, "canary-1").map(|(_, c)| c),
        Some(revert.clone())
    );
}

fn log_has(log: &Path, text: &str) -> Option<()> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains(text)
        .then_some(())
}

// ---------------------------------------------------------------------------------------
// promotion evidence

/// A note as a pusher forges it: `pools` claiming canary-1 completed 2026.11.2 in 2020,
/// written under `notes_ref` on `commit` with plain git (no agent, no key).
fn forge_note(repo: &Path, notes_ref: &str, doc_cluster: &str, commit: &str) {
    let doc = serde_json::json!({
        "cluster": doc_cluster,
        "statuses": [],
        "pools": [{
            "cluster": "canary-1", "pool": "general",
            "completions": [{"channel": "general", "version": "2026.11.2",
                             "completedAt": "2020-01-01T00:00:00Z"}],
            "gateFailures": []
        }]
    });
    git_stdin(
        repo,
        &["notes", "--ref", notes_ref, "add", "-f", "-F", "-", commit],
        doc.to_string().as_bytes(),
    );
}

/// A repo where main-1 would promote 2026.11.2 (canary pins it, main is asked to take it):
/// (tmp, repo, base, promotion).
fn promotion_repo() -> (tempfile::TempDir, PathBuf, String, String) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("work");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("fleet.yaml"), two_waves("2026.11.2", "2026.11.1")).unwrap();
    let base = commit(&repo, "canary: 2026.11.2", None, None);
    std::fs::write(repo.join("fleet.yaml"), two_waves("2026.11.2", "2026.11.2")).unwrap();
    let promotion = commit(&repo, "promote main", None, None);
    (tmp, repo, base, promotion)
}

fn promote_check(repo: &Path, base: &str, rev: &str, extra: &[&str]) -> (i32, String) {
    let out = Command::new(rota())
        .args(["promote", "--check", "--repo"])
        .arg(repo)
        .args(["--base", base, "--rev", rev])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// A note under another ref (any name a pusher likes) claiming canary-1's completion used
/// to count: records were flattened from every note whatever cluster wrote them.
#[test]
fn promote_check_ignores_records_about_a_cluster_from_another_clusters_ref() {
    let (_tmp, repo, base, promotion) = promotion_repo();
    forge_note(&repo, "rota/evil", "evil", &base);
    let (code, out) = promote_check(&repo, &base, &promotion, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(canary_holds(&out), "{out}");
}

/// The exact attack of the issue: a forged note under the canary's own ref claiming it
/// completed the version in 2020 flipped `rota promote --check` to allowed. With the agents'
/// allowed signers, only records signed by canary-1's agent key count.
#[tokio::test]
async fn promote_check_with_agent_signers_ignores_a_forged_note_on_the_canarys_ref() {
    let (tmp, repo, base, promotion) = promotion_repo();
    let canary_key = ssh_keygen_new(tmp.path(), "canary-1");
    let main_key = ssh_keygen_new(tmp.path(), "main-1");
    let signers = tmp.path().join("agents");
    std::fs::write(
        &signers,
        format!(
            "canary-1 namespaces=\"rota-records\" {}\nmain-1 namespaces=\"rota-records\" {}\n",
            public(&canary_key),
            public(&main_key)
        ),
    )
    .unwrap();
    let signers_arg = ["--agent-signers", signers.to_str().unwrap()];
    forge_note(&repo, "rota/canary-1", "canary-1", &base);
    // Without signers the canary's own ref is trusted (that is all push access needs) ...
    let (code, out) = promote_check(&repo, &base, &promotion, &[]);
    assert_eq!(code, 0, "{out}");
    // ... with them the forgery holds nothing.
    let (code, out) = promote_check(&repo, &base, &promotion, &signers_arg);
    assert_eq!(code, 1, "{out}");
    assert!(canary_holds(&out), "{out}");

    // Signed by the wrong agent (main-1's key, in canary-1's ref): nothing.
    let records = vec![PoolRecord::new("canary-1", "general").completed(
        "general",
        "2026.11.2",
        Utc.with_ymd_and_hms(2020, 1, 1, 0, 0, 0).unwrap(),
    )];
    let as_main = GitNotesStore::new(&repo, Some("canary-1"), None).with_evidence(&EvidenceKeys {
        signing_key: Some(main_key.clone()),
        agent_signers: None,
    });
    as_main
        .set_pool_records(&base, records.clone())
        .await
        .unwrap();
    let (code, out) = promote_check(&repo, &base, &promotion, &signers_arg);
    assert_eq!(code, 1, "signed by main-1's key for canary-1: {out}");

    // A genuine note, signed by canary-1's key but for another commit, copied here: nothing.
    let elsewhere =
        GitNotesStore::new(&repo, Some("canary-1"), None).with_evidence(&EvidenceKeys {
            signing_key: Some(canary_key.clone()),
            agent_signers: None,
        });
    elsewhere
        .set_pool_records(&promotion, records.clone())
        .await
        .unwrap();
    let copied = git(
        &repo,
        &["notes", "--ref", "rota/canary-1", "show", &promotion],
    );
    git_stdin(
        &repo,
        &[
            "notes",
            "--ref",
            "rota/canary-1",
            "add",
            "-f",
            "-F",
            "-",
            &base,
        ],
        copied.as_bytes(),
    );
    git(
        &repo,
        &["notes", "--ref", "rota/canary-1", "remove", &promotion],
    );
    let (code, out) = promote_check(&repo, &base, &promotion, &signers_arg);
    assert_eq!(code, 1, "a signed note copied from another commit: {out}");

    // The canary's agent's own signed records: allowed.
    elsewhere.set_pool_records(&base, records).await.unwrap();
    let (code, out) = promote_check(&repo, &base, &promotion, &signers_arg);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("✓ wave main: general 2026.11.1 → 2026.11.2: allowed"),
        "{out}"
    );
}

/// The agent side of the same attack: a forged note claiming the canary completed the
/// version in 2020 made main-1's pool start it at once. Now, with agents' signers, main-1
/// waits for the canary; and a note under another ref holds nothing even without them.
#[test]
fn a_forged_canary_note_does_not_start_a_later_wave() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (origin, work) = origin_and_clone(t, "work");
    let canary_key = ssh_keygen_new(t, "canary-1");
    let main_key = ssh_keygen_new(t, "main-1");
    let signers = t.join("agents");
    std::fs::write(
        &signers,
        format!(
            "canary-1 namespaces=\"rota-records\" {}\nmain-1 namespaces=\"rota-records\" {}\n",
            public(&canary_key),
            public(&main_key)
        ),
    )
    .unwrap();
    // main-1's pool is created with the guard off (nothing recorded by any canary yet).
    std::fs::write(
        work.join("fleet.yaml"),
        two_waves_guarded("2026.11.2", "2026.11.1", false),
    )
    .unwrap();
    let first = commit(&work, "canary: 2026.11.2", None, None);
    git(&work, &["push", "-q", "origin", "main"]);
    let (_sim, kubeconfig) = sim(t, &work);
    let env = [
        ("ROTA_AGENT_SIGNERS", signers.as_os_str()),
        ("ROTA_RECORDS_SIGNING_KEY", main_key.as_os_str()),
    ];
    let mut agent = Agent::start(t, "main", &origin, "main-1", &kubeconfig, &env);
    agent.wait("main-1 on 2026.11.1", || {
        npr(&kubeconfig, "main-1").filter(|(i, c)| i == AMI_1 && c == &first)
    });

    // The promotion, pushed with forged evidence under the canary's ref and under another.
    std::fs::write(work.join("fleet.yaml"), two_waves("2026.11.2", "2026.11.2")).unwrap();
    let promotion = commit(&work, "promote main", None, None);
    forge_note(&work, "rota/canary-1", "canary-1", &promotion);
    forge_note(&work, "rota/zz-evil", "zz-evil", &promotion);
    git(
        &work,
        &[
            "push",
            "-q",
            "origin",
            "main",
            "refs/notes/rota/canary-1",
            "refs/notes/rota/zz-evil",
        ],
    );
    let (_, description) = agent.wait("main-1 waiting for the canary", || {
        status(&origin, "main-1", &promotion, "rota/main-1/general")
    });
    assert!(canary_holds(&description), "{description}");
    assert_eq!(
        npr(&kubeconfig, "main-1").map(|(i, _)| i),
        Some(AMI_1.to_string()),
        "the forged note started the later wave"
    );
    // main-1's own records are signed by its key.
    let note = git(
        &origin,
        &["notes", "--ref", "rota/main-1", "show", &promotion],
    );
    assert!(note.contains("BEGIN SSH SIGNATURE"), "{note}");

    // The canary's agent really completing (its key, its ref): main-1 goes.
    let canary = GitNotesStore::new(&work, Some("canary-1"), None).with_evidence(&EvidenceKeys {
        signing_key: Some(canary_key),
        agent_signers: None,
    });
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(canary.set_pool_records(
        &promotion,
        vec![PoolRecord::new("canary-1", "general").completed(
            "general",
            "2026.11.2",
            Utc.with_ymd_and_hms(2020, 1, 1, 0, 0, 0).unwrap(),
        )],
    ))
    .unwrap();
    git(
        &work,
        &["push", "-q", "-f", "origin", "refs/notes/rota/canary-1"],
    );
    agent.wait("main-1 starting 2026.11.2", || {
        npr(&kubeconfig, "main-1").filter(|(i, _)| i == AMI_2)
    });
}

// ---------------------------------------------------------------------------------------
// tree walks

/// Writes a tree whose `levels` levels each hold `fanout` entries naming the level below:
/// (fanout)^(levels) paths from a few objects. Returns the commit (on branch main).
fn tree_bomb(repo: &Path, fanout: usize, levels: usize, leaf: &str) -> String {
    tree_bomb_on(repo, None, fanout, levels, leaf)
}

/// [`tree_bomb`] as a child of `parent`.
fn tree_bomb_on(
    repo: &Path,
    parent: Option<&str>,
    fanout: usize,
    levels: usize,
    leaf: &str,
) -> String {
    let blob = git_stdin(repo, &["hash-object", "-w", "--stdin"], leaf.as_bytes());
    let mut tree = git_stdin(
        repo,
        &["mktree"],
        format!("100644 blob {blob}\tpool.yaml\n").as_bytes(),
    );
    for _ in 0..levels {
        let entries: String = (0..fanout)
            .map(|i| format!("040000 tree {tree}\td{i}\n"))
            .collect();
        tree = git_stdin(repo, &["mktree"], entries.as_bytes());
    }
    let fleet = git_stdin(
        repo,
        &["hash-object", "-w", "--stdin"],
        two_waves("2026.11.1", "2026.11.1").as_bytes(),
    );
    let root = git_stdin(
        repo,
        &["mktree"],
        format!("100644 blob {fleet}\tfleet.yaml\n040000 tree {tree}\tbomb\n").as_bytes(),
    );
    let mut args = vec!["commit-tree", root.as_str(), "-m", "bomb"];
    if let Some(p) = parent {
        args.extend(["-p", p]);
    }
    let c = git(repo, &args);
    git(repo, &["update-ref", "refs/heads/main", &c]);
    c
}

/// The agent side of the tree bomb: it spun without end (SIGTERM did not stop it). Now the
/// bomb gets an `error` status naming the path, the last good commit stays in force, and
/// SIGTERM stops the agent.
#[test]
fn an_agent_refuses_a_tree_bomb_and_stops_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (origin, work) = origin_and_clone(t, "work");
    std::fs::write(work.join("fleet.yaml"), two_waves("2026.11.1", "2026.11.1")).unwrap();
    let good = commit(&work, "fleet", None, None);
    git(&work, &["push", "-q", "origin", "main"]);
    let (_sim, kubeconfig) = sim(t, &work);
    let mut agent = Agent::start(t, "agent", &origin, "canary-1", &kubeconfig, &[]);
    agent.wait("the good commit in force", || {
        npr(&kubeconfig, "canary-1").filter(|(_, c)| c == &good)
    });
    let bomb = tree_bomb_on(&origin, Some(&good), 10, 14, "# not a fleet file\n");
    let (state, description) = agent.wait("an error status on the bomb", || {
        status(&origin, "canary-1", &bomb, "rota/canary-1")
    });
    assert_eq!(state, "error", "{description}");
    assert!(
        description.contains("a tree repeated over 256 times"),
        "{description}"
    );
    assert_eq!(
        npr(&kubeconfig, "canary-1").map(|(_, c)| c),
        Some(good.clone())
    );
    let pid = agent.child.0.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let start = Instant::now();
    while agent.child.0.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "SIGTERM did not stop the agent:\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The guard holds the main wave for canary-1: it waits for canary-1's completion, or (no
/// record of canary-1 counts at all) says that canary-1 has never reported.
fn canary_holds(out: &str) -> bool {
    out.contains("waiting for canary-1/general (wave canary) to complete general@2026.11.2")
        || out.contains("no rota agent has reported from canary-1")
}

/// `rota validate --rev` with a time limit: (exit code or None if it had to be killed,
/// output).
fn validate_rev(repo: &Path, rev: &str, limit: Duration) -> (Option<i32>, String) {
    let mut child = Command::new(rota())
        .args(["validate", "--repo"])
        .arg(repo)
        .args(["--rev", rev])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            return (
                status.code(),
                String::from_utf8_lossy(&out.stdout).to_string()
                    + &String::from_utf8_lossy(&out.stderr),
            );
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return (None, String::new());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn bare_repo() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("fleet.git");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "--bare", "-b", "main"]);
    (tmp, repo)
}

/// The 132 KiB repo: a tree that reuses one subtree at every level made `rota
/// validate --rev` spin without end. Now it stops at a budget, naming the path.
#[test]
fn a_tree_bomb_is_refused_naming_the_path() {
    let (_tmp, repo) = bare_repo();
    // 10^14 paths; a few KiB of objects.
    tree_bomb(&repo, 10, 14, "# not a fleet file\n");
    let (code, out) = validate_rev(&repo, "main", Duration::from_secs(120));
    assert_eq!(code, Some(1), "rota validate --rev did not finish: {out}");
    assert!(
        out.contains("bomb/d0/") && out.contains("a tree repeated over 256 times"),
        "{out}"
    );
}

/// Git-level hostile trees: each finishes, refused (or read) with a message naming where.
#[test]
fn hostile_trees_finish_with_a_named_reason() {
    struct Case {
        name: &'static str,
        build: fn(&Path) -> String,
        expect: &'static str,
    }
    fn blob(repo: &Path, text: &str) -> String {
        git_stdin(repo, &["hash-object", "-w", "--stdin"], text.as_bytes())
    }
    fn tree(repo: &Path, entries: &str) -> String {
        git_stdin(repo, &["mktree"], entries.as_bytes())
    }
    fn commit_root(repo: &Path, root: &str) -> String {
        let c = git(repo, &["commit-tree", root, "-m", "hostile"]);
        git(repo, &["update-ref", "refs/heads/main", &c]);
        c
    }
    fn with_fleet(repo: &Path, extra: &str) -> String {
        let fleet = blob(repo, &two_waves("2026.11.1", "2026.11.1"));
        let root = tree(repo, &format!("100644 blob {fleet}\tfleet.yaml\n{extra}"));
        commit_root(repo, &root)
    }
    let cases = [
        Case {
            name: "binary fan-out, 15 levels (2^15 paths)",
            build: |r| tree_bomb(r, 2, 15, "kind: Nothing\n"),
            expect: "a tree repeated over 256 times",
        },
        Case {
            name: "fan-out 1000 over two levels (10^6 paths)",
            build: |r| tree_bomb(r, 1000, 2, "x: 1\n"),
            expect: "a tree repeated over 256 times",
        },
        Case {
            name: "one folder repeated 300 times side by side",
            build: |r| {
                let b = blob(r, "x\n");
                let sub = tree(r, &format!("100644 blob {b}\tREADME\n"));
                let entries: String = (0..300)
                    .map(|i| format!("040000 tree {sub}\tf{i:03}\n"))
                    .collect();
                with_fleet(r, &entries)
            },
            expect: "a tree repeated over 256 times",
        },
        Case {
            name: "a flat tree of 100 001 entries",
            build: |r| {
                let b = blob(r, "x\n");
                let entries: String = (0..100_001)
                    .map(|i| format!("100644 blob {b}\tf{i:06}.txt\n"))
                    .collect();
                let wide = tree(r, &entries);
                with_fleet(r, &format!("040000 tree {wide}\twide\n"))
            },
            expect: "more than 100000 entries",
        },
        Case {
            name: "nested 40 deep",
            build: |r| {
                let b = blob(r, "kind: Nothing\n");
                let mut t = tree(r, &format!("100644 blob {b}\tdeep.yaml\n"));
                for _ in 0..40 {
                    t = tree(r, &format!("040000 tree {t}\td\n"));
                }
                with_fleet(r, &format!("040000 tree {t}\tdeep\n"))
            },
            expect: "folders nested deeper than 16 levels are not read",
        },
        Case {
            name: "a 2 MiB YAML blob",
            build: |r| {
                let big = blob(r, &format!("# {}\n", "x".repeat(2 * 1024 * 1024)));
                with_fleet(r, &format!("100644 blob {big}\thuge.yaml\n"))
            },
            expect: "larger than the limit of 1048576 bytes",
        },
        Case {
            name: "a symlink out of the repo",
            build: |r| {
                let target = blob(r, "/etc/passwd");
                with_fleet(r, &format!("120000 blob {target}\tpasswd.yaml\n"))
            },
            expect: "symbolic link points outside the fleet repo",
        },
        Case {
            name: "a symlink to itself",
            build: |r| {
                let target = blob(r, "loop.yaml");
                with_fleet(r, &format!("120000 blob {target}\tloop.yaml\n"))
            },
            expect: "symbolic link points outside the fleet repo (or nowhere)",
        },
    ];
    for case in cases {
        let (_tmp, repo) = bare_repo();
        (case.build)(&repo);
        let (code, out) = validate_rev(&repo, "main", Duration::from_secs(120));
        assert_eq!(code, Some(1), "{}: {out}", case.name);
        assert!(out.contains(case.expect), "{}: {out}", case.name);
    }
}

// ---------------------------------------------------------------------------------------
// fetch caps

/// A source mirroring `origin` into `mirror` with `limits`.
fn capped_source(
    origin: &Path,
    mirror: &Path,
    limits: rota::source::FetchLimits,
) -> rota::source::GitSource {
    use rota::source::{Auth, GitSource, SourceConfig};
    GitSource::open(
        SourceConfig {
            url: origin.display().to_string(),
            branch: "main".into(),
            auth: Auth::None,
            depth: None,
        },
        mirror,
    )
    .unwrap()
    .with_limits(limits)
}

/// Notes-ref flood: thousands of `refs/notes/rota/*` pushed by anyone with push access are
/// not mirrored whole; the first ones by name are.
#[test]
fn a_flood_of_notes_refs_is_capped_at_fetch() {
    use rota::source::FetchLimits;
    let tmp = tempfile::tempdir().unwrap();
    let (origin, work) = origin_and_clone(tmp.path(), "work");
    std::fs::write(work.join("fleet.yaml"), "kind: Fleet\n").unwrap();
    let c = commit(&work, "fleet", None, None);
    git(&work, &["push", "-q", "origin", "main"]);
    let refs: String = (0..500)
        .map(|i| format!("create refs/notes/rota/flood-{i:04} {c}\n"))
        .collect();
    git_stdin(&origin, &["update-ref", "--stdin"], refs.as_bytes());
    let src = capped_source(
        &origin,
        &tmp.path().join("mirror"),
        FetchLimits {
            max_notes_refs: 50,
            ..FetchLimits::default()
        },
    );
    let f = src.fetch().unwrap();
    assert_eq!(f.commit.to_string(), c);
    let repo = src.repository().unwrap();
    let mirrored = repo
        .references_glob("refs/rota/remote-notes/*")
        .unwrap()
        .count();
    assert_eq!(mirrored, 50);
    assert!(
        repo.find_reference("refs/rota/remote-notes/flood-0000")
            .is_ok()
    );
}

/// The flood sorts before the fleet's own cluster ("aaa-..." < "prod-east"): with the first
/// refs by name fetched, that cluster's evidence would be crowded out (rollouts held). Once
/// the fleet's clusters are known, their refs are fetched first and read by name, and the
/// flood is not read at all.
#[test]
fn a_flood_of_notes_refs_sorting_first_does_not_crowd_out_the_fleets_clusters() {
    use rota::source::{FetchLimits, GitSource};
    let tmp = tempfile::tempdir().unwrap();
    let (origin, work) = origin_and_clone(tmp.path(), "work");
    std::fs::write(work.join("fleet.yaml"), "kind: Fleet\n").unwrap();
    let c = commit(&work, "fleet", None, None);
    git(&work, &["push", "-q", "origin", "main"]);
    let mut refs: String = (0..300)
        .map(|i| format!("create refs/notes/rota/aaa-flood-{i:04} {c}\n"))
        .collect();
    refs.push_str(&format!("create refs/notes/rota/prod-east {c}\n"));
    git_stdin(&origin, &["update-ref", "--stdin"], refs.as_bytes());
    let open = |dir: &str| {
        capped_source(
            &origin,
            &tmp.path().join(dir),
            FetchLimits {
                max_notes_refs: 50,
                ..FetchLimits::default()
            },
        )
    };
    let has_prod = |src: &GitSource| {
        src.repository()
            .unwrap()
            .find_reference("refs/rota/remote-notes/prod-east")
            .is_ok()
    };
    // Before the fleet is known (the first fetch): the first refs by name, prod-east lost.
    let blind = open("blind");
    blind.fetch().unwrap();
    assert!(
        !has_prod(&blind),
        "the flood no longer sorts first: the test proves nothing"
    );
    // Known: prod-east is fetched, and nothing of the flood (no declared cluster owns it).
    let src = open("mirror");
    src.set_notes_clusters(["prod-east".to_string()]);
    src.fetch().unwrap();
    assert!(
        has_prod(&src),
        "the fleet's cluster was crowded out of the fetch"
    );
    let mirrored = src
        .repository()
        .unwrap()
        .references_glob("refs/rota/remote-notes/*")
        .unwrap()
        .count();
    assert_eq!(mirrored, 1);
    // Reading: scoped to the fleet, only its clusters' refs, by name.
    let store = GitNotesStore::new(&tmp.path().join("mirror"), Some("canary"), None);
    store.scope_to(["prod-east".to_string(), "canary".to_string()]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let read = rt.block_on(store.reporting_clusters()).unwrap();
    assert_eq!(
        read.into_iter().collect::<Vec<_>>(),
        vec!["prod-east".to_string()]
    );
}

/// A fleet with more clusters than the cap (issue 25: past 2,048 clusters the guard went
/// blind): every declared cluster's ref is fetched and read, by name, however many; the
/// flood beside them is not mirrored past the cap, nor read.
#[test]
fn more_declared_clusters_than_the_cap_are_all_fetched_and_read() {
    use rota::source::FetchLimits;
    let tmp = tempfile::tempdir().unwrap();
    let (origin, work) = origin_and_clone(tmp.path(), "work");
    std::fs::write(work.join("fleet.yaml"), "kind: Fleet\n").unwrap();
    let c = commit(&work, "fleet", None, None);
    git(&work, &["push", "-q", "origin", "main"]);
    let declared: Vec<String> = (0..120).map(|i| format!("c{i:05}")).collect();
    let mut refs: String = declared
        .iter()
        .map(|n| format!("create refs/notes/rota/{n} {c}\n"))
        .collect();
    refs.extend((0..300).map(|i| format!("create refs/notes/rota/aaa-flood-{i:04} {c}\n")));
    git_stdin(&origin, &["update-ref", "--stdin"], refs.as_bytes());
    let src = capped_source(
        &origin,
        &tmp.path().join("mirror"),
        FetchLimits {
            max_notes_refs: 50,
            ..FetchLimits::default()
        },
    );
    src.set_notes_clusters(declared.clone());
    src.fetch().unwrap();
    let repo = src.repository().unwrap();
    let mirrored: Vec<String> = repo
        .references_glob("refs/rota/remote-notes/*")
        .unwrap()
        .map(|r| r.unwrap().name().unwrap().to_string())
        .collect();
    assert_eq!(
        mirrored.len(),
        120,
        "every declared cluster, nothing of the flood"
    );
    assert!(
        mirrored.iter().all(|r| !r.contains("flood")),
        "{mirrored:?}"
    );
    let store = GitNotesStore::new(&tmp.path().join("mirror"), Some("c00000"), None);
    store.scope_to(declared.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let read = rt.block_on(store.reporting_clusters()).unwrap();
    assert_eq!(read.into_iter().collect::<Vec<_>>(), declared);
}

/// The notes refs mirrored in `mirror` (cluster names, sorted).
fn mirrored_notes(mirror: &Path) -> Vec<String> {
    let repo = git2::Repository::open_bare(mirror).unwrap();
    let mut out: Vec<String> = repo
        .references_glob("refs/rota/remote-notes/*")
        .unwrap()
        .map(|r| r.unwrap().name().unwrap()["refs/rota/remote-notes/".len()..].to_string())
        .collect();
    out.sort();
    out
}

/// An agent's poll fetches the notes its decision reads and no others (issue 25): idle, its
/// own only, and nothing at all when nothing moved; while its guard waits on a wave, every
/// cluster of that wave, each again as soon as it moves; never another declared cluster's,
/// nor a ref of the flood beside them.
#[test]
fn an_agent_fetches_its_own_notes_idle_and_every_cluster_of_the_wave_its_guard_waits_on() {
    use rota::source::FetchLimits;
    let tmp = tempfile::tempdir().unwrap();
    let (origin, work) = origin_and_clone(tmp.path(), "work");
    std::fs::write(work.join("fleet.yaml"), "kind: Fleet\n").unwrap();
    let c = commit(&work, "fleet", None, None);
    git(&work, &["push", "-q", "origin", "main"]);
    let own = "main-1".to_string();
    let wave: Vec<String> = (0..120).map(|i| format!("canary-{i:04}")).collect();
    let later: Vec<String> = (0..80).map(|i| format!("zlate-{i:04}")).collect();
    let all: Vec<&String> = wave.iter().chain(&later).chain([&own]).collect();
    let mut refs: String = all
        .iter()
        .map(|n| format!("create refs/notes/rota/{n} {c}\n"))
        .collect();
    refs.extend((0..300).map(|i| format!("create refs/notes/rota/aaa-flood-{i:04} {c}\n")));
    git_stdin(&origin, &["update-ref", "--stdin"], refs.as_bytes());
    let mirror = tmp.path().join("mirror");
    let src = capped_source(&origin, &mirror, FetchLimits::default());

    // Idle: its own notes only, then no fetch at all.
    src.set_notes_clusters([own.clone()]);
    src.fetch().unwrap();
    assert_eq!(mirrored_notes(&mirror), vec![own.clone()]);
    let (_, idle) = src.fetch_planned(true).unwrap();
    assert!(
        idle.specs.is_empty(),
        "an idle poll fetches nothing: {idle:?}"
    );

    // The guard waits on the wave: all of it, at once, and nothing else.
    let mut needed = wave.clone();
    needed.push(own.clone());
    needed.sort();
    src.set_notes_clusters(needed.clone());
    let plan = src.fetch_notes().unwrap();
    assert_eq!(plan.specs.len(), wave.len(), "{plan:?}");
    assert_eq!(mirrored_notes(&mirror), needed);
    let store = GitNotesStore::new(&mirror, Some(&own), None);
    store.scope_to(needed.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let read = rt.block_on(store.reporting_clusters()).unwrap();
    assert_eq!(read.into_iter().collect::<Vec<_>>(), needed);

    // Every cluster reports again: the wave's moved refs are fetched, each one.
    std::fs::write(work.join("fleet.yaml"), "kind: Fleet\n# 2\n").unwrap();
    let c2 = commit(&work, "fleet 2", None, None);
    git(&work, &["push", "-q", "origin", "main"]);
    let moved: String = all
        .iter()
        .map(|n| format!("update refs/notes/rota/{n} {c2}\n"))
        .collect();
    git_stdin(&origin, &["update-ref", "--stdin"], moved.as_bytes());
    let (fetched, plan) = src.fetch_planned(true).unwrap();
    assert_eq!(fetched.commit.to_string(), c2);
    assert_eq!(
        plan.specs.len(),
        needed.len() + 1,
        "the branch and each moved ref"
    );
    let repo = src.repository().unwrap();
    for n in &needed {
        let id = repo
            .refname_to_id(&format!("refs/rota/remote-notes/{n}"))
            .unwrap();
        assert_eq!(id.to_string(), c2, "{n}");
    }
    assert_eq!(
        mirrored_notes(&mirror),
        needed,
        "no later cluster, no flood"
    );

    // The wave done, the agent is idle again: when every cluster reports, its poll fetches
    // its own notes only.
    src.set_notes_clusters([own.clone()]);
    let back: String = all
        .iter()
        .map(|n| format!("update refs/notes/rota/{n} {c}\n"))
        .collect();
    git_stdin(&origin, &["update-ref", "--stdin"], back.as_bytes());
    let (_, idle) = src.fetch_planned(true).unwrap();
    assert_eq!(
        idle.specs,
        vec![format!(
            "+refs/notes/rota/{own}:refs/rota/remote-notes/{own}"
        )]
    );
    assert_eq!(
        repo.refname_to_id("refs/rota/remote-notes/canary-0000")
            .unwrap()
            .to_string(),
        c2,
        "the wave's notes are no longer fetched"
    );
}

/// A pack larger than the cap is aborted before anything in it is used (the signature check
/// comes after the fetch): the branch stays where it was.
#[test]
fn a_pack_over_the_cap_is_refused_before_it_is_used() {
    use rota::source::FetchLimits;
    let tmp = tempfile::tempdir().unwrap();
    let (origin, work) = origin_and_clone(tmp.path(), "work");
    std::fs::write(work.join("fleet.yaml"), "kind: Fleet\n").unwrap();
    let small = commit(&work, "fleet", None, None);
    git(&work, &["push", "-q", "origin", "main"]);
    let src = capped_source(
        &origin,
        &tmp.path().join("mirror"),
        FetchLimits {
            max_pack_bytes: 1024 * 1024,
            ..FetchLimits::default()
        },
    );
    assert_eq!(src.fetch().unwrap().commit.to_string(), small);
    // 4 MiB that does not compress.
    let mut noise = Vec::with_capacity(4 << 20);
    let mut x: u64 = 0x9e3779b97f4a7c15;
    while noise.len() < 4 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        noise.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(work.join("blob.bin"), &noise).unwrap();
    commit(&work, "a big blob", None, None);
    git(&work, &["push", "-q", "origin", "main"]);
    let err = src.fetch().unwrap_err().to_string();
    assert!(
        err.contains("more than 1048576 bytes of pack data"),
        "{err}"
    );
    assert_eq!(
        src.current().unwrap().map(|o| o.to_string()),
        Some(small),
        "the branch must not move to the oversized fetch"
    );
}

// ---------------------------------------------------------------------------------------
// keys and the verifier

/// An SSH key retired with `valid-before` still verified commits whose committer date (set
/// by the committer) was before it. Validity is now judged at verification time.
#[test]
fn a_retired_ssh_key_does_not_verify_a_backdated_commit() {
    use rota::source::trust::{RejectReason, TrustPolicy, Verifier};
    let tmp = tempfile::tempdir().unwrap();
    let (_origin, work) = origin_and_clone(tmp.path(), "work");
    let old = ssh_keygen_new(tmp.path(), "retired");
    let allowed = tmp.path().join("allowed_signers");
    std::fs::write(
        &allowed,
        format!(
            "retired@acme.test valid-before=\"20250101\" {}\n",
            public(&old)
        ),
    )
    .unwrap();
    std::fs::write(work.join("fleet.yaml"), "kind: Fleet\n").unwrap();
    let backdated = commit(&work, "backdated", Some(&old), Some("2020-06-01T00:00:00Z"));
    let verifier = Verifier::new(&TrustPolicy {
        ssh_allowed_signers: Some(allowed),
        gpg_keyring: None,
    })
    .unwrap();
    let repo = git2::Repository::open(&work).unwrap();
    let r = verifier
        .verify(&repo, Oid::from_str(&backdated).unwrap())
        .unwrap()
        .unwrap_err();
    assert_eq!(r.reason, RejectReason::KeyNotValid, "{}", r.message);
    assert!(r.message.contains("not valid now"), "{}", r.message);
    // Judged at a time when the key was valid, the same commit verifies: the key is fine,
    // only its retirement counts.
    let then = Utc.with_ymd_and_hms(2024, 6, 1, 0, 0, 0).unwrap();
    assert!(
        verifier
            .verify_at(&repo, Oid::from_str(&backdated).unwrap(), then)
            .unwrap()
            .is_ok()
    );
}

/// A verifier that fails to run (here: ssh-keygen not on PATH yet) rejected the commit for
/// good. Now the commit is checked again on the next pass, and acted on once the verifier
/// runs; no `error` status is written on it meanwhile.
#[test]
fn a_verifier_that_fails_to_run_is_retried() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (origin, work) = origin_and_clone(t, "work");
    let admin = ssh_keygen_new(t, "admin");
    let allowed = t.join("allowed_signers");
    std::fs::write(&allowed, format!("admin@acme.test {}\n", public(&admin))).unwrap();
    std::fs::write(work.join("fleet.yaml"), two_waves("2026.11.1", "2026.11.1")).unwrap();
    let signed = commit(&work, "fleet", Some(&admin), None);
    git(&work, &["push", "-q", "origin", "main"]);
    let (_sim, kubeconfig) = sim(t, &work);

    let bin = t.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let env = [
        ("ROTA_ALLOWED_SIGNERS", allowed.as_os_str()),
        ("PATH", bin.as_os_str()),
    ];
    let mut agent = Agent::start(t, "agent", &origin, "canary-1", &kubeconfig, &env);
    let log = agent.log.clone();
    agent.wait("a failed verification", || {
        log_has(&log, "running ssh-keygen")
    });
    assert_eq!(
        status(&origin, "canary-1", &signed, "rota/canary-1"),
        None,
        "a verifier that did not run is no verdict on the commit"
    );
    let real = which("ssh-keygen");
    std::os::unix::fs::symlink(real, bin.join("ssh-keygen")).unwrap();
    agent.wait("the signed commit in force", || {
        npr(&kubeconfig, "canary-1").filter(|(_, c)| c == &signed)
    });
}

fn which(prog: &str) -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{prog} is not installed (openssh-client)"))
}

// ---------------------------------------------------------------------------------------
// a property over the tree walk

mod tree_walk {
    use proptest::prelude::*;
    use rota::fleet::source::{MAX_FILES, MAX_SUBTREE_REPEATS, MAX_TREE_ENTRIES, read_git};

    /// Level k (bottom first): `fanout` entries naming level k-1 (shared: one object),
    /// `yaml` small YAML files, one salt file that makes each level a distinct object.
    #[derive(Debug, Clone)]
    struct Level {
        fanout: usize,
        yaml: usize,
    }

    fn build(repo: &git2::Repository, levels: &[Level]) -> git2::Oid {
        let mut below: Option<git2::Oid> = None;
        for (k, l) in levels.iter().enumerate() {
            let mut b = repo.treebuilder(None).unwrap();
            let salt = repo.blob(format!("level {k}\n").as_bytes()).unwrap();
            b.insert("salt.txt", salt, 0o100644).unwrap();
            let y = repo.blob(b"x: 1\n").unwrap();
            for j in 0..l.yaml {
                b.insert(format!("f{j}.yaml"), y, 0o100644).unwrap();
            }
            if let Some(sub) = below {
                for i in 0..l.fanout {
                    b.insert(format!("d{i}"), sub, 0o040000).unwrap();
                }
            }
            below = Some(b.write().unwrap());
        }
        let mut root = repo.treebuilder(None).unwrap();
        root.insert("bomb", below.unwrap(), 0o040000).unwrap();
        let tree = repo.find_tree(root.write().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        repo.commit(Some("refs/heads/main"), &sig, &sig, "walk", &tree, &[])
            .unwrap()
    }

    /// (entries a full walk visits, most walks of one tree object, YAML files reached).
    fn oracle(levels: &[Level]) -> (u128, u128, u128) {
        let n = levels.len();
        // Walks of level k: the product of the fan-outs above it (the top is walked once).
        let mut walks = vec![1u128; n];
        for k in (0..n.saturating_sub(1)).rev() {
            walks[k] = walks[k + 1] * levels[k + 1].fanout as u128;
        }
        let mut entries = 1u128; // `bomb` in the root
        let mut yaml = 0u128;
        for (k, l) in levels.iter().enumerate() {
            let subtrees = if k == 0 { 0 } else { l.fanout as u128 };
            entries += walks[k] * (1 + l.yaml as u128 + subtrees);
            yaml += walks[k] * l.yaml as u128;
        }
        (entries, walks.iter().copied().max().unwrap_or(1), yaml)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// Whatever the shape, the walk finishes; it reads the whole tree exactly when the
        /// tree is within the budgets, and otherwise refuses it naming a path in it.
        #[test]
        fn the_walk_is_bounded_and_exact(
            levels in prop::collection::vec(
                (0usize..14, 0usize..3).prop_map(|(fanout, yaml)| Level { fanout, yaml }),
                1..9,
            )
        ) {
            let tmp = tempfile::tempdir().unwrap();
            let repo = git2::Repository::init_bare(tmp.path()).unwrap();
            build(&repo, &levels);
            let (entries, repeats, yaml) = oracle(&levels);
            let within = entries <= MAX_TREE_ENTRIES as u128
                && repeats <= MAX_SUBTREE_REPEATS as u128;
            match read_git(tmp.path(), "main", None) {
                Ok((files, _diags, _)) => {
                    prop_assert!(within, "read a tree over budget: {entries} entries, {repeats} repeats");
                    prop_assert_eq!(files.len() as u128, yaml.min(MAX_FILES as u128));
                }
                Err(diags) => {
                    prop_assert!(!within, "refused a tree within budget: {diags}");
                    let d = diags.iter().next().unwrap();
                    prop_assert!(d.file.starts_with("bomb"), "{}", d.file);
                    prop_assert!(d.message.contains("not read"), "{}", d.message);
                }
            }
        }
    }
}
