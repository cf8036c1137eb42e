//! Discovery of new images (`rota images discover`), the decision half: what a channel's
//! `source` must be asked for (one query per cloud, region and arch the fleet's pools on that
//! channel need), and, given the clouds' answers, whether to propose a version, wait for its
//! bake (`minAge`) or for a region that has not got the build yet, or do nothing because a
//! version already holds exactly these images. Pure: the lookups are the edge's
//! ([`crate::cloud::NodeGroups::find_image`]), the text edit is the fleet-file editor's
//! ([`crate::edit`]).
//!
//! The version's name comes from the build's name (see [`version_label`]), so that a person
//! reading the pull request sees the release they know, not an ID.

pub mod answers;
pub mod policy;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, SubsecRound, Utc};

use crate::cloud::{Arch, Cloud, FoundImage, ImageQuery};
use crate::fleet::Fleet;
use crate::fleet::model::{AwsImages, Channel, CloudImages, RegionImage};

/// One place a channel's image is needed: a cloud, its region (AWS: AMIs are regional;
/// Azure: the regions its scale sets launch in, for replication; GCP: none, images are
/// global) and an architecture, with the clusters that need it (for messages).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Need {
    pub cloud: Cloud,
    pub region: Option<String>,
    pub arch: Arch,
    pub clusters: Vec<String>,
}

/// Where the pools on `channel` need an image, sorted by cloud, region and arch.
pub fn needs(fleet: &Fleet, channel: &str) -> Vec<Need> {
    let mut by: BTreeMap<(Cloud, Option<String>, Arch), BTreeSet<String>> = BTreeMap::new();
    for (name, c) in &fleet.clusters {
        let Some(cloud) = c.spec.cloud_kind() else {
            continue;
        };
        for p in c.spec.pools.iter().filter(|p| p.channel == channel) {
            let region = match cloud {
                Cloud::Aws | Cloud::Azure => c.spec.region().map(str::to_string),
                Cloud::Gcp => None,
            };
            by.entry((cloud, region, p.arch.unwrap_or_default()))
                .or_default()
                .insert(name.clone());
        }
    }
    by.into_iter()
        .map(|((cloud, region, arch), clusters)| Need {
            cloud,
            region,
            arch,
            clusters: clusters.into_iter().collect(),
        })
        .collect()
}

/// The query for each need, from the channel's `source`. Azure asks once per arch with every
/// region its scale sets use (a gallery version is one ID, replicated). A need whose cloud
/// the source does not cover is an error naming the clusters.
pub fn queries(
    channel_name: &str,
    channel: &Channel,
    needs: &[Need],
) -> Result<Vec<(Vec<Need>, ImageQuery)>, String> {
    let Some(source) = &channel.source else {
        return Err(format!(
            "channel {channel_name} has no source: add spec.images.{channel_name}.source"
        ));
    };
    let missing = |cloud: Cloud, n: &Need| {
        format!(
            "channel {channel_name}: clusters {} are on {cloud} and spec.images.{channel_name}.source has no {cloud}",
            n.clusters.join(", ")
        )
    };
    let mut out: Vec<(Vec<Need>, ImageQuery)> = Vec::new();
    for n in needs {
        let arch = n.arch;
        let query = match n.cloud {
            Cloud::Aws => {
                let aws = source.aws.as_ref().ok_or_else(|| missing(Cloud::Aws, n))?;
                // Checked by validation already; again here, so that a query with no owner
                // (EC2 then answers every public AMI of that name) is never sent.
                if let Some((at, why)) = crate::fleet::image_source::aws_source_problems(aws)
                    .into_iter()
                    .next()
                {
                    return Err(format!(
                        "channel {channel_name}: spec.images.{channel_name}.source.aws{}: {why}",
                        at.replace('/', ".")
                    ));
                }
                let region = n.region.clone().unwrap_or_default();
                match (&aws.ssm_parameter, &aws.name_filter) {
                    (Some(p), _) => ImageQuery::AwsSsm {
                        region,
                        parameter: p.replace("{arch}", arch.as_str()),
                        arch,
                    },
                    (None, Some(f)) => ImageQuery::AwsName {
                        region,
                        name_filter: f.replace("{arch}", arch.as_str()),
                        owners: aws.owners.clone(),
                        arch,
                    },
                    (None, None) => {
                        return Err(format!(
                            "channel {channel_name}: source.aws needs ssmParameter or nameFilter"
                        ));
                    }
                }
            }
            Cloud::Gcp => {
                let g = source.gcp.as_ref().ok_or_else(|| missing(Cloud::Gcp, n))?;
                ImageQuery::GcpFamily {
                    project: g.project.clone(),
                    family: g.family.replace("{arch}", arch.as_str()),
                    arch,
                }
            }
            Cloud::Azure => {
                let a = source
                    .azure
                    .as_ref()
                    .ok_or_else(|| missing(Cloud::Azure, n))?;
                let gallery_image = a.gallery_image.replace("{arch}", arch.as_str());
                // One query per gallery image: the regions of every need it serves.
                if let Some((ns, ImageQuery::AzureGallery { regions, .. })) =
                    out.iter_mut().find(|(_, q)| {
                        matches!(q, ImageQuery::AzureGallery { gallery_image: g, arch: a, .. }
                            if *g == gallery_image && *a == arch)
                    })
                {
                    regions.extend(n.region.clone());
                    ns.push(n.clone());
                    continue;
                }
                ImageQuery::AzureGallery {
                    gallery_image,
                    regions: n.region.iter().cloned().collect(),
                    arch,
                }
            }
        };
        out.push((vec![n.clone()], query));
    }
    Ok(out)
}

/// What discovery concludes for one channel.
// One outcome per channel per discovery run: the size of a proposal (which grew with the
// managed owners' version forms) costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Add this version and pin it on the first wave.
    Propose(Proposal),
    /// A version already holds exactly these images: nothing to do.
    UpToDate { version: String },
    /// The build is younger than `minAge`: propose it once `until` has passed.
    Bake {
        version: String,
        released: DateTime<Utc>,
        until: DateTime<Utc>,
    },
    /// The places disagree on the newest build (a region that has not got it yet, an arch
    /// published later): nothing is proposed; `why` names each place and its build.
    Mismatch { why: String },
}

/// A new version for a channel.
#[derive(Clone, Debug, PartialEq)]
pub struct Proposal {
    pub channel: String,
    pub version: String,
    /// The newest publication time over every place (the build is whole only then).
    pub released: DateTime<Utc>,
    pub images: CloudImages,
    /// Each place's build name, for the commit message.
    pub builds: Vec<String>,
    /// `--security`: why the bake was skipped (the build was younger than `minAge`).
    pub bake_skipped: Option<String>,
}

/// Decides for one channel from the clouds' answers (each query's needs with its image).
pub fn decide(
    channel_name: &str,
    channel: &Channel,
    found: &[(Vec<Need>, FoundImage)],
    now: DateTime<Utc>,
    security: Option<&str>,
) -> Outcome {
    // Every place must carry the same build: the name without its arch token.
    let mut builds: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (ns, img) in found {
        for n in ns {
            builds
                .entry(version_label(&build_name(&img.name)))
                .or_default()
                .push(format!("{} ({})", place(n), img.name));
        }
    }
    if builds.len() > 1 {
        let why = builds
            .iter()
            .map(|(b, places)| format!("{b}: {}", places.join(", ")))
            .collect::<Vec<_>>()
            .join("; ");
        return Outcome::Mismatch {
            why: format!("the newest build differs between places: {why}"),
        };
    }
    let Some(label) = builds.into_keys().next() else {
        return Outcome::Mismatch {
            why: format!("no cluster has a pool on channel {channel_name}"),
        };
    };
    let Some(images) = images_of(found) else {
        return Outcome::Mismatch {
            why: "GCP and Azure versions hold one image for every arch, and the arches' builds differ".into(),
        };
    };
    // Already there (whatever its name): nothing to do, even if no wave pins it any more
    // (a revert is not undone by discovery).
    if let Some((v, _)) = channel.versions.iter().find(|(_, have)| {
        found.iter().all(|(ns, img)| {
            ns.iter().all(|n| {
                have.resolve(n.cloud, n.region.as_deref(), n.arch).ok() == Some(img.id.as_str())
            })
        })
    }) {
        return Outcome::UpToDate { version: v.clone() };
    }
    // To the second, as the repo writes it (so that the version reads back the same).
    let released = found
        .iter()
        .map(|(_, i)| i.created)
        .max()
        .unwrap_or(now)
        .trunc_subsecs(0);
    // A name taken by other images (a rebuild under the same release) gets a suffix.
    let mut version = label.clone();
    let mut n = 2;
    while channel.versions.contains_key(&version) {
        version = format!("{label}-{n}");
        n += 1;
    }
    let mut bake_skipped = None;
    if let Some(min) = channel.min_age {
        let until = released
            + chrono::Duration::from_std(min.as_duration()).unwrap_or(chrono::Duration::zero());
        if now < until {
            match security {
                None => {
                    return Outcome::Bake {
                        version,
                        released,
                        until,
                    };
                }
                Some(why) => bake_skipped = Some(why.to_string()),
            }
        }
    }
    let mut builds: Vec<String> = found.iter().map(|(_, i)| i.name.clone()).collect();
    builds.sort();
    builds.dedup();
    Outcome::Propose(Proposal {
        channel: channel_name.to_string(),
        version,
        released,
        images: CloudImages {
            released: Some(released),
            ..images
        },
        builds,
        bake_skipped,
    })
}

fn place(n: &Need) -> String {
    match &n.region {
        Some(r) => format!("{} {r} {}", n.cloud, n.arch),
        None => format!("{} {}", n.cloud, n.arch),
    }
}

/// The version's images: AWS always by region (an x86_64-only region as a plain ID, else a
/// map by arch); GCP and Azure one ID, which must then be the same for every arch.
fn images_of(found: &[(Vec<Need>, FoundImage)]) -> Option<CloudImages> {
    let mut aws: BTreeMap<String, BTreeMap<Arch, String>> = BTreeMap::new();
    let mut out = CloudImages::default();
    for (ns, img) in found {
        for n in ns {
            let slot = match n.cloud {
                Cloud::Aws => {
                    aws.entry(n.region.clone().unwrap_or_default())
                        .or_default()
                        .insert(n.arch, img.id.clone());
                    continue;
                }
                Cloud::Gcp => &mut out.gcp,
                Cloud::Azure => &mut out.azure,
            };
            match slot {
                Some(have) if *have != img.id => return None,
                _ => *slot = Some(img.id.clone()),
            }
        }
    }
    if !aws.is_empty() {
        out.aws = Some(AwsImages::ByRegion(
            aws.into_iter()
                .map(|(region, by_arch)| {
                    let one = by_arch.len() == 1 && by_arch.contains_key(&Arch::X86_64);
                    let img = if one {
                        RegionImage::One(by_arch.into_values().next().unwrap_or_default())
                    } else {
                        RegionImage::ByArch(by_arch)
                    };
                    (region, img)
                })
                .collect(),
        ));
    }
    Some(out)
}

/// A build's name: the image's name without its architecture token (`x86_64`, `arm64`,
/// `amd64`, `aarch64`, with the separator before it), so that an AMI of each arch of one
/// release compares equal: `acme-general-arm64-2026-11-3` → `acme-general-2026-11-3`.
pub fn build_name(name: &str) -> String {
    let mut out = name.to_string();
    for token in ["x86_64", "arm64", "amd64", "aarch64"] {
        for sep in ['-', '_', '.', '/'] {
            out = out.replace(&format!("{sep}{token}"), "");
        }
        out = out.replace(token, "");
    }
    out
}

/// The version name of a build: its trailing release, read the way people write releases.
/// The last `-`-separated token if it is a dotted version (`v1.26.2` → `1.26.2`,
/// `2026.11.3`); else the run of all-digit tokens at the end joined with dots
/// (`acme-general-2026-11-3` → `2026.11.3`, `...-1.31-v20241109` → `20241109`); else the
/// whole name (a build whose name ends in a hash is still told apart).
pub fn version_label(build: &str) -> String {
    let tokens: Vec<&str> = build.split('-').collect();
    let last = tokens.last().copied().unwrap_or("");
    let bare = |t: &str| t.strip_prefix('v').unwrap_or(t).to_string();
    let digits = |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_digit());
    let l = bare(last);
    if l.contains('.')
        && l.chars().all(|c| c.is_ascii_digit() || c == '.')
        && l.starts_with(|c: char| c.is_ascii_digit())
    {
        return l;
    }
    if digits(&l) {
        let mut run = vec![l];
        for t in tokens.iter().rev().skip(1) {
            if !digits(t) {
                break;
            }
            run.push(t.to_string());
        }
        run.reverse();
        return run.join(".");
    }
    build.to_string()
}

/// AWS's name filter: `*` any run of characters, `?` one character.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = name.chars().collect();
    // Iterative matching with one backtrack point (the last `*`): linear for these filters.
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < s.len() {
        if i < p.len() && (p[i] == '?' || p[i] == s[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests;
