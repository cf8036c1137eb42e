//! Loading from git revisions, `rota render` and `rota diff`, on real histories made with the
//! `git` command in a temporary folder (the way a platform team's fleet repo evolves: bump a
//! version in the canary wave, promote it to the next waves, revert); and `rota status
//! --fleet` on a generated fleet past the size where it summarizes.

use crate::support::big_fleet;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rota::fleet::{self, diff::ChangeKind, load_git};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo")
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=Fleet Tester",
            "-c",
            "user.email=fleet@example.com",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

fn edit(path: &Path, from: &str, to: &str) {
    let t = std::fs::read_to_string(path).unwrap();
    assert!(t.contains(from), "{} lacks {from:?}", path.display());
    std::fs::write(path, t.replacen(from, to, 1)).unwrap();
}

fn commit(dir: &Path, msg: &str) -> String {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", msg]);
    git(dir, &["rev-parse", "HEAD"])
}

/// A history of the example fleet:
/// 1. initial: canary and early on general@2026.11.2, main on 2026.11.1;
/// 2. promote general@2026.11.2 to the main wave;
/// 3. a new version 2026.11.3 for the canary wave, plus a new cluster in main.
struct History {
    _tmp: tempfile::TempDir,
    repo: PathBuf,
    initial: String,
    promoted: String,
    bumped: String,
}

fn history() -> History {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("fleet");
    copy_dir(&example(), &repo);
    git(&repo, &["init", "-q"]);
    let initial = commit(&repo, "initial fleet");
    let fleet_yaml = repo.join("fleet.yaml");
    edit(
        &fleet_yaml,
        "images: {general: \"2026.11.1\", gpu: \"2026.10.3\"}",
        "images: {general: \"2026.11.2\", gpu: \"2026.10.3\"}",
    );
    let promoted = commit(&repo, "promote general 2026.11.2 to main");
    edit(
        &fleet_yaml,
        "    gpu:\n      description",
        "        \"2026.11.3\":\n          aws: {us-east-1: ami-0123456789abcdef0, us-west-2: ami-0123456789abcdef1, eu-central-1: ami-0123456789abcdef2}\n          gcp: projects/acme-images/global/images/general-2026-11-3\n    gpu:\n      description",
    );
    // A cluster in a third region needs that region's AMI of every version it can be pinned
    // to (a revert of the promotion pins it to 2026.11.1 again).
    edit(
        &fleet_yaml,
        "            us-west-2: ami-0b2c3d4e5f6071829\n",
        "            us-west-2: ami-0b2c3d4e5f6071829\n            eu-central-1: ami-0e1d2c3b4a5968777\n",
    );
    edit(
        &fleet_yaml,
        "            us-west-2: {x86_64: ami-04c1d2e3f4a5b6c7d, arm64: ami-0a9b8c7d6e5f40312}\n",
        "            us-west-2: {x86_64: ami-04c1d2e3f4a5b6c7d, arm64: ami-0a9b8c7d6e5f40312}\n            eu-central-1: ami-0e1d2c3b4a5968778\n",
    );
    edit(
        &fleet_yaml,
        "images: {general: \"2026.11.2\", gpu: \"2026.11.1\"}",
        "images: {general: \"2026.11.3\", gpu: \"2026.11.1\"}",
    );
    let new_cluster = std::fs::read_to_string(repo.join("clusters/aws/prod-usw2.yaml"))
        .unwrap()
        .replace("name: prod-usw2", "name: prod-euc1")
        .replace("us-west-2", "eu-central-1");
    std::fs::write(repo.join("clusters/aws/prod-euc1.yaml"), new_cluster).unwrap();
    let bumped = commit(&repo, "general 2026.11.3 on canary; new cluster prod-euc1");
    History {
        _tmp: tmp,
        repo,
        initial,
        promoted,
        bumped,
    }
}

fn rota(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rota"))
        .args(args)
        .output()
        .expect("rota runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn load_git_reads_the_object_database_not_the_work_tree() {
    let h = history();
    // Wreck the work tree: a revision must still load, since nothing is checked out.
    std::fs::write(h.repo.join("fleet.yaml"), "not: [valid\n").unwrap();
    std::fs::remove_dir_all(h.repo.join("gates")).unwrap();
    let at_head = load_git(&h.repo, "HEAD").unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(at_head.commit(), Some(h.bumped.as_str()));
    assert!(at_head.clusters.contains_key("prod-euc1"));
    let first = load_git(&h.repo, &h.initial).unwrap();
    assert!(!first.clusters.contains_key("prod-euc1"));
    // The same content read from a folder gives the same fleet.
    let from_dir = fleet::load_dir(example()).unwrap();
    assert_eq!(first.spec, from_dir.spec);
    assert_eq!(first.clusters, from_dir.clusters);
    // And the work tree itself is invalid.
    let d = fleet::load_dir(&h.repo).unwrap_err();
    assert!(
        d.iter()
            .any(|x| x.file == "fleet.yaml" && x.message.contains("invalid YAML")),
        "{d}"
    );
}

#[test]
fn render_shows_the_resolved_cluster_at_a_revision() {
    let h = history();
    let repo = h.repo.to_str().unwrap();
    let before = rota(&[
        "render",
        "--repo",
        repo,
        "--rev",
        &h.initial,
        "--cluster",
        "prod-usw2",
        "--format",
        "json",
    ]);
    assert!(before.status.success(), "{}", stderr(&before));
    let v: serde_json::Value = serde_json::from_str(&stdout(&before)).unwrap();
    assert_eq!(v["wave"], "main");
    assert_eq!(v["pools"][0]["version"], "2026.11.1");
    assert_eq!(
        v["pools"][0]["image"], "ami-0b2c3d4e5f6071829",
        "the us-west-2 AMI"
    );
    assert_eq!(v["pools"][0]["policy"]["onGateFailure"], "rollback");

    let after = rota(&[
        "render",
        "--repo",
        repo,
        "--rev",
        &h.promoted,
        "--cluster",
        "prod-usw2",
    ]);
    assert!(after.status.success(), "{}", stderr(&after));
    // The YAML output reads back to the same value as the JSON output.
    let docs = fleet::yaml::parse("render.yaml", &stdout(&after)).unwrap();
    assert_eq!(docs[0].value["pools"][0]["version"], "2026.11.2");
    let json = rota(&[
        "render",
        "--repo",
        repo,
        "--rev",
        &h.promoted,
        "--cluster",
        "prod-usw2",
        "--format",
        "json",
    ]);
    assert_eq!(
        docs[0].value,
        serde_json::from_str::<serde_json::Value>(&stdout(&json)).unwrap()
    );

    let unknown = rota(&[
        "render",
        "--repo",
        repo,
        "--rev",
        "HEAD",
        "--cluster",
        "prod-usw3",
    ]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("did you mean `prod-usw2`?"),
        "{}",
        stderr(&unknown)
    );
    let bad_rev = rota(&[
        "render",
        "--repo",
        repo,
        "--rev",
        "no-such-branch",
        "--cluster",
        "prod-usw2",
    ]);
    assert_eq!(bad_rev.status.code(), Some(2));
}

#[test]
fn a_reader_that_stops_early_ends_render_quietly() {
    // `rota render ... | head -1` with a reader that closed the pipe before rota wrote: no
    // panic and no backtrace, success (the reader chose to stop).
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_rota"))
        .args([
            "render",
            "--repo",
            example().to_str().unwrap(),
            "--cluster",
            "prod-use1",
        ])
        .stdout(writer)
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}: {}", out.status, stderr(&out));
    assert_eq!(stderr(&out), "");
}

#[test]
fn diff_groups_image_changes_by_wave() {
    let h = history();
    let repo = h.repo.to_str().unwrap();

    let promote = rota(&[
        "diff",
        "--repo",
        repo,
        "--from",
        &h.initial,
        "--to",
        &h.promoted,
    ]);
    assert!(promote.status.success(), "{}", stderr(&promote));
    let out = stdout(&promote);
    assert_eq!(
        out,
        "wave 3: main\n\
         \x20 prod-euw1/general: general 2026.11.1 -> 2026.11.2 (projects/acme-images/global/images/general-2026-11-1 -> projects/acme-images/global/images/general-2026-11-2)\n\
         \x20 prod-usw2/general: general 2026.11.1 -> 2026.11.2 (ami-0b2c3d4e5f6071829 -> ami-04c1d2e3f4a5b6c7d)\n\
         \x20 prod-usw2/legacy: general 2026.11.1 -> 2026.11.2 (ami-0b2c3d4e5f6071829 -> ami-04c1d2e3f4a5b6c7d)\n\
         \x20 prod-weu/general: general 2026.11.1 -> 2026.11.2 (/subscriptions/1b2c3d4e-0000-4000-8000-000000000001/resourceGroups/images/providers/Microsoft.Compute/galleries/acme/images/general/versions/2026.11.1 -> /subscriptions/1b2c3d4e-0000-4000-8000-000000000001/resourceGroups/images/providers/Microsoft.Compute/galleries/acme/images/general/versions/2026.11.2)\n\
         \x20 prod-weu/system: general 2026.11.1 -> 2026.11.2 (/subscriptions/1b2c3d4e-0000-4000-8000-000000000001/resourceGroups/images/providers/Microsoft.Compute/galleries/acme/images/general/versions/2026.11.1 -> /subscriptions/1b2c3d4e-0000-4000-8000-000000000001/resourceGroups/images/providers/Microsoft.Compute/galleries/acme/images/general/versions/2026.11.2)\n\
         5 pools change image\n"
    );

    // JSON, over two commits: the canary bump and the new cluster, both waves reported.
    let j = rota(&[
        "diff", "--repo", repo, "--from", &h.initial, "--to", "HEAD", "--format", "json",
    ]);
    assert!(j.status.success(), "{}", stderr(&j));
    let v: serde_json::Value = serde_json::from_str(&stdout(&j)).unwrap();
    assert_eq!(v["from"], h.initial.as_str());
    assert_eq!(v["to"], h.bumped.as_str());
    let waves = v["waves"].as_array().unwrap();
    let names: Vec<&str> = waves.iter().map(|w| w["wave"].as_str().unwrap()).collect();
    assert_eq!(names, ["canary", "early", "main"]);
    let canary: Vec<String> = waves[0]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}/{} {}->{}",
                c["cluster"].as_str().unwrap(),
                c["pool"].as_str().unwrap(),
                c["from"]["version"],
                c["to"]["version"]
            )
        })
        .collect();
    assert_eq!(
        canary,
        [
            "canary-use1/general \"2026.11.2\"->\"2026.11.3\"",
            "dev-usc1/general \"2026.11.2\"->\"2026.11.3\""
        ]
    );
    assert!(
        waves[1]["changes"].as_array().unwrap().is_empty(),
        "early is unchanged"
    );
    let added: Vec<&str> = waves[2]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "added")
        .map(|c| c["pool"].as_str().unwrap())
        .collect();
    assert_eq!(added, ["general", "legacy"], "the new cluster's pools");

    // A revert is a rollback: the diff is the exact inverse.
    git(&h.repo, &["revert", "--no-edit", &h.promoted]);
    let rolled_back = load_git(&h.repo, "HEAD").unwrap();
    let d = fleet::diff::diff(&load_git(&h.repo, &h.bumped).unwrap(), &rolled_back);
    let main = d.waves.iter().find(|w| w.wave == "main").unwrap();
    let back: Vec<(&str, &str)> = main
        .changes
        .iter()
        .filter(|c| c.kind == ChangeKind::Changed)
        .map(|c| {
            (
                c.from.as_ref().unwrap().version.as_str(),
                c.to.as_ref().unwrap().version.as_str(),
            )
        })
        .collect();
    assert_eq!(back.len(), 7, "{back:?}");
    assert!(
        back.iter().all(|b| *b == ("2026.11.2", "2026.11.1")),
        "{back:?}"
    );

    let md = rota(&[
        "diff",
        "--repo",
        repo,
        "--from",
        &h.promoted,
        "--to",
        &h.bumped,
        "--format",
        "markdown",
    ]);
    assert_eq!(
        stdout(&md),
        "### rota: 4 pools change image\n\n\
         #### Wave 1: canary\n\n\
         | pool | change | from | to |\n\
         |---|---|---|---|\n\
         | canary-use1/general | changed | general@2026.11.2 (`ami-0f9e8d7c6b5a40312`) | general@2026.11.3 (`ami-0123456789abcdef0`) |\n\
         | dev-usc1/general | changed | general@2026.11.2 (`projects/acme-images/global/images/general-2026-11-2`) | general@2026.11.3 (`projects/acme-images/global/images/general-2026-11-3`) |\n\n\
         #### Wave 3: main\n\n\
         | pool | change | from | to |\n\
         |---|---|---|---|\n\
         | prod-euc1/general | added | – | general@2026.11.2 (`ami-0e1d2c3b4a5968778`) |\n\
         | prod-euc1/legacy | added | – | general@2026.11.2 (`ami-0e1d2c3b4a5968778`) |\n\n"
    );

    let same = rota(&["diff", "--repo", repo, "--from", "HEAD", "--to", "HEAD"]);
    assert_eq!(stdout(&same), "no pool changes image\n");
}

#[test]
fn validate_a_revision_and_an_invalid_revision() {
    let h = history();
    let repo = h.repo.to_str().unwrap();
    let ok = rota(&["validate", "--repo", repo, "--rev", "HEAD"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(stdout(&ok).contains("8 clusters"), "{}", stdout(&ok));

    edit(
        &h.repo.join("clusters/gcp/dev-usc1.yaml"),
        "channel: gpu",
        "channel: gpus",
    );
    let bad = commit(&h.repo, "typo");
    let out = rota(&[
        "validate", "--repo", repo, "--rev", &bad, "--format", "github",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out),
        "::error file=clusters/gcp/dev-usc1.yaml,line=19,col=16,title=rota validate%3A spec.pools[1].channel::pool `gpu` uses channel `gpus`, which the Fleet's spec.images does not declare (hint: did you mean `gpu`?)\n"
    );
    // diff refuses an invalid side, with the position of the problem.
    let d = rota(&["diff", "--repo", repo, "--from", &h.bumped, "--to", &bad]);
    assert_eq!(d.status.code(), Some(1));
    assert!(
        stderr(&d).contains("clusters/gcp/dev-usc1.yaml:19:16"),
        "{}",
        stderr(&d)
    );

    let missing = rota(&["validate", "--repo", repo, "--rev", "v9"]);
    assert_eq!(missing.status.code(), Some(2));
    let not_git = rota(&["validate", "--repo", "/", "--rev", "HEAD"]);
    assert_eq!(not_git.status.code(), Some(2));
}

#[test]
fn a_fleet_in_a_sub_folder_and_symlinks_in_the_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path();
    copy_dir(&example(), &repo.join("fleet"));
    std::fs::write(repo.join("README.md"), "infra repo\n").unwrap();
    // A link inside the fleet folder is followed; its target is not YAML by name.
    std::fs::rename(
        repo.join("fleet/gates/node-events.yaml"),
        repo.join("fleet/gates/node-events.txt"),
    )
    .unwrap();
    std::os::unix::fs::symlink("node-events.txt", repo.join("fleet/gates/node-events.yaml"))
        .unwrap();
    git(repo, &["init", "-q"]);
    let head = commit(repo, "fleet in a folder");
    let f = fleet::load_git_at(repo, "HEAD", Some(Path::new("fleet")))
        .unwrap_or_else(|d| panic!("{d}"));
    assert!(f.gates.contains_key("node-events"));
    assert_eq!(f.commit(), Some(head.as_str()));
    let out = rota(&[
        "validate",
        "--repo",
        repo.to_str().unwrap(),
        "--rev",
        "HEAD",
        "--path",
        "fleet",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // A link that climbs out of the fleet folder is refused, with the prefix in the report.
    std::os::unix::fs::symlink("../../README.md", repo.join("fleet/gates/escape.yaml")).unwrap();
    commit(repo, "escape");
    let out = rota(&[
        "validate",
        "--repo",
        repo.to_str().unwrap(),
        "--rev",
        "HEAD",
        "--path",
        "fleet",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(
            "fleet/gates/escape.yaml: error: symbolic link points outside the fleet repo"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn rota_validate_accepts_the_example_and_reports_json() {
    let ex = example();
    let out = rota(&["validate", ex.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "fleet acme is valid: 7 clusters, 13 pools, 3 waves, 4 gates\n"
    );
    let json = rota(&[
        "validate",
        "--repo",
        ex.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(stdout(&json), "{\"errors\":[],\"valid\":true}\n");

    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&ex, tmp.path());
    edit(
        &tmp.path().join("gates/pods-healthy.yaml"),
        "maxPending: 5",
        "maxPendng: 5",
    );
    let bad = rota(&["validate", tmp.path().to_str().unwrap(), "--format", "json"]);
    assert_eq!(bad.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&bad)).unwrap();
    assert_eq!(v["valid"], false);
    let e = &v["errors"][0];
    assert!(
        e["file"]
            .as_str()
            .unwrap()
            .ends_with("/gates/pods-healthy.yaml")
    );
    assert_eq!(
        (e["line"].as_u64(), e["column"].as_u64()),
        (Some(12), Some(5))
    );
    assert_eq!(e["path"], "spec.pods.maxPendng");
    assert_eq!(e["hint"], "did you mean `maxPending`?");

    let usage = rota(&["validate", "/no/such/folder"]);
    assert_eq!(usage.status.code(), Some(2));
    let usage = rota(&["validate", "--format", "xml"]);
    assert_eq!(usage.status.code(), Some(2));
}

/// Everything agents act on shows in `rota diff`, not only images, and the working tree can
/// be the new side: a rollout policy and a gate list changed at the cluster level (seen on
/// every pool they reach), a cluster moving to another wave, a cluster removed, the promotion
/// guard and a wave's soak.
#[test]
fn diff_shows_every_change_agents_act_on_against_the_working_tree() {
    let h = history();
    let repo = h.repo.to_str().unwrap();
    let dev = h.repo.join("clusters/gcp/dev-usc1.yaml");
    edit(&dev, "batch: \"50%\"", "batch: 2");
    edit(&dev, "gates: [gpu-errors]", "gates: []");
    edit(
        &h.repo.join("clusters/azure/staging-neu.yaml"),
        "ring: early",
        "ring: main",
    );
    std::fs::remove_file(h.repo.join("clusters/aws/prod-euc1.yaml")).unwrap();
    let fleet_yaml = h.repo.join("fleet.yaml");
    edit(&fleet_yaml, "guard: true", "guard: false");
    edit(&fleet_yaml, "soak: 24h", "soak: 12h");

    let out = rota(&["diff", "--repo", repo, "--from", "HEAD", "--worktree"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    let has = |l: &str| lines.contains(&l);
    assert!(has("wave 1: canary"), "{text}");
    assert!(has("  dev-usc1/general: rollout.batch: 50% -> 2"), "{text}");
    let gpu = lines
        .iter()
        .find(|l| l.starts_with("  dev-usc1/gpu: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(gpu.contains("rollout.batch: 50% -> 2"), "{gpu}");
    assert!(
        gpu.contains("gates: [") && gpu.contains("gpu-errors] -> ["),
        "{gpu}"
    );
    assert!(has("wave 3: main"), "{text}");
    assert!(
        has("  staging-neu: joins this wave (was in early)"),
        "{text}"
    );
    assert!(
        has(
            "  prod-euc1/general: removed (was general@2026.11.2; rota stops managing it, nodes stay)"
        ),
        "{text}"
    );
    assert!(
        has("fleet: promotion.guard: true -> false, waves.early.soak: 24h -> 12h"),
        "{text}"
    );
    assert!(text.ends_with(
        "2 pools change image\n2 pools change settings\n1 cluster changes wave\n2 fleet settings change\n"
    ), "{text}");

    // The same as JSON: settings per pool, moves per wave, the fleet's settings.
    let j = rota(&[
        "diff",
        "--repo",
        repo,
        "--from",
        "HEAD",
        "--worktree",
        "--format",
        "json",
    ]);
    assert!(j.status.success(), "{}", stderr(&j));
    let v: serde_json::Value = serde_json::from_str(&stdout(&j)).unwrap();
    assert_eq!(
        v["to"],
        serde_json::Value::Null,
        "the working tree has no commit"
    );
    assert_eq!(v["fleet"][0]["field"], "promotion.guard");
    let main = v["waves"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["wave"] == "main")
        .unwrap();
    assert_eq!(main["moved"][0]["cluster"], "staging-neu");
    assert_eq!(main["moved"][0]["from"], "early");
    let canary = &v["waves"][0]["changes"];
    let general = canary
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cluster"] == "dev-usc1" && c["pool"] == "general")
        .unwrap();
    assert_eq!(general["kind"], "settings");
    assert_eq!(general["settings"][0]["field"], "rollout.batch");

    // Committed, the same change reads the same between two revisions; --to and
    // --worktree are one or the other.
    let after = commit(&h.repo, "settings");
    let committed = rota(&["diff", "--repo", repo, "--from", &h.bumped, "--to", &after]);
    assert_eq!(stdout(&committed), text);
    let both = rota(&[
        "diff",
        "--repo",
        repo,
        "--from",
        "HEAD",
        "--to",
        "HEAD",
        "--worktree",
    ]);
    assert_eq!(both.status.code(), Some(2), "{}", stderr(&both));
}

#[test]
fn status_of_the_fleet_names_an_unknown_wave_or_cluster_in_either_format() {
    let h = history();
    let repo = h.repo.to_str().unwrap();
    for format in ["human", "json"] {
        for (flag, name, said) in [
            ("--wave", "nope", "no wave \"nope\"; the fleet's waves: "),
            (
                "--cluster",
                "nowhere",
                "no cluster \"nowhere\" in the fleet",
            ),
        ] {
            let out = rota(&[
                "status", "--fleet", "--format", format, flag, name, "--repo", repo,
            ]);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{format} {flag}: {}",
                stderr(&out)
            );
            assert!(
                stderr(&out).contains(said),
                "{format} {flag}: {}",
                stderr(&out)
            );
            assert_eq!(stdout(&out), "", "{format} {flag}: nothing is printed");
        }
    }
    // A known wave is not refused (pools are not done, so the exit says "not done", not 2).
    let out = rota(&[
        "status", "--fleet", "--format", "json", "--wave", "canary", "--repo", repo,
    ]);
    assert_ne!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stdout(&out).contains("\"waves\""), "{}", stdout(&out));
}

/// Past 50 pools `rota status --fleet` leads with a summary per wave and the exceptions and
/// lists no healthy cluster; `--all` and each filter list what they select; JSON carries the
/// summary. The generated fleet (300 clusters, 1,500 pools) says what to expect of it.
#[test]
fn status_of_a_big_fleet_summarizes_lists_exceptions_and_filters() {
    let tmp = tempfile::tempdir().unwrap();
    let e = big_fleet::generate(tmp.path(), 300, chrono::Utc::now());
    assert!(
        e.failing > 0 && e.halted > 0 && e.held_too_long > 0 && e.silent > 0,
        "{e:?}"
    );
    let repo = tmp.path().to_str().unwrap();
    let out = rota(&["status", "--fleet", "--repo", repo]);
    let text = stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "not every pool is done: {}",
        stderr(&out)
    );
    assert!(
        text.contains("300 clusters and 1,500 pools in 3 waves"),
        "{text}{}",
        stderr(&out)
    );
    let counts = format!(
        "exceptions: {} failing · {} halted · {} held too long · {} silent",
        e.failing, e.halted, e.held_too_long, e.silent
    );
    assert!(text.contains(&counts), "{counts} in\n{text}");
    let failing = e.a_failing.unwrap();
    assert!(
        text.contains(&format!(
            "early      {failing}/general: failed: gate pods-healthy"
        )),
        "{text}"
    );
    assert!(text.contains(&format!(
        "{}: no report on this commit",
        e.a_silent.unwrap()
    )));
    // The early wave's shares: general pools on the new target and on the old version.
    assert!(text.contains("2026.11.2 (target)"), "{text}");
    assert!(text.contains("held     "), "what holds early: {text}");
    // c00002 (main, done) is no exception: not listed without --all.
    assert!(!text.contains("c00002"), "{text}");
    assert!(
        text.lines().count() < 120,
        "a summary, not 1,800 lines: {text}"
    );

    let all = stdout(&rota(&["status", "--fleet", "--all", "--repo", repo]));
    assert!(all.contains("c00002") && all.contains("c00299"), "{all}");

    // --state failed: exactly the failing pools, each under its cluster.
    let failed = stdout(&rota(&[
        "status", "--fleet", "--state", "failed", "--repo", repo,
    ]));
    let pools = failed.lines().filter(|l| l.starts_with("    ✗ ")).count();
    assert_eq!(pools, e.failing, "{failed}");
    assert!(!failed.contains("c00002"), "{failed}");
    // --label: the canary clusters (every 100th) and no other.
    let canary = stdout(&rota(&[
        "status",
        "--fleet",
        "--label",
        "ring=canary",
        "--repo",
        repo,
    ]));
    let listed: Vec<&str> = canary
        .lines()
        .filter_map(|l| l.strip_prefix("  ✓ "))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(listed, ["c00000", "c00100", "c00200"], "{canary}");
    // --version with a channel, joined with --wave: main runs general@2026.11.1 only.
    let v = rota(&[
        "status",
        "--fleet",
        "--wave",
        "main",
        "--version",
        "general@2026.11.2",
        "--repo",
        repo,
    ]);
    assert!(!stdout(&v).contains("  ✓ c"), "{}", stdout(&v));
    assert_eq!(v.status.code(), Some(0), "nothing selected is undone");
    // A label not written KEY=VALUE and an unknown state are usage errors.
    for bad in [["--label", "ring"], ["--state", "sleepy"]] {
        let out = rota(&["status", "--fleet", bad[0], bad[1], "--repo", repo]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", stderr(&out));
    }

    let json = rota(&["status", "--fleet", "--format", "json", "--repo", repo]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let s = &v["summary"];
    assert_eq!(s["clusters"], 300);
    assert_eq!(s["exceptionCounts"]["failing"], e.failing);
    assert_eq!(s["exceptionCounts"]["silent"], e.silent);
    assert_eq!(s["waves"][1]["clusters"], e.wave_clusters[1]);
    assert_eq!(
        v["waves"][2]["clusters"].as_array().unwrap().len(),
        e.wave_clusters[2],
        "JSON lists every cluster"
    );
}

/// When only some clusters' notes move (agents reporting), `rota ui` reads those notes
/// again and keeps the rest: what it then holds is what reading everything again gives,
/// for a note rewritten, a notes ref deleted and one that appears.
#[test]
fn reading_only_the_moved_notes_again_equals_reading_them_all() {
    use rota::ui::load::{RepoAt, load, reload_moved_notes};
    let tmp = tempfile::tempdir().unwrap();
    let now = chrono::Utc::now();
    big_fleet::generate(tmp.path(), 300, now);
    let at = RepoAt {
        repo: tmp.path().to_path_buf(),
        rev: "HEAD".into(),
        subdir: None,
        agent_signers: None,
    };
    let (rewritten, deleted, silent) = (big_fleet::name(2), big_fleet::name(3), big_fleet::name(4));
    // A cluster that never reported: no notes ref.
    git(
        tmp.path(),
        &["update-ref", "-d", &format!("refs/notes/rota/{silent}")],
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let before = rt.block_on(load(&at)).unwrap();
    assert!(!before.key.1.iter().any(|(c, _)| c == &silent));
    let head = git(tmp.path(), &["rev-parse", "HEAD"]);
    // c00002 reports anew, c00003's notes ref goes, and c00004 reports for the first time.
    for c in [&rewritten, &silent] {
        let note = serde_json::json!({"cluster": c, "pools": [], "statuses": [
            {"context": format!("rota/{c}"), "state": "failure",
             "description": "reported again", "updatedAt": now.to_rfc3339()}]});
        git(
            tmp.path(),
            &[
                "notes",
                "--ref",
                &format!("rota/{c}"),
                "add",
                "-f",
                "-m",
                &note.to_string(),
                &head,
            ],
        );
    }
    git(
        tmp.path(),
        &["update-ref", "-d", &format!("refs/notes/rota/{deleted}")],
    );
    let again = rt
        .block_on(reload_moved_notes(&at, before.clone()))
        .unwrap();
    let whole = rt.block_on(load(&at)).unwrap();
    assert_ne!(before.key, whole.key, "the notes moved");
    assert_eq!(again.key, whole.key);
    assert_eq!(
        format!("{:?}", again.head_docs),
        format!("{:?}", whole.head_docs)
    );
    // The same records, in whatever order each read found them (the page indexes them).
    let sorted = |l: &rota::ui::load::Loaded| {
        let mut r: Vec<String> = l.records.iter().map(|r| format!("{r:?}")).collect();
        r.sort();
        r
    };
    assert_eq!(sorted(&again), sorted(&whole));
    assert_eq!(again.note_bytes, whole.note_bytes);
    assert_eq!(again.page(now), whole.page(now));
    let described = |c: &str| {
        whole
            .head_docs
            .iter()
            .find(|d| d.cluster == c)
            .map(|d| d.statuses[0].description.clone())
    };
    assert_eq!(described(&rewritten).as_deref(), Some("reported again"));
    assert_eq!(described(&silent).as_deref(), Some("reported again"));
    assert!(described(&deleted).is_none());
}
