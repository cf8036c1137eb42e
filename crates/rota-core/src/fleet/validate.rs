//! Semantic validation: every rule of the contract that a JSON Schema cannot say (unique names
//! across files, wave membership, pins, images per cloud, group forms, gate references, time
//! zones...). Runs on typed documents, collects every problem, and builds the [`Fleet`] only
//! when there is none.

use std::collections::{BTreeMap, BTreeSet};

use super::diagnostics::{Diagnostic, Diagnostics, Location, did_you_mean};
use super::load::{Documents, Origin};
use super::model::{
    Arch, Cluster, FleetManifest, FleetSpec, GroupSpec, HealthGate, Pool, RolloutPolicy,
};
use super::resolved::Cloud;
use super::valid::Fleet;
use super::yaml::escape_token;

/// Channel → AWS region → the clusters with a pool on that channel there: what the
/// one-AMI-in-many-regions rule reads once every cluster was looked at.
type AwsRegions<'a> = BTreeMap<&'a str, BTreeMap<&'a str, Vec<&'a str>>>;

/// Check the documents together; `Ok` only when nothing is wrong (including earlier `diags`).
/// The rules run by group (the documents' count, gates, the Fleet, each cluster and its
/// pools, then the rules that need every cluster): each group reports every problem it sees,
/// so one mistake does not hide the next.
pub fn check(docs: Documents, mut diags: Diagnostics) -> Result<Fleet, Diagnostics> {
    let Documents {
        fleets,
        clusters,
        gates,
        rejected,
    } = docs;
    let rejected_named = |kind: &str| -> Vec<String> {
        rejected
            .iter()
            .filter(|(k, _)| k == kind)
            .map(|(_, n)| n.clone())
            .collect()
    };
    let (rejected_gates, rejected_clusters) =
        (rejected_named("HealthGate"), rejected_named("Cluster"));
    let fleet_hidden = rejected.iter().any(|(k, _)| k == "Fleet");
    // Without a valid Fleet, the checks that need it are skipped, the others still run: a
    // typo in fleet.yaml must not hide the mistakes in cluster files.
    let fleet_doc = one_fleet(fleets, fleet_hidden, &mut diags);

    let gates = unique("HealthGate", gates, &mut diags, |g: &HealthGate| {
        &g.metadata.name
    });
    let clusters = unique("Cluster", clusters, &mut diags, |c: &Cluster| {
        &c.metadata.name
    });
    // Rejected gates count as declared: their own error is enough.
    let gate_names: Vec<&str> = gates
        .keys()
        .chain(&rejected_gates)
        .map(String::as_str)
        .collect();

    for (origin, g) in gates.values() {
        check_health_gate(origin, g, &mut diags);
    }
    if let Some((fleet_origin, fleet)) = &fleet_doc {
        check_fleet(
            fleet_origin,
            &fleet.spec,
            &clusters,
            &rejected_clusters,
            &gate_names,
            &mut diags,
        );
    }

    let fleet_ref = fleet_doc.as_ref().map(|(o, f)| (o, &f.spec));
    let mut aws_regions = AwsRegions::new();
    let mut wave_of = BTreeMap::new();
    for (name, (origin, c)) in &clusters {
        let spec = fleet_ref.map(|(_, spec)| spec);
        let wave_index = wave_membership(spec, name, origin, c, &mut diags);
        if let Some(i) = wave_index {
            wave_of.insert(name.clone(), i);
        }
        ClusterCheck {
            name,
            origin,
            cluster: c,
            fleet: fleet_ref,
            wave_index,
            gate_names: &gate_names,
        }
        .run(&mut aws_regions, &mut diags);
    }

    if let Some((fleet_origin, fleet)) = &fleet_doc {
        check_one_ami_across_regions(fleet_origin, &fleet.spec, &aws_regions, &mut diags);
        super::managed::check_fleet_versions(fleet_origin, fleet, &mut diags);
    }
    let warnings = super::managed::warnings(fleet_doc.as_ref(), &clusters).sorted();
    let fleet = match fleet_doc {
        Some((_, fleet)) if diags.is_empty() => fleet,
        _ => return Err(diags.sorted()),
    };
    Ok(Fleet {
        metadata: fleet.metadata,
        spec: fleet.spec,
        clusters: clusters.into_iter().map(|(k, (_, c))| (k, c)).collect(),
        gates: gates.into_iter().map(|(k, (_, g))| (k, g)).collect(),
        wave_of,
        commit: None,
        warnings,
    })
}

/// The repo's one Fleet document: none and a second one are errors. "None" is only worth
/// saying when the Fleet is not simply hidden behind another error (a file that failed to
/// parse may well hold it).
fn one_fleet(
    fleets: Vec<(Origin, FleetManifest)>,
    fleet_hidden: bool,
    diags: &mut Diagnostics,
) -> Option<(Origin, FleetManifest)> {
    if fleets.is_empty() && !fleet_hidden && diags.is_empty() {
        diags.push(Diagnostic::new(
            &Location::default(),
            "",
            "no Fleet document found: a fleet repo holds exactly one `kind: Fleet`",
        ));
    }
    for (origin, _) in fleets.iter().skip(1) {
        diags.push(
            origin
                .error(
                    "/metadata/name",
                    "a second Fleet document: a repo holds exactly one",
                )
                .with_hint(format!(
                    "the first is at {}",
                    fleets[0].0.describe("/metadata/name")
                )),
        );
    }
    fleets.into_iter().next()
}

/// A HealthGate has exactly one kind of check, with a bound, and no credentials in a URL.
fn check_health_gate(origin: &Origin, g: &HealthGate, diags: &mut Diagnostics) {
    let s = &g.spec;
    let kinds = [s.prometheus.is_some(), s.pods.is_some(), s.events.is_some()]
        .iter()
        .filter(|k| **k)
        .count();
    if kinds != 1 {
        diags.push(origin.key_error(
            "/spec",
            format!("a HealthGate has exactly one of prometheus, pods, events; found {kinds}"),
        ));
    }
    if let Some(p) = &s.prometheus {
        if has_userinfo(&p.address) {
            diags.push(origin.error("/spec/prometheus/address", CREDENTIALS_IN_URL));
        }
        match (p.min, p.max) {
            (None, None) => diags.push(origin.key_error(
                "/spec/prometheus",
                "a prometheus gate needs a bound: `min`, `max` or both",
            )),
            (Some(lo), Some(hi)) if lo > hi => diags.push(origin.error(
                "/spec/prometheus/min",
                format!("min {lo} is greater than max {hi}: the gate could never pass"),
            )),
            _ => {}
        }
    }
    if let Some(p) = &s.pods
        && p.max_not_ready.is_none()
        && p.max_pending.is_none()
    {
        diags.push(origin.key_error(
            "/spec/pods",
            "a pods gate needs a bound: `maxNotReady`, `maxPending` or both",
        ));
    }
}

/// The one wave a cluster belongs to (by name or by a `clusterSelector` on its labels): none
/// and several are errors. `None` without a Fleet to say.
fn wave_membership(
    spec: Option<&FleetSpec>,
    name: &str,
    origin: &Origin,
    c: &Cluster,
    diags: &mut Diagnostics,
) -> Option<usize> {
    let spec = spec?;
    let waves: Vec<usize> = spec
        .waves
        .iter()
        .enumerate()
        .filter(|(_, w)| {
            w.clusters.iter().any(|n| n == name)
                || w.cluster_selector
                    .as_ref()
                    .is_some_and(|s| s.matches(&c.metadata.labels))
        })
        .map(|(i, _)| i)
        .collect();
    match waves.as_slice() {
        [] => {
            diags.push(
                origin
                    .error("/metadata/name", format!("cluster `{name}` belongs to no wave"))
                    .with_hint("list it in a wave's `clusters`, or give it labels a wave's `clusterSelector` matches"),
            );
            None
        }
        [one] => Some(*one),
        many => {
            let names: Vec<&str> = many.iter().map(|i| spec.waves[*i].name.as_str()).collect();
            diags.push(origin.error(
                "/metadata/name",
                format!(
                    "cluster `{name}` belongs to {} waves ({}): it must be in exactly one",
                    many.len(),
                    names.join(", ")
                ),
            ));
            None
        }
    }
}

/// One cluster's rules: its gates, policy, notifications and cloud, then each pool's (unique
/// names and selectors, group, gates, policy, and the image its wave pins for it).
struct ClusterCheck<'a> {
    name: &'a str,
    origin: &'a Origin,
    cluster: &'a Cluster,
    fleet: Option<(&'a Origin, &'a FleetSpec)>,
    wave_index: Option<usize>,
    gate_names: &'a [&'a str],
}

impl<'a> ClusterCheck<'a> {
    fn run(&self, aws_regions: &mut AwsRegions<'a>, diags: &mut Diagnostics) {
        let (origin, c) = (self.origin, self.cluster);
        check_gate_refs(origin, "/spec/gates", &c.spec.gates, self.gate_names, diags);
        check_policy(origin, "/spec/rollout", &c.spec.rollout, diags);
        check_notifications(origin, c.spec.notifications.as_deref(), diags);
        super::managed::check_cloud(origin, c, diags);

        let mut pool_names: BTreeMap<&str, usize> = BTreeMap::new();
        let mut selectors: BTreeMap<&BTreeMap<String, String>, usize> = BTreeMap::new();
        // Pools of one cluster on one channel take one pin: its skew is said once.
        let mut skew_checked: BTreeSet<&str> = BTreeSet::new();
        for (i, pool) in c.spec.pools.iter().enumerate() {
            let pp = format!("/spec/pools/{i}");
            if let Some(first) = pool_names.insert(&pool.name, i) {
                diags.push(
                    origin
                        .error(
                            &format!("{pp}/name"),
                            format!(
                                "duplicate pool name `{}` in cluster `{}`",
                                pool.name, self.name
                            ),
                        )
                        .with_hint(format!(
                            "the first is at {}",
                            origin.describe(&format!("/spec/pools/{first}/name"))
                        )),
                );
            }
            if let Some(first) = selectors.insert(&pool.node_selector, i) {
                diags.push(origin.error(
                    &format!("{pp}/nodeSelector"),
                    format!(
                        "pools `{}` and `{}` have the same nodeSelector: each node must belong to one pool",
                        c.spec.pools[first].name, pool.name
                    ),
                ));
            }
            self.pool(&pp, pool, aws_regions, diags);
            let first_of_channel = skew_checked.insert(&pool.channel);
            self.pool_image(&pp, pool, first_of_channel, diags);
        }
    }

    /// A pool's group, gates and policy, and where its AWS cluster is (for the AMI rule).
    fn pool(
        &self,
        pp: &str,
        pool: &'a Pool,
        aws_regions: &mut AwsRegions<'a>,
        diags: &mut Diagnostics,
    ) {
        let (origin, c) = (self.origin, self.cluster);
        let cloud = c.spec.cloud_kind();
        if let Some(cloud) = cloud {
            check_group(origin, &format!("{pp}/group"), cloud, &pool.group, diags);
        }
        check_gate_refs(
            origin,
            &format!("{pp}/gates"),
            &pool.gates,
            self.gate_names,
            diags,
        );
        check_policy(origin, &format!("{pp}/rollout"), &pool.rollout, diags);
        self.pool_strategy(pp, pool, diags);
        let owner = pool.group.owner();
        super::managed::check_managed_update(origin, pp, owner, &pool.rollout, diags);
        if let (Some(Cloud::Aws), Some(region)) = (cloud, c.spec.region()) {
            let on_channel = aws_regions.entry(pool.channel.as_str()).or_default();
            let clusters = on_channel.entry(region).or_default();
            if clusters.last() != Some(&self.name) {
                clusters.push(self.name);
            }
        }
    }

    /// `rollout.strategy` as it reaches the pool from the fleet, the cluster and the pool.
    fn pool_strategy(&self, pp: &str, pool: &Pool, diags: &mut Diagnostics) {
        use super::strategy::Level;
        let mut levels = Vec::new();
        if let Some((fo, spec)) = self.fleet {
            levels.push(Level {
                origin: fo,
                pointer: "/spec/rollout".into(),
                policy: &spec.rollout,
            });
        }
        levels.push(Level {
            origin: self.origin,
            pointer: "/spec/rollout".into(),
            policy: &self.cluster.spec.rollout,
        });
        levels.push(Level {
            origin: self.origin,
            pointer: format!("{pp}/rollout"),
            policy: &pool.rollout,
        });
        super::strategy::check_pool(self.name, pool, &levels, diags);
    }

    /// The pool's channel is declared and pinned by its wave, the pinned version's
    /// Kubernetes fits the cluster (once per channel), and the version has an image the
    /// pool's owner, cloud, region and architecture can boot.
    fn pool_image(&self, pp: &str, pool: &Pool, first_of_channel: bool, diags: &mut Diagnostics) {
        let (origin, c, name) = (self.origin, self.cluster, self.name);
        let Some((fleet_origin, spec)) = self.fleet else {
            return;
        };
        let channel_at = format!("{pp}/channel");
        let Some(channel) = spec.images.get(&pool.channel) else {
            let mut d = origin.error(
                &channel_at,
                format!(
                    "pool `{}` uses channel `{}`, which the Fleet's spec.images does not declare",
                    pool.name, pool.channel
                ),
            );
            if let Some(s) = did_you_mean(&pool.channel, spec.images.keys().map(String::as_str)) {
                d = d.with_hint(format!("did you mean `{s}`?"));
            }
            diags.push(d);
            return;
        };
        let Some(wave_index) = self.wave_index else {
            return;
        };
        let wave = &spec.waves[wave_index];
        let Some(version) = wave.images.get(&pool.channel) else {
            diags.push(
                origin
                    .error(
                        &channel_at,
                        format!(
                            "channel `{}` is not pinned in wave `{}`",
                            pool.channel, wave.name
                        ),
                    )
                    .with_hint(format!(
                        "add `{}: <version>` to the images of wave `{}`",
                        pool.channel, wave.name
                    )),
            );
            return;
        };
        let images = channel.versions.get(version);
        if let (Some(images), true) = (images, first_of_channel) {
            super::kubernetes::PinnedOnCluster {
                fleet: fleet_origin,
                wave_index,
                wave: &wave.name,
                channel: &pool.channel,
                version,
                images,
                cluster_origin: origin,
                cluster: name,
                control_plane: c.spec.kubernetes.as_deref(),
            }
            .check(diags);
        }
        let Some((cloud, images)) = c.spec.cloud_kind().zip(images) else {
            return;
        };
        let owner = pool.group.owner();
        let arch = pool.arch.unwrap_or_default();
        let found = match images.owner_image(owner, c.spec.region(), arch) {
            // An owner in another cloud has its own error; its images are not looked at.
            _ if owner.cloud().is_some_and(|o| o != cloud) => Ok(()),
            Some(r) => r.map(drop),
            None => images.resolve(cloud, c.spec.region(), arch).map(drop),
        };
        let Err(miss) = found else { return };
        let pinned = Pinned {
            pool,
            version,
            wave: &wave.name,
            cloud,
            arch,
        };
        diags.push(self.image_miss(pp, &channel_at, &pinned, miss));
    }

    /// The error for a pinned version without an image this pool can boot.
    fn image_miss(
        &self,
        pp: &str,
        channel_at: &str,
        p: &Pinned<'_>,
        miss: super::model::ImageMiss,
    ) -> Diagnostic {
        let (origin, c, name) = (self.origin, self.cluster, self.name);
        let (pool, version, cloud, arch) = (p.pool, p.version, p.cloud, p.arch);
        let describe = |miss| super::resolve::describe_miss(&pool.channel, version, cloud, miss);
        match miss {
            miss @ super::model::ImageMiss::Form { .. } => origin
                .error(
                    channel_at,
                    format!(
                        "pool `{}` of cluster `{name}` ({}): {} (pinned by wave `{}`)",
                        pool.name,
                        pool.group.owner().group_key(),
                        describe(&miss),
                        p.wave
                    ),
                )
                .with_hint(format!(
                    "add it to spec.images.{}.versions.{version} of the Fleet",
                    pool.channel
                )),
            super::model::ImageMiss::Cloud => origin.error(
                channel_at,
                format!(
                    "{}@{version} (pinned by wave `{}`) has no image for {cloud}, the cloud of cluster `{name}`",
                    pool.channel, p.wave
                ),
            ),
            miss => {
                let at = if pool.arch.is_some() {
                    format!("{pp}/arch")
                } else {
                    channel_at.to_string()
                };
                let region = c.spec.region();
                origin
                    .error(
                        &at,
                        format!(
                            "pool `{}` of cluster `{name}` ({}, arch {arch}): {} (pinned by wave `{}`)",
                            pool.name,
                            region.unwrap_or("no region"),
                            describe(&miss),
                            p.wave
                        ),
                    )
                    .with_hint(match arch {
                        // A plain ID per region serves x86_64 pools.
                        Arch::X86_64 => format!(
                            "add the region's AMI to the version: aws: {{…, {}: ami-…}}",
                            region.unwrap_or("<region>")
                        ),
                        _ => format!(
                            "add the region's AMI for {arch} to the version: aws: {{…, {}: {{x86_64: ami-…, {arch}: ami-…}}}}",
                            region.unwrap_or("<region>")
                        ),
                    })
            }
        }
    }
}

/// What a wave pins for one pool, as an image miss names it.
struct Pinned<'p> {
    pool: &'p Pool,
    version: &'p str,
    wave: &'p str,
    cloud: Cloud,
    arch: Arch,
}

/// A plain AMI ID exists in one region. A pinned version is on its way to every cluster of
/// its channel (promotion moves it wave by wave), so one AMI for a channel whose AWS
/// clusters span regions fails to launch somewhere, now or at the next promotion. Versions
/// no wave pins are history and not held to it.
fn check_one_ami_across_regions(
    fleet_origin: &Origin,
    spec: &FleetSpec,
    aws_regions: &AwsRegions<'_>,
    diags: &mut Diagnostics,
) {
    let pinned: BTreeSet<(&str, &str)> = spec
        .waves
        .iter()
        .flat_map(|w| w.images.iter().map(|(c, v)| (c.as_str(), v.as_str())))
        .collect();
    for (channel, c) in &spec.images {
        let Some(regions) = aws_regions.get(channel.as_str()) else {
            continue;
        };
        if regions.len() < 2 {
            continue;
        }
        for (version, images) in &c.versions {
            if !pinned.contains(&(channel.as_str(), version.as_str()))
                || !matches!(images.aws, Some(super::model::AwsImages::One(_)))
            {
                continue;
            }
            let named: Vec<String> = regions
                .iter()
                .map(|(r, cs)| format!("{r} ({})", cs.join(", ")))
                .collect();
            let p = format!(
                "/spec/images/{}/versions/{}/aws",
                escape_token(channel),
                escape_token(version)
            );
            diags.push(
                fleet_origin
                    .error(
                        &p,
                        format!(
                            "{channel}@{version} has one AMI, but the AWS clusters on channel `{channel}` are in {} regions: {}; an AMI ID exists in one region only",
                            regions.len(),
                            named.join(", ")
                        ),
                    )
                    .with_hint(format!(
                        "map it by region: aws: {{{}}}",
                        regions
                            .keys()
                            .map(|r| format!("{r}: ami-…"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
            );
        }
    }
}

/// An AWS region's shape: `us-east-1`, `ap-southeast-2`, `us-gov-west-1`.
fn is_aws_region(r: &str) -> bool {
    let parts: Vec<&str> = r.split('-').collect();
    parts.len() >= 3
        && parts[0].len() == 2
        && parts[..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts[parts.len() - 1].bytes().all(|b| b.is_ascii_digit())
        && !parts[parts.len() - 1].is_empty()
}

/// The Fleet's own rules: image IDs, gates, policy, waves and their pins.
fn check_fleet(
    fleet_origin: &Origin,
    spec: &FleetSpec,
    clusters: &BTreeMap<String, (Origin, Cluster)>,
    rejected_clusters: &[String],
    gate_names: &[&str],
    diags: &mut Diagnostics,
) {
    let cluster_names: Vec<&str> = clusters.keys().map(String::as_str).collect();
    for (channel, c) in &spec.images {
        if let Some(aws) = c.source.as_ref().and_then(|s| s.aws.as_ref()) {
            for (at, why) in super::image_source::aws_source_problems(aws) {
                let p = format!("/spec/images/{}/source/aws{at}", escape_token(channel));
                diags.push(fleet_origin.error(&p, why));
            }
        }
        for (version, images) in &c.versions {
            if let Some(super::model::AwsImages::ByRegion(m)) = &images.aws {
                for region in m.keys().filter(|r| !is_aws_region(r)) {
                    let p = format!(
                        "/spec/images/{}/versions/{}/aws/{}",
                        escape_token(channel),
                        escape_token(version),
                        escape_token(region)
                    );
                    diags.push(fleet_origin.error(
                        &p,
                        format!(
                            "{region:?} is not an AWS region such as us-east-1 or ap-southeast-2"
                        ),
                    ));
                }
            }
            for (cloud, at, id) in images.ids() {
                if let Err(why) = check_image(cloud, id) {
                    let p = format!(
                        "/spec/images/{}/versions/{}/{at}",
                        escape_token(channel),
                        escape_token(version)
                    );
                    diags.push(fleet_origin.error(&p, why));
                }
            }
        }
    }
    check_regional_amis(fleet_origin, spec, diags);
    check_gate_refs(fleet_origin, "/spec/gates", &spec.gates, gate_names, diags);
    check_policy(fleet_origin, "/spec/rollout", &spec.rollout, diags);
    check_notifications(fleet_origin, spec.notifications.as_deref(), diags);

    let mut seen_waves: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, w) in spec.waves.iter().enumerate() {
        let wp = format!("/spec/waves/{i}");
        if let Some(first) = seen_waves.insert(&w.name, i) {
            diags.push(
                fleet_origin
                    .error(
                        &format!("{wp}/name"),
                        format!("duplicate wave name `{}`", w.name),
                    )
                    .with_hint(format!(
                        "the first is at {}",
                        fleet_origin.describe(&format!("/spec/waves/{first}/name"))
                    )),
            );
        }
        if w.clusters.is_empty() && w.cluster_selector.is_none() {
            diags.push(fleet_origin.error(
                &wp,
                format!(
                    "wave `{}` selects no cluster: give it `clusters` or a `clusterSelector`",
                    w.name
                ),
            ));
        }
        for (j, c) in w.clusters.iter().enumerate() {
            if !clusters.contains_key(c) && !rejected_clusters.contains(c) {
                let mut d = fleet_origin.error(
                    &format!("{wp}/clusters/{j}"),
                    format!(
                        "wave `{}` lists cluster `{c}`, which no Cluster document declares",
                        w.name
                    ),
                );
                if let Some(s) = did_you_mean(c, cluster_names.iter().copied()) {
                    d = d.with_hint(format!("did you mean `{s}`?"));
                }
                diags.push(d);
            }
        }
        for (channel, version) in &w.images {
            let pin = format!("{wp}/images/{}", escape_token(channel));
            match spec.images.get(channel) {
                None => {
                    let mut d = fleet_origin.key_error(
                        &pin,
                        format!("wave `{}` pins channel `{channel}`, which spec.images does not declare", w.name),
                    );
                    if let Some(s) = did_you_mean(channel, spec.images.keys().map(String::as_str)) {
                        d = d.with_hint(format!("did you mean `{s}`?"));
                    }
                    diags.push(d);
                }
                Some(c) if !c.versions.contains_key(version) => {
                    let mut d = fleet_origin.error(
                        &pin,
                        format!("wave `{}` pins {channel}@{version}, but channel `{channel}` has no version `{version}`", w.name),
                    );
                    let known: Vec<&str> = c.versions.keys().map(String::as_str).collect();
                    // Versions are all alike, so a "did you mean" would be a guess: list them.
                    d = d.with_hint(format!("known versions: {}", known.join(", ")));
                    diags.push(d);
                }
                Some(_) => {}
            }
        }
    }
}

/// An AMI ID exists in one region only: the same ID pinned under two regions (the usual
/// copy-paste slip when a version gains a region) would make the second region's pools
/// launch an image their region does not have. Each later place is an error that names the
/// first, file and line.
fn check_regional_amis(origin: &Origin, spec: &FleetSpec, diags: &mut Diagnostics) {
    // ID -> (region, pointer) of its first place, in channel, version, region order.
    let mut first: BTreeMap<&str, (&str, String)> = BTreeMap::new();
    for (channel, c) in &spec.images {
        for (version, images) in &c.versions {
            let Some(super::model::AwsImages::ByRegion(m)) = &images.aws else {
                continue;
            };
            for (region, img) in m {
                let at = format!(
                    "/spec/images/{}/versions/{}/aws/{}",
                    escape_token(channel),
                    escape_token(version),
                    escape_token(region)
                );
                let ids: Vec<(String, &str)> = match img {
                    super::model::RegionImage::One(id) => vec![(at, id.as_str())],
                    super::model::RegionImage::ByArch(a) => a
                        .iter()
                        .map(|(arch, id)| (format!("{at}/{arch}"), id.as_str()))
                        .collect(),
                };
                for (pointer, id) in ids {
                    match first.get(id) {
                        Some((r, p)) if *r != region.as_str() => {
                            let there = origin.describe(p);
                            diags.push(
                                origin
                                    .error(
                                        &pointer,
                                        format!(
                                            "{id} is pinned under {region} here and under {r} at {there}; an AMI ID exists in one region only"
                                        ),
                                    )
                                    .with_hint(format!(
                                        "copy the AMI to {region} and pin the copy's ID (aws ec2 copy-image), or rota images discover finds each region's own"
                                    )),
                            );
                        }
                        Some(_) => {}
                        None => {
                            first.insert(id, (region.as_str(), pointer));
                        }
                    }
                }
            }
        }
    }
}

/// Index documents by name; later duplicates are errors that point at the first.
fn unique<T>(
    kind: &str,
    docs: Vec<(Origin, T)>,
    diags: &mut Diagnostics,
    name: impl Fn(&T) -> &String,
) -> BTreeMap<String, (Origin, T)> {
    let mut out: BTreeMap<String, (Origin, T)> = BTreeMap::new();
    for (origin, doc) in docs {
        let n = name(&doc).clone();
        if let Some((first, _)) = out.get(&n) {
            diags.push(
                origin
                    .error("/metadata/name", format!("duplicate {kind} name `{n}`"))
                    .with_hint(format!(
                        "the first is at {}",
                        first.describe("/metadata/name")
                    )),
            );
            continue;
        }
        out.insert(n, (origin, doc));
    }
    out
}

fn check_gate_refs(
    origin: &Origin,
    at: &str,
    names: &[String],
    known: &[&str],
    diags: &mut Diagnostics,
) {
    for (i, g) in names.iter().enumerate() {
        if !known.contains(&g.as_str()) {
            let mut d = origin.error(
                &format!("{at}/{i}"),
                format!("gate `{g}` is not declared by any HealthGate document"),
            );
            if let Some(s) = did_you_mean(g, known.iter().copied()) {
                d = d.with_hint(format!("did you mean `{s}`?"));
            }
            diags.push(d);
        }
    }
}

/// Said instead of the URL, which is not echoed: it holds a password.
const CREDENTIALS_IN_URL: &str = "a user name or password in a URL is refused: it would be in git and in every log line that names the URL (the URL is not repeated here)";

/// Whether an `http(s)://` URL carries `user[:password]@` before its host.
fn has_userinfo(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .unwrap_or(url);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    authority.contains('@')
}

/// `urlFile` named a path the agent opened (`/dev/zero` made it read without end): refused,
/// with the way to migrate.
fn check_notifications(
    origin: &Origin,
    hooks: Option<&[super::model::WebhookSpec]>,
    diags: &mut Diagnostics,
) {
    for (i, h) in hooks.unwrap_or_default().iter().enumerate() {
        if h.url.as_deref().is_some_and(has_userinfo) {
            diags.push(origin.error(&format!("/spec/notifications/{i}/url"), CREDENTIALS_IN_URL));
        }
        if h.url_file.is_some() {
            diags.push(
                origin
                    .key_error(
                        &format!("/spec/notifications/{i}/urlFile"),
                        "urlFile is no longer supported: the fleet repo names secrets, it never names a file the agent opens",
                    )
                    .with_hint("put the URL in the Secret mounted at the agent's --secrets-dir and write `urlSecret: <key of that Secret>`"),
            );
        }
    }
}

/// What a schema cannot check in a policy: time zones exist, windows are not empty,
/// blackouts end after they begin.
fn check_policy(origin: &Origin, at: &str, p: &RolloutPolicy, diags: &mut Diagnostics) {
    for (i, b) in p.blackouts.iter().flatten().enumerate() {
        if b.to <= b.from {
            diags.push(origin.error(
                &format!("{at}/blackouts/{i}/to"),
                format!(
                    "blackout ends at {} but begins at {}: it would never hold",
                    b.to.to_rfc3339(),
                    b.from.to_rfc3339()
                ),
            ));
        }
    }
    for (i, w) in p.windows.iter().flatten().enumerate() {
        let wp = format!("{at}/windows/{i}");
        if let Some(tz) = &w.time_zone
            && tz.parse::<chrono_tz::Tz>().is_err()
        {
            let mut d = origin.error(
                &format!("{wp}/timeZone"),
                format!("unknown time zone {tz:?}: expected an IANA name such as Europe/Berlin"),
            );
            if let Some(s) = did_you_mean(tz, chrono_tz::TZ_VARIANTS.iter().map(|t| t.name())) {
                d = d.with_hint(format!("did you mean `{s}`?"));
            }
            diags.push(d);
        }
        if w.start == w.end {
            diags.push(origin.error(
                &format!("{wp}/end"),
                format!("window starts and ends at {}: it would never open", w.start),
            ));
        }
    }
}

/// The group form must match the cloud of its cluster.
fn check_group(origin: &Origin, at: &str, cloud: Cloud, g: &GroupSpec, diags: &mut Diagnostics) {
    if super::managed::check_group(origin, at, cloud, g, diags) {
        return;
    }
    let form = super::managed::forms(cloud);
    let (required, allowed): (&str, &[&str]) = match cloud {
        Cloud::Aws => ("autoScalingGroup", &["autoScalingGroup"]),
        Cloud::Gcp => (
            "instanceGroupManager",
            &["instanceGroupManager", "zone", "region"],
        ),
        Cloud::Azure => ("scaleSet", &["scaleSet", "resourceGroup"]),
    };
    let set: [(&str, bool); 6] = [
        ("autoScalingGroup", g.auto_scaling_group.is_some()),
        ("instanceGroupManager", g.instance_group_manager.is_some()),
        ("zone", g.zone.is_some()),
        ("region", g.region.is_some()),
        ("scaleSet", g.scale_set.is_some()),
        ("resourceGroup", g.resource_group.is_some()),
    ];
    for (field, present) in set {
        if present && !allowed.contains(&field) {
            diags.push(
                origin
                    .key_error(
                        &format!("{at}/{field}"),
                        format!("`{field}` does not belong in a {cloud} group"),
                    )
                    .with_hint(format!("a {cloud} pool's group is {form}")),
            );
        }
    }
    if !set.iter().any(|(f, present)| *f == required && *present) {
        diags.push(
            origin
                .error(at, format!("a {cloud} pool's group needs `{required}`"))
                .with_hint(format!("a {cloud} pool's group is {form}")),
        );
    }
    if g.zone.is_some() && g.region.is_some() {
        diags.push(origin.key_error(
            &format!("{at}/region"),
            "a gcp group has a `zone` (zonal) or a `region` (regional), not both",
        ));
    }
}

/// Image IDs have the shape of their cloud, so that a pasted AMI under `gcp` is caught here
/// rather than by a failed rollout.
pub fn check_image(cloud: Cloud, id: &str) -> Result<(), String> {
    let ok = match cloud {
        Cloud::Aws => id.strip_prefix("ami-").is_some_and(|h| {
            (h.len() == 8 || h.len() == 17)
                && h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        }),
        Cloud::Gcp => {
            let p = id
                .strip_prefix("https://www.googleapis.com/compute/v1/")
                .unwrap_or(id);
            let parts: Vec<&str> = p.split('/').collect();
            parts.len() >= 5
                && parts[0] == "projects"
                && !parts[1].is_empty()
                && parts[2] == "global"
                && parts[3] == "images"
                && parts[4..].iter().all(|s| !s.is_empty())
        }
        Cloud::Azure => {
            let lower = id.to_ascii_lowercase();
            lower.starts_with("/subscriptions/")
                && lower.contains("/resourcegroups/")
                && lower.contains("/providers/microsoft.compute/")
                && !id.ends_with('/')
        }
    };
    if ok {
        return Ok(());
    }
    Err(match cloud {
        Cloud::Aws => format!(
            "{id:?} is not an AMI ID: expected ami- followed by 8 or 17 lowercase hex digits"
        ),
        Cloud::Gcp => format!(
            "{id:?} is not a GCP image: expected projects/PROJECT/global/images/NAME (or .../images/family/FAMILY)"
        ),
        Cloud::Azure => format!(
            "{id:?} is not an Azure image resource ID: expected /subscriptions/.../resourceGroups/.../providers/Microsoft.Compute/..."
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_shapes_per_cloud() {
        assert!(check_image(Cloud::Aws, "ami-0a1b2c3d4e5f60718").is_ok());
        assert!(check_image(Cloud::Aws, "ami-12345678").is_ok());
        assert!(check_image(Cloud::Aws, "ami-0A1B2C3D4E5F60718").is_err());
        assert!(check_image(Cloud::Aws, "projects/x/global/images/y").is_err());
        assert!(check_image(Cloud::Gcp, "projects/acme/global/images/general-1").is_ok());
        assert!(check_image(Cloud::Gcp, "projects/acme/global/images/family/general").is_ok());
        assert!(check_image(Cloud::Gcp, "ami-12345678").is_err());
        assert!(check_image(
            Cloud::Azure,
            "/subscriptions/1b2c/resourceGroups/images/providers/Microsoft.Compute/galleries/acme/images/general/versions/1.0.0"
        )
        .is_ok());
        assert!(check_image(Cloud::Azure, "/subscriptions/1b2c").is_err());
    }
}
