//! `rota clusters import`'s decisions: a cluster's pools as their owners listed them
//! ([`FoundCluster`], filled in by the edges from EKS, Auto Scaling, the simulated cloud...)
//! written as the fleet repo's `clusters/<name>.yaml` ([`render`]), and what a run would
//! change in a file that is already there ([`compare`]).
//!
//! The file is a function of what the owners list, and nothing else: pools sorted by name,
//! a comment per pool naming where it came from, no date, no size and no image (those
//! change with every rotation), so that importing the same cluster twice writes the same
//! bytes. A file that differs is never overwritten by default (see `src/cli/clusters.rs`):
//! it was edited by hand (a channel, a rollout, gates), and [`compare`] names only what
//! the owners say differently, pool by pool.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde_json::Value;

use crate::fleet::yaml;

/// The cloud section of the Cluster: `(key, value)` pairs in the order written, under the
/// cloud's key (`aws: {region: us-east-1, eksCluster: prod}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundCloud {
    /// `aws`, `gcp` or `azure`.
    pub cloud: &'static str,
    pub fields: Vec<(&'static str, String)>,
}

/// One pool as its owner lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundPool {
    /// The owner's name for the pool (made a DNS-1123 label by [`pool_name`]).
    pub name: String,
    /// The pool's `group`, keys in the order written (`eksNodegroup: general`, or
    /// `scaleSet: x, resourceGroup: y`).
    pub group: Vec<(&'static str, String)>,
    /// The labels that pick the pool's nodes, as the owner labels them.
    pub node_selector: BTreeMap<String, String>,
    /// The CPU architecture of the pool's machines as the owner's image says it
    /// (`x86_64`, `arm64`), when it could be read: a pool written without `arch` takes the
    /// x86_64 AMI of a version, which an arm64 node group cannot boot.
    pub arch: Option<String>,
    /// Where it came from, for the comment: `EKS managed node group general of cluster prod
    /// (DescribeNodegroup)`.
    pub source: String,
}

/// A cluster's pools, from every owner that was asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundCluster {
    /// The Cluster's `metadata.name`.
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub cloud: FoundCloud,
    /// The channel every imported pool starts on (the user picks it: the owners do not
    /// know the fleet's channels).
    pub channel: String,
    pub pools: Vec<FoundPool>,
    /// `mode: readOnly` for the whole cluster: its agent plans and reports, changes nothing
    /// (how a cluster is best onboarded, docs/howto/onboard-cluster.md).
    pub read_only: bool,
    /// The command that wrote the file, for its header.
    pub command: String,
}

/// A DNS-1123 label from an owner's name: lower case, other characters as `-`, at most 63,
/// no leading or trailing `-` (`Spot_GPU.large` -> `spot-gpu-large`).
pub fn pool_name(owner_name: &str) -> String {
    let mut s: String = owner_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    s.truncate(63);
    let s = s.trim_matches('-').to_string();
    if s.is_empty() { "pool".to_string() } else { s }
}

/// `Err` saying why, when `name` cannot be a Cluster's name (a DNS-1123 label: lower case
/// letters, digits and `-`, at most 63, starting and ending with a letter or digit): the
/// file would not validate, and the name is the file's too.
pub fn check_cluster_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a cluster name: lower case letters, digits and '-', at most 63, \
             starting and ending with a letter or digit (try {:?})",
            pool_name(name)
        ))
    }
}

/// A scalar as YAML writes it (quoted where plain YAML would read something else).
fn scalar(s: &str) -> String {
    yaml::to_yaml(&Value::String(s.to_string()))
        .trim_end()
        .to_string()
}

fn flow(pairs: impl IntoIterator<Item = (String, String)>) -> String {
    let inner: Vec<String> = pairs
        .into_iter()
        .map(|(k, v)| format!("{}: {}", scalar(&k), scalar(&v)))
        .collect();
    format!("{{{}}}", inner.join(", "))
}

fn group_text(group: &[(&'static str, String)]) -> String {
    flow(group.iter().map(|(k, v)| (k.to_string(), v.clone())))
}

/// The pools with unique names (a second pool with the same name gets `-2`, `-3`, in the
/// order of their groups), sorted by name.
fn named(pools: &[FoundPool]) -> Vec<(String, &FoundPool)> {
    let mut sorted: Vec<&FoundPool> = pools.iter().collect();
    sorted.sort_by(|a, b| {
        (pool_name(&a.name), group_text(&a.group)).cmp(&(pool_name(&b.name), group_text(&b.group)))
    });
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for p in sorted {
        let base = pool_name(&p.name);
        let mut name = base.clone();
        let mut n = 2;
        while !seen.insert(name.clone()) {
            name = format!("{}-{n}", &base[..base.len().min(60)]);
            n += 1;
        }
        out.push((name, p));
    }
    out
}

/// `clusters/<name>.yaml` for the cluster found.
pub fn render(found: &FoundCluster) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Written by `{}` from the pools' owners.\n\
         # Each pool's comment says where it came from. Edit freely: running the import again\n\
         # never overwrites an edited file, it lists what the owners say differently.",
        found.command
    );
    out.push_str("apiVersion: rota.dev/v1alpha1\nkind: Cluster\nmetadata:\n");
    let _ = writeln!(out, "  name: {}", scalar(&found.name));
    if !found.labels.is_empty() {
        let _ = writeln!(out, "  labels: {}", flow(found.labels.clone()));
    }
    out.push_str("spec:\n  cloud:\n");
    let _ = writeln!(
        out,
        "    {}: {}",
        found.cloud.cloud,
        flow(
            found
                .cloud
                .fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
        )
    );
    if found.read_only {
        out.push_str("  mode: readOnly  # the agent plans and reports, changes nothing\n");
    }
    if found.pools.is_empty() {
        out.push_str("  pools: []  # no owner listed a pool of this cluster\n");
        return out;
    }
    out.push_str("  pools:\n");
    for (name, p) in named(&found.pools) {
        let _ = writeln!(out, "    # {}", p.source.replace('\n', " "));
        // A group whose nodes' labels no owner states cannot be selected: it is written
        // commented out, for a person to complete, so that the file stays valid.
        let lead = if p.node_selector.is_empty() {
            out.push_str(
                "    # Its nodes' labels are not known: set nodeSelector to the labels that pick\n    \
                 # them, and uncomment the pool.\n",
            );
            "    # "
        } else {
            "    "
        };
        let _ = writeln!(out, "{lead}- name: {name}");
        let _ = writeln!(out, "{lead}  channel: {}", scalar(&found.channel));
        // x86_64 is the default: written only when it is not.
        if let Some(a) = p.arch.as_deref().filter(|a| *a != "x86_64") {
            let _ = writeln!(out, "{lead}  arch: {}", scalar(a));
        }
        let _ = writeln!(
            out,
            "{lead}  nodeSelector: {}",
            flow(p.node_selector.clone())
        );
        let _ = writeln!(out, "{lead}  group: {}", group_text(&p.group));
    }
    out
}

/// What importing again would change in `existing` (the file as it is), pool by pool,
/// matched by `group`: pools the owners list that the file lacks, pools of the file no
/// owner lists, and pools whose `nodeSelector` differs from the owner's labels. What only
/// the file says (the name, the channel, a rollout, gates) is the user's and not compared.
/// `Err` when the file cannot be read as a Cluster, with the file's name and why.
pub fn compare(file: &str, existing: &str, found: &FoundCluster) -> Result<Vec<String>, String> {
    let docs = yaml::parse(file, existing)
        .map_err(|d| crate::fleet::diagnostics::Diagnostics::from(d).to_string())?;
    let cluster = docs
        .iter()
        .find(|d| d.value.get("kind").and_then(Value::as_str) == Some("Cluster"))
        .ok_or_else(|| format!("{file}: no Cluster document"))?;
    let pools = cluster
        .value
        .pointer("/spec/pools")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let key_of = |v: &Value| -> String {
        let group = v.get("group").and_then(Value::as_object);
        let mut pairs: Vec<(String, String)> = group
            .map(|g| {
                g.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        pairs.sort();
        flow(pairs)
    };
    let mut in_file: BTreeMap<String, &Value> = BTreeMap::new();
    for p in &pools {
        in_file.insert(key_of(p), p);
    }
    let mut changes = Vec::new();
    let mut listed = BTreeSet::new();
    for (name, p) in named(&found.pools) {
        let mut pairs: Vec<(String, String)> = p
            .group
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        pairs.sort();
        let key = flow(pairs);
        listed.insert(key.clone());
        let Some(v) = in_file.get(&key) else {
            if p.node_selector.is_empty() {
                continue; // written commented out, for a person to complete
            }
            changes.push(format!(
                "would add pool {name} {}: {}",
                group_text(&p.group),
                p.source
            ));
            continue;
        };
        let pool = v.get("name").and_then(Value::as_str).unwrap_or("?");
        let selector: BTreeMap<String, String> = v
            .get("nodeSelector")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let arch = v.get("arch").and_then(Value::as_str).unwrap_or("x86_64");
        if let Some(a) = p.arch.as_deref().filter(|a| *a != arch) {
            changes.push(format!(
                "pool {pool}: arch {arch} in the file, the owner's image is {a} (its nodes \
                 cannot boot the other architecture's image)"
            ));
        }
        if selector != p.node_selector {
            changes.push(format!(
                "pool {pool}: nodeSelector {} in the file, the owner labels its nodes {}",
                flow(selector),
                flow(p.node_selector.clone())
            ));
        }
    }
    for (key, v) in &in_file {
        if !listed.contains(key) {
            let pool = v.get("name").and_then(Value::as_str).unwrap_or("?");
            changes.push(format!(
                "pool {pool} {key}: no owner lists it any more (kept; remove it by hand if it is gone)"
            ));
        }
    }
    Ok(changes)
}

/// What an import does with the file it would write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// No file yet: write `text`.
    New { text: String },
    /// The file holds exactly what the import writes: nothing to do.
    Unchanged,
    /// The file differs (edited by hand, or the owners changed): it is kept unless the user
    /// forces `text` over it; `changes` are what the owners say differently (empty: only
    /// the user's own edits differ).
    Differs { text: String, changes: Vec<String> },
}

/// The outcome of importing `found` into `file`, which holds `existing` (if it exists).
pub fn outcome(
    file: &str,
    existing: Option<&str>,
    found: &FoundCluster,
) -> Result<Outcome, String> {
    let text = render(found);
    match existing {
        None => Ok(Outcome::New { text }),
        Some(e) if e == text => Ok(Outcome::Unchanged),
        Some(e) => Ok(Outcome::Differs {
            changes: compare(file, e, found)?,
            text,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found() -> FoundCluster {
        FoundCluster {
            name: "prod-use1".into(),
            labels: BTreeMap::from([("ring".into(), "main".into())]),
            cloud: FoundCloud {
                cloud: "aws",
                fields: vec![
                    ("region", "us-east-1".into()),
                    ("eksCluster", "prod".into()),
                ],
            },
            channel: "general".into(),
            pools: vec![
                FoundPool {
                    name: "Spot_GPU".into(),
                    group: vec![("autoScalingGroup", "spot-gpu-asg".into())],
                    node_selector: BTreeMap::from([("pool".into(), "gpu".into())]),
                    arch: Some("arm64".into()),
                    source: "Auto Scaling group spot-gpu-asg".into(),
                },
                FoundPool {
                    name: "general".into(),
                    group: vec![("eksNodegroup", "general".into())],
                    node_selector: BTreeMap::from([(
                        "eks.amazonaws.com/nodegroup".into(),
                        "general".into(),
                    )]),
                    arch: Some("x86_64".into()),
                    source: "EKS managed node group general".into(),
                },
            ],
            read_only: false,
            command: "rota clusters import prod-use1 --cloud aws".into(),
        }
    }

    #[test]
    fn pools_are_written_sorted_with_their_source_and_the_text_is_stable() {
        let text = render(&found());
        let general = text.find("- name: general").unwrap();
        let gpu = text.find("- name: spot-gpu").unwrap();
        assert!(general < gpu, "{text}");
        assert!(text.contains("    # EKS managed node group general\n    - name: general\n"));
        assert!(text.contains("group: {eksNodegroup: general}"), "{text}");
        assert!(
            text.contains("nodeSelector: {eks.amazonaws.com/nodegroup: general}"),
            "{text}"
        );
        assert!(text.contains("aws: {region: us-east-1, eksCluster: prod}"));
        let mut shuffled = found();
        shuffled.pools.reverse();
        assert_eq!(render(&shuffled), text);
    }

    #[test]
    fn a_file_as_written_has_no_change_and_edits_of_the_users_fields_are_not_changes() {
        let f = found();
        let text = render(&f);
        assert_eq!(compare("c.yaml", &text, &f).unwrap(), Vec::<String>::new());
        let edited = text
            .replace("channel: general", "channel: gpu")
            .replace("- name: spot-gpu", "- name: accel");
        assert_eq!(
            compare("c.yaml", &edited, &f).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn added_removed_and_relabelled_pools_are_named() {
        let f = found();
        let text = render(&f);
        let mut now = f.clone();
        now.pools.remove(0);
        now.pools[0].node_selector =
            BTreeMap::from([("eks.amazonaws.com/nodegroup".into(), "general-v2".into())]);
        now.pools.push(FoundPool {
            name: "batch".into(),
            group: vec![("eksNodegroup", "batch".into())],
            node_selector: BTreeMap::from([("eks.amazonaws.com/nodegroup".into(), "batch".into())]),
            arch: None,
            source: "EKS managed node group batch".into(),
        });
        let changes = compare("c.yaml", &text, &now).unwrap();
        assert_eq!(changes.len(), 3, "{changes:#?}");
        assert!(changes[0].starts_with("would add pool batch {eksNodegroup: batch}"));
        assert!(changes[1].starts_with("pool general: nodeSelector"));
        assert!(
            changes[2]
                .starts_with("pool spot-gpu {autoScalingGroup: spot-gpu-asg}: no owner lists it")
        );
    }

    #[test]
    fn a_group_without_known_labels_is_written_commented_out_and_not_reported() {
        let mut f = found();
        f.pools[0].node_selector.clear();
        let text = render(&f);
        assert!(
            text.contains("    # - name: spot-gpu\n    #   channel: general\n"),
            "{text}"
        );
        let docs = yaml::parse("c.yaml", &text).unwrap();
        let pools = docs[0].value.pointer("/spec/pools").unwrap();
        assert_eq!(pools.as_array().unwrap().len(), 1, "{text}");
        assert_eq!(compare("c.yaml", &text, &f).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn a_second_import_is_unchanged_and_an_edited_file_is_kept() {
        let f = found();
        let Outcome::New { text } = outcome("c.yaml", None, &f).unwrap() else {
            panic!("a new file")
        };
        assert_eq!(
            outcome("c.yaml", Some(&text), &f).unwrap(),
            Outcome::Unchanged
        );
        let edited = text.replace("channel: general", "channel: gpu");
        assert_eq!(
            outcome("c.yaml", Some(&edited), &f).unwrap(),
            Outcome::Differs {
                text: text.clone(),
                changes: vec![]
            }
        );
        let err = outcome("c.yaml", Some("kind: [\n"), &f).unwrap_err();
        assert!(err.contains("c.yaml"), "{err}");
    }

    #[test]
    fn read_only_is_written_under_spec() {
        let mut f = found();
        f.read_only = true;
        let text = render(&f);
        let docs = yaml::parse("c.yaml", &text).unwrap();
        assert_eq!(
            docs[0].value.pointer("/spec/mode").and_then(Value::as_str),
            Some("readOnly"),
            "{text}"
        );
    }

    #[test]
    fn a_cluster_name_must_be_a_label() {
        assert!(check_cluster_name("prod-use1").is_ok());
        for bad in [
            "",
            "Prod",
            "prod_use1",
            "-prod",
            "prod-",
            "../etc",
            &"a".repeat(64),
        ] {
            let err = check_cluster_name(bad).unwrap_err();
            assert!(err.contains("is not a cluster name"), "{err}");
        }
    }

    #[test]
    fn an_arm64_pool_says_so_and_a_file_that_lost_it_is_told() {
        let f = found();
        let text = render(&f);
        assert!(
            text.contains("- name: spot-gpu\n      channel: general\n      arch: arm64\n"),
            "{text}"
        );
        assert!(!text.contains("arch: x86_64"), "{text}");
        let lost = text.replace("      arch: arm64\n", "");
        let changes = compare("c.yaml", &lost, &f).unwrap();
        assert_eq!(changes.len(), 1, "{changes:#?}");
        assert!(
            changes[0]
                .starts_with("pool spot-gpu: arch x86_64 in the file, the owner's image is arm64"),
            "{changes:#?}"
        );
    }

    #[test]
    fn owner_names_become_labels_and_duplicates_are_numbered() {
        assert_eq!(pool_name("Spot_GPU.large"), "spot-gpu-large");
        assert_eq!(pool_name("--"), "pool");
        let mut f = found();
        f.pools[0].name = "general".into();
        let text = render(&f);
        assert!(text.contains("- name: general\n"));
        assert!(text.contains("- name: general-2\n"), "{text}");
    }
}
