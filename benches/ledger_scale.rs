//! The image ledger at fleet size: 13 months of a fleet's ledger (every cluster's pool of
//! `ROTA_BENCH_NODES` nodes rotated to a new version each month in `ROTA_BENCH_BATCHES`
//! batches, two appends a batch: the new nodes join and the old ones start draining, then
//! the old ones leave), written into one bare repo as the agents would push it, then
//! `rota audit --image` and `rota evidence` timed on it.
//!
//! The lives come from the real decision (`rota_core::ledger::diff`) and the objects from
//! `git fast-import` in the writer's exact format; the smoke pass checks that the two agree
//! by writing one cluster both ways (`rota::ledger::append` and fast-import) and comparing
//! the tips' IDs, which hash every byte of every commit, tree and file.
//!
//! Prints `key: value` lines: clusters, months, lives, appends, the pack's size as written
//! and after `git repack -adf` (as a server's gc leaves it), the wall time of each command
//! and the 1-minute load average when it ended (`load1`: the machine may be shared).
//! Run: `cargo bench --bench figures -- ledger_scale` (10,000 clusters); `ROTA_BENCH_CLUSTERS=1000`
//! chooses, `ROTA_BENCH_REPACK=0` skips the repack. `audit_image_first` builds the per-image
//! index (`rota::ledger::index`), `audit_image` reads it, `audit_image_after_append` brings it
//! up to date after one cluster's append and checks the answer moved with it. Without `--bench` (as `cargo test --all-targets` runs it) it is a smoke pass on
//! 20 clusters that checks each command answered.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use chrono::{DateTime, Duration, TimeZone, Utc};
use rota_core::ledger::{Life, PoolContext, Seen, Start, diff, month_file};

use crate::support::git::git;

const MONTHS: usize = 13;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name}: a number")))
        .unwrap_or(default)
}

fn cluster(i: usize) -> String {
    format!("c{i:05}")
}

fn version(m: usize) -> String {
    format!("2025.{:02}.{}", m % 12 + 1, m / 12 + 1)
}

fn image(m: usize) -> String {
    format!("ami-{m:017x}")
}

/// The first moment of month `m` (month 0 is 2025-11).
fn month_start(m: usize) -> DateTime<Utc> {
    let (y, mo) = (2025 + (10 + m as i32) / 12, (10 + m as u32) % 12 + 1);
    Utc.with_ymd_and_hms(y, mo, 1, 0, 0, 0).unwrap()
}

/// One append as the simulation produces it: the moment, and what is seen then.
struct Step {
    at: DateTime<Utc>,
    seen: Vec<Seen>,
    rotation: Option<(String, String)>,
}

/// A cluster's 13 months as observations: nodes on version m, rotated to m+1 on the 10th.
fn steps(nodes: usize, batches: usize) -> Vec<Step> {
    let node = |m: usize, k: usize, draining: bool| Seen {
        pool: "general".into(),
        node: format!("ip-10-{m}-{k}"),
        instance: format!("i-{m:03}{k:014x}"),
        image: Some(image(m)),
        ready: true,
        cordoned: draining.then(|| Some("rota".to_string())),
    };
    let per = nodes.div_ceil(batches);
    let mut out = vec![Step {
        at: month_start(0),
        seen: (0..nodes).map(|k| node(0, k, false)).collect(),
        rotation: None,
    }];
    for m in 0..MONTHS - 1 {
        let begin = month_start(m) + Duration::days(9);
        for b in 0..batches {
            let done = ((b + 1) * per).min(nodes);
            let at = begin + Duration::hours(2 * b as i64);
            let rotation = Some((format!("general:general@{}", version(m + 1)), image(m + 1)));
            // The batch's new nodes are in, its old ones draining.
            let mut seen: Vec<Seen> = (0..done).map(|k| node(m + 1, k, false)).collect();
            seen.extend((b * per..nodes).map(|k| node(m, k, k < done)));
            out.push(Step {
                at,
                seen,
                rotation: rotation.clone(),
            });
            // Then the drained ones leave.
            let mut seen: Vec<Seen> = (0..done).map(|k| node(m + 1, k, false)).collect();
            seen.extend((done..nodes).map(|k| node(m, k, false)));
            out.push(Step {
                at: at + Duration::minutes(50),
                seen,
                rotation,
            });
        }
    }
    out
}

fn contexts(step: &Step) -> BTreeMap<String, PoolContext> {
    let versions = (0..MONTHS)
        .map(|m| (image(m), format!("general@{}", version(m))))
        .collect();
    [(
        "general".to_string(),
        PoolContext {
            versions,
            rotation: step.rotation.clone(),
            commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
            preexisting: Default::default(),
        },
    )]
    .into_iter()
    .collect()
}

/// Writes every cluster's ledger with `git fast-import`, in the writer's format. Returns
/// (lives, appends).
fn write_fast(repo: &Path, clusters: usize, nodes: usize, batches: usize) -> (usize, usize) {
    let steps = steps(nodes, batches);
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet", "--force", "--done"])
        .current_dir(repo)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = std::io::BufWriter::with_capacity(1 << 20, child.stdin.take().unwrap());
    let (mut lives, mut appends) = (0, 0);
    for i in 0..clusters {
        let c = cluster(i);
        let mut open: Vec<Life> = Vec::new();
        let mut months: BTreeMap<String, String> = BTreeMap::new();
        for (n, step) in steps.iter().enumerate() {
            let start = if n == 0 {
                Start::AfterRestart
            } else {
                Start::Continuing
            };
            let delta = diff(&c, &open, &step.seen, &contexts(step), start, step.at);
            if delta.is_empty() {
                continue;
            }
            let mut touched = Vec::new();
            for l in &delta.closed {
                let f = month_file(l.left.unwrap());
                let t = months.entry(f.clone()).or_default();
                t.push_str(&l.to_line());
                t.push('\n');
                if !touched.contains(&f) {
                    touched.push(f);
                }
                lives += 1;
            }
            open = delta.apply(&open);
            let open_text: String = open.iter().map(|l| l.to_line() + "\n").collect();
            let message = format!(
                "ledger {c}: {} joined, {} draining, {} left\n",
                delta.opened.len(),
                delta.updated.len(),
                delta.closed.len()
            );
            let who = format!("rota <rota+{c}@rota.dev> {} +0000", step.at.timestamp());
            write!(
                input,
                "commit refs/rota/ledger/{c}\nauthor {who}\ncommitter {who}\ndata {}\n{message}",
                message.len()
            )
            .unwrap();
            write!(
                input,
                "M 100644 inline open.jsonl\ndata {}\n{open_text}\n",
                open_text.len()
            )
            .unwrap();
            for f in touched {
                let t = &months[&f];
                write!(input, "M 100644 inline {f}\ndata {}\n{t}\n", t.len()).unwrap();
            }
            appends += 1;
        }
        lives += open.len();
    }
    writeln!(input, "done").unwrap();
    drop(input);
    assert!(child.wait().unwrap().success());
    (lives, appends)
}

/// Writes one cluster's ledger with the real writer.
fn write_real(repo: &git2::Repository, c: &str, nodes: usize, batches: usize) {
    for (n, step) in steps(nodes, batches).iter().enumerate() {
        let book = rota::ledger::read_book(repo, c).unwrap();
        let start = if n == 0 {
            Start::AfterRestart
        } else {
            Start::Continuing
        };
        let delta = diff(c, &book.open, &step.seen, &contexts(step), start, step.at);
        if !delta.is_empty() {
            rota::ledger::append(repo, c, book, &delta, step.at, None).unwrap();
        }
    }
}

/// The fleet repo's files: one channel with the 13 versions, one wave, the clusters.
fn fleet_files(dir: &Path, clusters: usize) {
    let mut f = String::from(
        "apiVersion: rota.dev/v1alpha1\nkind: Fleet\nmetadata: {name: acme}\nspec:\n  images:\n    general:\n      maxAge: 30d\n      versions:\n",
    );
    for m in 0..MONTHS {
        f += &format!(
            "        \"{}\": {{aws: {}, released: \"{}\"}}\n",
            version(m),
            image(m),
            (month_start(m) + Duration::days(5)).to_rfc3339()
        );
    }
    f += &format!(
        "  waves:\n    - name: all\n      clusterSelector: {{matchLabels: {{ring: all}}}}\n      images: {{general: \"{}\"}}\n",
        version(MONTHS - 1)
    );
    std::fs::write(dir.join("fleet.yaml"), f).unwrap();
    std::fs::create_dir_all(dir.join("clusters")).unwrap();
    // 200 clusters a file: the loader refuses a file over 1 MiB.
    for (n, part) in (0..clusters).collect::<Vec<_>>().chunks(200).enumerate() {
        let mut text = String::new();
        for &i in part {
            let c = cluster(i);
            text += &format!(
                "---\napiVersion: rota.dev/v1alpha1\nkind: Cluster\nmetadata: {{name: {c}, labels: {{ring: all}}}}\nspec:\n  cloud: {{aws: {{region: us-east-1}}}}\n  pools:\n    - name: general\n      channel: general\n      nodeSelector: {{pool: general}}\n      group: {{autoScalingGroup: {c}-general}}\n"
            );
        }
        std::fs::write(dir.join(format!("clusters/part-{n:03}.yaml")), text).unwrap();
    }
}

fn load1() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(String::from))
        .unwrap_or_default()
}

fn size_pack(repo: &Path) -> u64 {
    let out = git(repo, &["count-objects", "-v"]);
    let kib = |key: &str| -> u64 {
        out.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (kib("size-pack:") + kib("size:")) * 1024
}

fn timed(bin: &Path, args: &[&str], name: &str) -> String {
    let t = Instant::now();
    let out = Command::new(bin).args(args).output().unwrap();
    let wall = t.elapsed();
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{name}_s: {:.3}", wall.as_secs_f64());
    println!("{name}_load1: {}", load1());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let clusters = env("ROTA_BENCH_CLUSTERS", if bench { 10_000 } else { 20 });
    let nodes = env("ROTA_BENCH_NODES", if bench { 10 } else { 4 });
    let batches = env("ROTA_BENCH_BATCHES", 2);
    let bin = std::env::var_os("ROTA_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rota")));
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("fleet.git");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "--bare", "-b", "main"]);

    // The writer and this bench's fast path make the same objects.
    {
        let a = tmp.path().join("a.git");
        let b = tmp.path().join("b.git");
        for r in [&a, &b] {
            std::fs::create_dir_all(r).unwrap();
            git(r, &["init", "-q", "--bare"]);
        }
        write_real(
            &git2::Repository::open_bare(&a).unwrap(),
            "c00000",
            nodes,
            batches,
        );
        write_fast(&b, 1, nodes, batches);
        let tip = |r: &Path| git(r, &["rev-parse", "refs/rota/ledger/c00000"]);
        assert_eq!(
            tip(&a),
            tip(&b),
            "the bench's objects differ from the writer's"
        );
    }

    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    fleet_files(&work, clusters);
    git(&work, &["add", "-A"]);
    git(
        &work,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-q",
            "-m",
            "fleet",
        ],
    );
    git(&work, &["push", "-q", repo.to_str().unwrap(), "main"]);

    let t = Instant::now();
    let (lives, appends) = write_fast(&repo, clusters, nodes, batches);
    println!("clusters: {clusters}");
    println!("months: {MONTHS}");
    println!("nodes_per_cluster: {nodes}");
    println!("lives: {lives}");
    println!("appends: {appends}");
    println!("write_s: {:.1}", t.elapsed().as_secs_f64());
    println!("repo_bytes_as_written: {}", size_pack(&repo));
    // `ROTA_BENCH_REPACK=0` skips the repack (20 minutes at 10,000 clusters on a loaded
    // machine) when only the query times are wanted.
    if env("ROTA_BENCH_REPACK", 1) != 0 {
        let t = Instant::now();
        git(&repo, &["repack", "-adf", "-q"]);
        println!("repack_s: {:.1}", t.elapsed().as_secs_f64());
        println!("repo_bytes_packed: {}", size_pack(&repo));
    }
    println!("load1: {}", load1());

    let r = repo.to_str().unwrap();
    let target = format!("general@{}", version(MONTHS / 2));
    // The first query builds the per-image index from every ledger; the next reads it.
    let image_args = ["audit", "--repo", r, "--image", &target, "--format", "csv"];
    let out = timed(&bin, &image_args, "audit_image_first");
    // Every cluster ran it on every node, once: one row each plus the header.
    assert_eq!(out.lines().count(), clusters * nodes + 1, "{out}");
    let again = timed(&bin, &image_args, "audit_image");
    assert_eq!(again, out, "the index answers as the ledgers did");
    // An append since (one cluster's current nodes leave): the index reads only it.
    let last = format!("general@{}", version(MONTHS - 1));
    let last_args = ["audit", "--repo", r, "--image", &last, "--format", "csv"];
    let before = timed(&bin, &last_args, "audit_image_last_version");
    {
        let git_repo = git2::Repository::open_bare(&repo).unwrap();
        let c = cluster(0);
        let book = rota::ledger::read_book(&git_repo, &c).unwrap();
        let at = month_start(MONTHS - 1) + Duration::days(25);
        let delta = diff(
            &c,
            &book.open,
            &[],
            &contexts(&steps(nodes, batches)[0]),
            Start::Continuing,
            at,
        );
        rota::ledger::append(&git_repo, &c, book, &delta, at, None).unwrap();
    }
    let after = timed(&bin, &last_args, "audit_image_after_append");
    assert_eq!(after.lines().count(), before.lines().count());
    // The appended cluster's lives on the last version now have a leave; the others not.
    let left = |text: &str| text.lines().filter(|l| l.contains(",lost,")).count();
    assert_eq!((left(&before), left(&after)), (0, nodes), "{after}");
    let out = timed(
        &bin,
        &[
            "audit",
            "--repo",
            r,
            "--node",
            "ip-10-3-0",
            "--format",
            "csv",
        ],
        "audit_node",
    );
    assert_eq!(out.lines().count(), clusters + 1);
    let at = (month_start(MONTHS - 1) + Duration::days(20)).to_rfc3339();
    let out = timed(
        &bin,
        &[
            "evidence",
            "--repo",
            r,
            "--rev",
            "refs/heads/main",
            "--at",
            &at,
            "--format",
            "json",
        ],
        "evidence",
    );
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["pools"].as_array().unwrap().len(), clusters);
}
