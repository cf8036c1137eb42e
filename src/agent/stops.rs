//! The fleet stop at the agent (`rota stop`): each pass reads the orders on the mirror's copy
//! of the stop ref (fetched with the branch on every poll and webhook), checks each order
//! commit's signature against the fleet's commit signers (`--allowed-signers`,
//! `--gpg-keyring`), folds them ([`rota_core::fleet::stops::fold`]) and puts the stop in force
//! for each pool of this cluster into its NodePoolRotation spec, where the controller's
//! planner holds the rotation at its next safe point and a restart finds it again.
//!
//! An order that cannot be read (not JSON, an unknown field, a tree without `order.json`) is
//! named in the log with its commit and acted on in no way. A verifier that cannot run is no
//! verdict: the pass keeps every pool's stop as it is (held stops stay, none is added).

use std::collections::BTreeMap;

use git2::{Oid, Repository};

use super::desired::ClusterIntent;
use crate::source::trust::Verifier;
use rota_core::fleet::resolved::DesiredCluster;
use rota_core::fleet::stops::{self, MAX_ORDERS, ORDER_FILE, Order, Stops, Trust, Written};
use rota_core::rotate::resource::NodePoolRotationSpec;

/// The fold of the orders last read, by the ref's tip: verifying signatures spawns a tool
/// per commit, so it is redone only when the ref moves.
#[derive(Debug, Default)]
pub struct StopCache {
    tip: Option<Oid>,
    stops: Stops,
}

impl StopCache {
    /// The stops at the mirror's stop ref now, read again only if the ref moved. `Err`: the
    /// ref could not be read or a verifier could not run (retry next pass).
    pub fn read(
        &mut self,
        repo: &Repository,
        verifier: Option<&Verifier>,
    ) -> Result<&Stops, String> {
        let tip = repo.refname_to_id(crate::source::REMOTE_STOP_REF).ok();
        if tip != self.tip {
            let stops = match tip {
                None => Stops::default(),
                Some(tip) => {
                    let (orders, unreadable) = read_orders(repo, tip, verifier)?;
                    let mut stops = stops::fold(&orders);
                    stops.refused.splice(0..0, unreadable);
                    stops
                }
            };
            for why in &stops.refused {
                tracing::warn!(reason = "StopOrderRefused", "fleet stop: {why}");
            }
            self.tip = tip;
            self.stops = stops;
        }
        Ok(&self.stops)
    }
}

/// The orders on the stop ref from `tip`, oldest first (at most [`MAX_ORDERS`], the newest),
/// and why each unreadable one was left out.
pub fn read_orders(
    repo: &Repository,
    tip: Oid,
    verifier: Option<&Verifier>,
) -> Result<(Vec<Written>, Vec<String>), String> {
    let mut walk = repo.revwalk().map_err(|e| e.message().to_string())?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::TIME)
        .map_err(|e| e.message().to_string())?;
    walk.push(tip).map_err(|e| e.message().to_string())?;
    let ids: Vec<Oid> = walk.take(MAX_ORDERS).filter_map(Result::ok).collect();
    let mut orders = Vec::new();
    let mut unreadable = Vec::new();
    for id in ids.into_iter().rev() {
        let short = &id.to_string()[..12];
        let commit = repo.find_commit(id).map_err(|e| e.message().to_string())?;
        let order = match order_of(repo, &commit) {
            Ok(o) => o,
            Err(why) => {
                unreadable.push(format!("order {short} {why}: not acted on"));
                continue;
            }
        };
        let author = commit.author();
        let mut by = format!(
            "{} <{}>",
            author.name().unwrap_or("?"),
            author.email().unwrap_or("?")
        );
        let mut trust = Trust::Unverified;
        if let Some(v) = verifier {
            match v.verify(repo, id).map_err(|e| e.to_string())? {
                Ok(signed) => {
                    trust = Trust::Signed;
                    by = signed.signer;
                }
                Err(rejected) => tracing::info!(order = %short, why = %rejected.message,
                    "fleet stop order not signed by a trusted key: counted as unverified"),
            }
        }
        let at = chrono::DateTime::from_timestamp(commit.time().seconds(), 0).unwrap_or_default();
        orders.push(Written {
            id: id.to_string(),
            order,
            by,
            at,
            trust,
        });
    }
    Ok((orders, unreadable))
}

/// The order a commit of the stop ref holds, or why it holds none.
fn order_of(repo: &Repository, commit: &git2::Commit<'_>) -> Result<Order, String> {
    let tree = commit.tree().map_err(|e| e.message().to_string())?;
    let entry = tree
        .get_name(ORDER_FILE)
        .ok_or_else(|| format!("has no {ORDER_FILE}"))?;
    let blob = entry
        .to_object(repo)
        .ok()
        .and_then(|o| o.into_blob().ok())
        .ok_or_else(|| format!("{ORDER_FILE} is not a file"))?;
    Order::parse(blob.content())
}

/// Puts the stop in force for each pool of `cluster` into the specs the pass applies. A
/// stop an existing spec carries stays until a clear at least as trusted lifts it.
pub fn hold(
    intent: &mut ClusterIntent,
    cluster: &DesiredCluster,
    stops: Option<&Stops>,
    existing: &BTreeMap<String, NodePoolRotationSpec>,
) {
    for pool in &mut intent.pools {
        let Some(spec) = pool.spec.as_mut() else {
            continue;
        };
        let held = existing
            .get(&pool.name)
            .and_then(|e| e.policy.stop.as_ref());
        spec.policy.stop = match stops {
            Some(s) => s.for_pool(&cluster.name, &cluster.wave, held),
            // Not read this pass: every pool keeps what it has.
            None => held.cloned(),
        };
    }
}

/// A stopped pool's commit status: who stopped it and why first (a forge shows 140
/// characters), then its nodes.
pub fn commit_text(stop: Option<&stops::FleetStop>, nodes: &str) -> String {
    match stop {
        Some(s) => {
            // `ssh:ana@example.com SHA256:...`: the principal says who; the key is in the note.
            let by = s.by.split(" SHA256:").next().unwrap_or(&s.by);
            format!("stopped by {by} ({}): {} · {nodes}", s.scope(), s.reason)
        }
        None => format!("stopped · {nodes}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(["-c", "user.name=Ana", "-c", "user.email=ana@example.com"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Writes `order` as one commit on the stop ref, signed with `key` when given.
    fn write(dir: &Path, order: &str, key: Option<&Path>) -> String {
        std::fs::write(dir.join("order.tmp"), order).unwrap();
        let blob = git(dir, &["hash-object", "-w", "order.tmp"]);
        let tree = {
            let mut child = Command::new("git")
                .arg("mktree")
                .current_dir(dir)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            writeln!(
                child.stdin.take().unwrap(),
                "100644 blob {blob}\t{ORDER_FILE}"
            )
            .unwrap();
            String::from_utf8(child.wait_with_output().unwrap().stdout)
                .unwrap()
                .trim()
                .to_string()
        };
        // Empty before the first order (rev-parse then fails).
        let parent = Command::new("git")
            .args(["rev-parse", "--verify", "-q", "refs/rota/remote-stop"])
            .current_dir(dir)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let mut args: Vec<String> = Vec::new();
        if let Some(k) = key {
            args.extend([
                "-c".into(),
                "gpg.format=ssh".into(),
                "-c".into(),
                format!("user.signingkey={}", k.display()),
            ]);
        }
        args.extend(["commit-tree".into(), tree, "-m".into(), "order".into()]);
        if key.is_some() {
            args.push("-S".into());
        }
        if !parent.is_empty() {
            args.extend(["-p".into(), parent]);
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let id = git(dir, &refs);
        git(dir, &["update-ref", "refs/rota/remote-stop", &id]);
        id
    }

    fn keygen(dir: &Path, name: &str) -> (std::path::PathBuf, String) {
        let key = dir.join(name);
        let out = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
            .arg(&key)
            .output()
            .expect("ssh-keygen (openssh-client) must be installed");
        assert!(out.status.success());
        let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
        (key, public.trim().to_string())
    }

    fn cluster(name: &str, wave: &str) -> DesiredCluster {
        DesiredCluster {
            name: name.into(),
            labels: BTreeMap::new(),
            cloud: rota_core::fleet::resolved::Cloud::Aws,
            wave: wave.into(),
            wave_index: 0,
            mode: rota_core::fleet::resolved::Mode::Reconcile,
            kubernetes: None,
            pools: vec![],
        }
    }

    /// A signed stop on the ref; an unsigned clear of it (someone with push rights and no
    /// trusted key) is refused and the stop stays; a signed clear lifts it. Then a stop
    /// scoped to another wave holds nothing here, and an unreadable order is named and
    /// not acted on.
    #[test]
    fn a_forged_clear_is_refused_and_a_signed_one_lifts_the_stop() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git(d, &["init", "-q", "--bare"]);
        let (key, public) = keygen(d, "ana");
        let (forger, _) = keygen(d, "mallory");
        let signers = d.join("allowed_signers");
        std::fs::write(
            &signers,
            format!("ana@example.com namespaces=\"git\" {public}\n"),
        )
        .unwrap();
        let verifier = Verifier::new(&crate::source::trust::TrustPolicy {
            ssh_allowed_signers: Some(signers),
            gpg_keyring: None,
        })
        .unwrap();
        let repo = Repository::open(d).unwrap();
        let mut cache = StopCache::default();

        let stop = write(
            d,
            r#"{"action":"stop","wave":"main","reason":"INC-4711"}"#,
            Some(&key),
        );
        let s = cache.read(&repo, Some(&verifier)).unwrap().clone();
        assert_eq!(s.in_force.len(), 1);
        assert_eq!(s.in_force[0].trust, Trust::Signed);
        assert!(
            s.in_force[0].by.contains("ana@example.com"),
            "{}",
            s.in_force[0].by
        );
        let held = s.for_pool("prod", "main", None).unwrap();
        assert_eq!(held.id, stop);
        assert_eq!(s.for_pool("canary", "canary", None), None);

        // Forged: signed by an unknown key, and unsigned.
        let clear = format!(r#"{{"action":"clear","wave":"main","clears":["{stop}"]}}"#);
        write(d, &clear, Some(&forger));
        write(d, &clear, None);
        let s = cache.read(&repo, Some(&verifier)).unwrap().clone();
        assert_eq!(s.in_force.len(), 1, "{s:?}");
        assert_eq!(s.refused.len(), 2, "{:?}", s.refused);
        assert_eq!(s.for_pool("prod", "main", Some(&held)), Some(held.clone()));

        // An unreadable order: named, nothing done.
        write(d, r#"{"action":"clear","clearz":[]}"#, Some(&key));
        let s = cache.read(&repo, Some(&verifier)).unwrap().clone();
        assert!(
            s.refused
                .iter()
                .any(|r| r.contains("order.json:1:") && r.contains("clearz")),
            "{:?}",
            s.refused
        );
        assert_eq!(s.in_force.len(), 1);

        write(d, &clear, Some(&key));
        let s = cache.read(&repo, Some(&verifier)).unwrap().clone();
        assert!(s.in_force.is_empty(), "{s:?}");
        assert_eq!(s.for_pool("prod", "main", Some(&held)), None);
    }

    /// `hold` puts the stop into the specs of the pools it scopes, keeps a held stop the ref
    /// no longer shows (rewritten or deleted), and keeps every stop when the ref could not
    /// be read this pass.
    #[test]
    fn hold_scopes_the_stop_and_keeps_a_held_one() {
        let spec: NodePoolRotationSpec = serde_json::from_value(serde_json::json!({
            "cluster": "prod", "pool": "general",
            "group": {"aws": {"region": "us-east-1", "autoScalingGroup": "g"}},
            "channel": "general", "version": "v2", "image": "ami-0123456789abcdef0",
            "policy": serde_json::to_value(rota_core::fleet::resolved::EffectivePolicy::default()).unwrap(),
            "sourceCommit": "c0ffee"
        }))
        .unwrap();
        let intent = || ClusterIntent {
            pools: vec![super::super::desired::PoolIntent {
                name: "general".into(),
                spec: Some(spec.clone()),
                pinned: ("general".into(), "v2".into()),
                waiting: None,
                held: None,
            }],
            released: vec![],
        };
        let order = |wave: &str| Written {
            id: "ab".repeat(20),
            order: Order::parse(
                format!(r#"{{"action":"stop","wave":"{wave}","reason":"INC"}}"#).as_bytes(),
            )
            .unwrap(),
            by: "ana".into(),
            at: chrono::Utc::now(),
            trust: Trust::Signed,
        };
        let main = stops::fold(&[order("main")]);
        let mut i = intent();
        hold(
            &mut i,
            &cluster("prod", "main"),
            Some(&main),
            &BTreeMap::new(),
        );
        let held = i.pools[0].spec.as_ref().unwrap().policy.stop.clone();
        assert!(held.is_some());
        let mut i = intent();
        hold(
            &mut i,
            &cluster("prod", "canary"),
            Some(&main),
            &BTreeMap::new(),
        );
        assert_eq!(i.pools[0].spec.as_ref().unwrap().policy.stop, None);

        let mut existing_spec = spec.clone();
        existing_spec.policy.stop = held.clone();
        let existing: BTreeMap<_, _> = [("general".to_string(), existing_spec)].into();
        for stops in [Some(&Stops::default()), None] {
            let mut i = intent();
            hold(&mut i, &cluster("prod", "main"), stops, &existing);
            assert_eq!(i.pools[0].spec.as_ref().unwrap().policy.stop, held);
        }
    }
}
