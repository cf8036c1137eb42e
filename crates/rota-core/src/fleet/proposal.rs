//! The body of a proposal's pull request (an image, a promotion, a revert), as a reviewer
//! reads it: a summary per wave first (pools and clusters, version changes, clouds and
//! regions, with counts), the evidence the proposal rests on, what to watch once merged, and
//! the per-pool table only while the whole body fits the forge's limit. Past it, the table
//! is left to a file on the proposal's branch that the body links to. Pure: the diff, the
//! fleet and the texts in, Markdown out, never longer than the limit it is given.
//!
//! Why: at 400 clusters the per-pool table alone is 328,394 characters for one wave; GitHub
//! refuses a body over 65,536 characters (422 "body is too long"), and nobody reads 1,424
//! rows to learn "general 2026.11.1 → 2026.11.2 on 390 clusters in 12 regions".

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::diff::{ChangeKind, FleetDiff, PoolChange, WaveChanges};
use super::resolved::Cloud;
use super::valid::Fleet;

/// GitHub refuses a pull request body over 65,536 characters: `422 Validation Failed`,
/// `body is too long (maximum is 65536 characters)` (the API's own message; the limit is
/// not in its reference pages).
pub const GITHUB_BODY_MAX: usize = 65_536;
/// GitLab's limit for an issuable's description is 1 megabyte ("description: 1 megabyte",
/// docs.gitlab.com/ee/development/issuable-like-models, "Important text fields").
pub const GITLAB_DESCRIPTION_MAX: usize = 1_048_576;
/// Gitea and Forgejo set no limit of their own on a pull request's body (the issue's
/// content is a LONGTEXT column, `models/issues` in go-gitea/gitea); rota holds it to
/// GitHub's, which keeps the body readable and the same on every forge.
pub const GITEA_BODY_MAX: usize = GITHUB_BODY_MAX;

/// What the caller knows beside the diff: the evidence the proposal rests on (the guard's
/// answer, the build and its bake, the failures a revert answers), Markdown lines; and where
/// the full per-pool table goes when it does not fit (a path on the proposal's branch, and a
/// link to it when the forge's web address is known).
#[derive(Clone, Debug, Default)]
pub struct BodyInput<'a> {
    pub evidence: &'a str,
    pub full_diff_path: &'a str,
    pub full_diff_link: Option<&'a str>,
}

/// The composed body, and whether its per-pool table had to go to the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Body {
    pub text: String,
    /// The table is not in the body: the caller must put it at `full_diff_path`.
    pub table_in_file: bool,
}

/// One wave's image changes, counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WaveSummary {
    pub wave: String,
    pub pools: usize,
    pub clusters: usize,
    /// (channel, from, to) → pools; `–` for a pool added or removed.
    pub versions: BTreeMap<(String, String, String), usize>,
    /// Cloud → its regions (AWS and GCP regions, Azure locations) among the clusters.
    pub regions: BTreeMap<Cloud, BTreeSet<String>>,
    /// Pools whose other settings change, clusters that join the wave.
    pub settings: usize,
    pub moved: usize,
    /// Health gates of the changing pools, by name.
    pub gates: BTreeSet<String>,
}

/// Per wave with changes, in rollout order: what changes, where.
pub fn summarize(diff: &FleetDiff, from: &Fleet, to: &Fleet) -> Vec<WaveSummary> {
    diff.waves
        .iter()
        .filter(|w| !w.changes.is_empty() || !w.moved.is_empty())
        .map(|w| wave_summary(w, from, to))
        .collect()
}

fn wave_summary(w: &WaveChanges, from: &Fleet, to: &Fleet) -> WaveSummary {
    let mut s = WaveSummary {
        wave: w.wave.clone(),
        moved: w.moved.len(),
        ..Default::default()
    };
    let mut clusters = BTreeSet::new();
    // Each cluster resolved once: its pools' gates (a 400-cluster wave has 1,424 rows).
    let mut resolved: BTreeMap<&str, Option<super::resolved::DesiredCluster>> = BTreeMap::new();
    for c in &w.changes {
        if !c.settings.is_empty() {
            s.settings += 1;
        }
        if !c.changes_image() {
            continue;
        }
        s.pools += 1;
        clusters.insert(c.cluster.as_str());
        *s.versions.entry(version_change(c)).or_default() += 1;
        // The cluster as the side that has it declares it (a removed one only in `from`).
        let fleet = if c.kind == ChangeKind::Removed {
            from
        } else {
            to
        };
        if let Some((cloud, region)) = place(fleet, &c.cluster) {
            s.regions.entry(cloud).or_default().insert(region);
        }
        let cluster = resolved
            .entry(c.cluster.as_str())
            .or_insert_with(|| to.resolve_cluster(&c.cluster).ok());
        if let Some(p) = cluster
            .as_ref()
            .and_then(|dc| dc.pools.iter().find(|p| p.name == c.pool))
        {
            s.gates.extend(p.gates.iter().map(|g| g.name.clone()));
        }
    }
    s.clusters = clusters.len();
    s
}

fn version_change(c: &PoolChange) -> (String, String, String) {
    let channel =
        c.to.as_ref()
            .or(c.from.as_ref())
            .map(|r| r.channel.clone())
            .unwrap_or_default();
    let side = |r: &Option<super::diff::ImageRef>| {
        r.as_ref()
            .map(|r| r.version.clone())
            .unwrap_or_else(|| "–".into())
    };
    (channel, side(&c.from), side(&c.to))
}

/// The cloud and region (Azure: location) a cluster declares.
fn place(fleet: &Fleet, cluster: &str) -> Option<(Cloud, String)> {
    let cloud = &fleet.clusters.get(cluster)?.spec.cloud;
    if let Some(a) = &cloud.aws {
        return Some((Cloud::Aws, a.region.clone()));
    }
    if let Some(g) = &cloud.gcp {
        return Some((Cloud::Gcp, g.region().unwrap_or("unset").to_string()));
    }
    let az = cloud.azure.as_ref()?;
    Some((
        Cloud::Azure,
        az.location.clone().unwrap_or_else(|| "unset".into()),
    ))
}

/// `1,424`.
pub fn count(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

fn plural(n: usize, one: &str) -> String {
    format!("{} {one}{}", count(n), if n == 1 { "" } else { "s" })
}

impl WaveSummary {
    /// `1,424 pools in 390 clusters: general 2026.11.1 → 2026.11.2; AWS 7 regions, GCP 2,
    /// Azure 3`, then settings and moves when there are.
    pub fn line(&self) -> String {
        let mut parts = Vec::new();
        if self.pools > 0 {
            let versions: Vec<String> = self
                .versions
                .iter()
                .map(|((ch, from, to), n)| {
                    let change = match (from.as_str(), to.as_str()) {
                        ("–", t) => format!("{ch} {t} (added)"),
                        (f, "–") => format!("{ch} {f} (removed: rota stops managing it)"),
                        (f, t) => format!("{ch} {f} → {t}"),
                    };
                    if self.versions.len() > 1 {
                        format!("{change} ({})", plural(*n, "pool"))
                    } else {
                        change
                    }
                })
                .collect();
            let clouds: Vec<String> = self
                .regions
                .iter()
                .enumerate()
                .map(|(i, (cloud, regions))| {
                    let name = match cloud {
                        Cloud::Aws => "AWS",
                        Cloud::Gcp => "GCP",
                        Cloud::Azure => "Azure",
                    };
                    // "AWS 7 regions, GCP 2": the unit once, as one says it.
                    match (i, regions.len()) {
                        (0, n) => format!("{name} {}", plural(n, "region")),
                        (_, n) => format!("{name} {}", count(n)),
                    }
                })
                .collect();
            let mut s = format!(
                "{} in {}: {}",
                plural(self.pools, "pool"),
                plural(self.clusters, "cluster"),
                versions.join(", ")
            );
            if !clouds.is_empty() {
                s += &format!("; {}", clouds.join(", "));
            }
            parts.push(s);
        }
        if self.settings > 0 {
            parts.push(format!(
                "{} {} settings",
                plural(self.settings, "pool"),
                if self.settings == 1 {
                    "changes"
                } else {
                    "change"
                }
            ));
        }
        if self.moved > 0 {
            parts.push(format!("{} join the wave", plural(self.moved, "cluster")));
        }
        parts.join("; ")
    }
}

/// The summary and what to watch: the part of the body that is always there.
fn lead(waves: &[WaveSummary], diff: &FleetDiff) -> String {
    let mut out = String::from("### Summary\n\n");
    if waves.is_empty() {
        out += "No pool changes image.\n";
    }
    for w in waves {
        let _ = writeln!(out, "- **wave {}**: {}", w.wave, w.line());
    }
    if !diff.fleet.is_empty() {
        let _ = writeln!(
            out,
            "- **fleet**: {}",
            diff.fleet
                .iter()
                .map(|s| format!("`{}` {} → {}", s.field, s.from, s.to))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    out
}

fn watch(waves: &[WaveSummary]) -> String {
    let mut out = String::from("### What to watch once merged\n\n");
    for w in waves.iter().filter(|w| w.pools > 0) {
        let _ = writeln!(
            out,
            "- wave {}: `rota status --fleet --wave {}` (each pool's commit status on the merge commit says its batch and what holds it)",
            w.wave, w.wave
        );
        if !w.gates.is_empty() {
            let _ = writeln!(
                out,
                "  - health gates: {} (a failing gate stops or rolls back the pool)",
                w.gates.iter().cloned().collect::<Vec<_>>().join(", ")
            );
        }
    }
    out += "- stops: `rota status --fleet --exception failing` and `--exception halted` list the pools that need a person, each with its next step\n";
    out
}

/// The body for `diff` (from `from` to `to`) with the caller's evidence, at most `limit`
/// characters (as the forges count them: Unicode scalar values).
pub fn compose(
    diff: &FleetDiff,
    from: &Fleet,
    to: &Fleet,
    input: &BodyInput<'_>,
    limit: usize,
) -> Body {
    let waves = summarize(diff, from, to);
    let mut head = lead(&waves, diff);
    let evidence = input.evidence.trim_end();
    if !evidence.is_empty() {
        head += "\n### Evidence\n\n";
        head += evidence;
        head += "\n";
    }
    head += "\n";
    head += &watch(&waves);
    let table = diff.render_markdown();
    let whole = format!("{head}\n### Per pool\n\n{table}");
    if whole.chars().count() <= limit {
        return Body {
            text: whole,
            table_in_file: false,
        };
    }
    let rows = diff.change_count() + diff.settings_count();
    let where_ = match input.full_diff_link {
        Some(link) => format!("[`{}`]({link})", input.full_diff_path),
        None => format!("`{}`", input.full_diff_path),
    };
    let text = format!(
        "{head}\n### Per pool\n\nThe per-pool table ({} for {}, {} characters) is longer than this forge takes in a body; it is in {where_} on this branch (`rota diff` prints it too).\n",
        plural(rows, "row"),
        plural(diff.change_count(), "pool"),
        count(table.chars().count()),
    );
    Body {
        text: cut(text, limit),
        table_in_file: true,
    }
}

/// `text` cut to `limit` characters when longer (a huge evidence list), saying so.
fn cut(text: String, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text;
    }
    const NOTE: &str = "\n\n… (cut at the forge's limit for a body)\n";
    let keep = limit.saturating_sub(NOTE.chars().count());
    let mut out: String = text.chars().take(keep).collect();
    out += NOTE;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::load_files;
    use crate::fleet::source_file::SourceFile;

    /// `n` AWS clusters over 7 regions, 3 GCP regions... each with one `general` pool, in
    /// wave `main` pinned to `version`.
    fn fleet(version: &str, aws: usize, gcp: usize, azure: usize) -> Fleet {
        let regions = [
            "us-east-1",
            "us-east-2",
            "us-west-1",
            "us-west-2",
            "eu-west-1",
            "eu-central-1",
            "ap-southeast-2",
        ];
        // An AMI per region and version: an AMI exists in one region only.
        let amis = |v: usize| {
            let per: Vec<String> = regions
                .iter()
                .enumerate()
                .map(|(r, name)| format!("{name}: ami-{:017x}", v * 16 + r))
                .collect();
            format!("{{{}}}", per.join(", "))
        };
        let gallery = "/subscriptions/s1/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/general/versions";
        let mut y = format!(
            r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {{name: acme}}
spec:
  images:
    general:
      versions:
        "2026.11.1": {{aws: {}, gcp: projects/acme/global/images/g-1, azure: {gallery}/2026.11.1}}
        "2026.11.2": {{aws: {}, gcp: projects/acme/global/images/g-2, azure: {gallery}/2026.11.2}}
  waves:
    - name: main
      clusterSelector: {{matchLabels: {{ring: main}}}}
      images: {{general: "{version}"}}
"#,
            amis(1),
            amis(2)
        );
        let pool = "  pools:\n    - name: general\n      channel: general\n      nodeSelector: {pool: general}\n";
        for i in 0..aws {
            y += &format!(
                "---\napiVersion: rota.dev/v1alpha1\nkind: Cluster\nmetadata: {{name: aws-{i:04}, labels: {{ring: main}}}}\nspec:\n  cloud: {{aws: {{region: {}}}}}\n{pool}      group: {{autoScalingGroup: general}}\n",
                regions[i % regions.len()]
            );
        }
        for i in 0..gcp {
            y += &format!(
                "---\napiVersion: rota.dev/v1alpha1\nkind: Cluster\nmetadata: {{name: gcp-{i:04}, labels: {{ring: main}}}}\nspec:\n  cloud: {{gcp: {{project: p, region: us-central{}}}}}\n{pool}      group: {{instanceGroupManager: general, region: us-central{}}}\n",
                i % 2 + 1,
                i % 2 + 1
            );
        }
        for i in 0..azure {
            y += &format!(
                "---\napiVersion: rota.dev/v1alpha1\nkind: Cluster\nmetadata: {{name: az-{i:04}, labels: {{ring: main}}}}\nspec:\n  cloud: {{azure: {{subscriptionId: s1, resourceGroup: rg, location: {}}}}}\n{pool}      group: {{scaleSet: general}}\n",
                ["westeurope", "northeurope", "eastus"][i % 3]
            );
        }
        load_files(&[SourceFile::new("fleet.yaml", y)]).unwrap_or_else(|d| panic!("{d}"))
    }

    #[test]
    fn the_summary_counts_pools_clusters_versions_and_regions() {
        let (from, to) = (fleet("2026.11.1", 14, 4, 3), fleet("2026.11.2", 14, 4, 3));
        let d = crate::fleet::diff::diff(&from, &to);
        let waves = summarize(&d, &from, &to);
        assert_eq!(waves.len(), 1);
        assert_eq!(
            waves[0].line(),
            "21 pools in 21 clusters: general 2026.11.1 → 2026.11.2; AWS 7 regions, GCP 2, Azure 3"
        );
        let body = compose(&d, &from, &to, &BodyInput::default(), GITHUB_BODY_MAX);
        assert!(!body.table_in_file, "a small change keeps its table");
        assert!(
            body.text
                .starts_with("### Summary\n\n- **wave main**: 21 pools")
        );
        assert!(
            body.text.contains("| aws-0000/general | changed |"),
            "{}",
            body.text
        );
    }

    /// 400 clusters: the table goes to the file, the body stays under GitHub's limit and
    /// still leads with the whole change.
    #[test]
    fn a_fleet_sized_change_fits_the_limit_with_its_table_in_a_file() {
        let (from, to) = (
            fleet("2026.11.1", 380, 12, 8),
            fleet("2026.11.2", 380, 12, 8),
        );
        let d = crate::fleet::diff::diff(&from, &to);
        let input = BodyInput {
            evidence: "- wave canary soaked 2h",
            full_diff_path: ".rota/proposals/rota-promote-main.md",
            full_diff_link: Some(
                "https://forge/acme/fleet/blob/rota/promote/main/.rota/proposals/rota-promote-main.md",
            ),
        };
        // A limit the table alone exceeds.
        let limit = 20_000;
        assert!(d.render_markdown().chars().count() > limit);
        let body = compose(&d, &from, &to, &input, limit);
        assert!(body.table_in_file);
        assert!(body.text.chars().count() <= limit);
        assert!(body.text.contains("400 pools in 400 clusters: general 2026.11.1 → 2026.11.2; AWS 7 regions, GCP 2, Azure 3"), "{}", body.text);
        assert!(body.text.contains("- wave canary soaked 2h"));
        assert!(
            body.text
                .contains("[`.rota/proposals/rota-promote-main.md`](https://forge/")
        );
        assert!(
            body.text.contains("400 rows for 400 pools"),
            "{}",
            body.text
        );
        // Evidence longer than any limit: cut, and said so.
        let long = "- x\n".repeat(limit);
        let body = compose(
            &d,
            &from,
            &to,
            &BodyInput {
                evidence: &long,
                ..input
            },
            limit,
        );
        assert_eq!(body.text.chars().count(), limit);
        assert!(
            body.text
                .ends_with("(cut at the forge's limit for a body)\n")
        );
    }

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(count(7), "7");
        assert_eq!(count(1424), "1,424");
        assert_eq!(count(1_000_000), "1,000,000");
    }
}
