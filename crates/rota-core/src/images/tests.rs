use chrono::{DateTime, Utc};

use super::*;
use crate::edit::insert_version;
use crate::fleet::{SourceFile, load_files};

const FLEET: &str = include_str!("../../../../tests/fixtures/fleet/valid/images-per-region.yaml");

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn fleet(text: &str) -> Fleet {
    load_files(&[SourceFile::new("fleet.yaml", text)]).unwrap_or_else(|d| panic!("{d:?}"))
}

fn img(id: &str, name: &str, created: &str) -> FoundImage {
    FoundImage {
        id: id.into(),
        name: name.into(),
        created: t(created),
    }
}

/// A distinct, well-formed AMI ID per region and arch: `ami-…0e1` (us-east-1, x86_64), …
fn ami(region: &str, arch: Arch) -> String {
    let r = if region == "us-east-1" { 0xe1 } else { 0xe2 };
    format!("ami-{:017x}", r * 16 + (arch == Arch::Arm64) as u32)
}

/// The clouds' answers for the fixture: one build, per place.
fn answers(fleet: &Fleet, build: &str, created: &str) -> Vec<(Vec<Need>, FoundImage)> {
    let ch = &fleet.spec.images["general"];
    queries("general", ch, &needs(fleet, "general"))
        .unwrap()
        .into_iter()
        .map(|(ns, q)| {
            let found = match &q {
                ImageQuery::AwsSsm { region, arch, .. } => img(
                    &ami(region, *arch),
                    &format!("amazon-eks-node-al2023-{arch}-standard-1.31-{build}"),
                    created,
                ),
                ImageQuery::GcpFamily { .. } => img(
                    "projects/acme/global/images/general-new",
                    &format!("acme-general-{build}"),
                    created,
                ),
                q => panic!("unexpected query {q}"),
            };
            (ns, found)
        })
        .collect()
}

#[test]
fn needs_are_per_cloud_region_and_arch_and_queries_fill_in_the_arch() {
    let f = fleet(FLEET);
    let ns = needs(&f, "general");
    let places: Vec<String> = ns.iter().map(place).collect();
    assert_eq!(
        places,
        [
            "aws us-east-1 x86_64",
            "aws us-east-1 arm64",
            "aws us-west-2 x86_64",
            "gcp x86_64"
        ]
    );
    assert_eq!(ns[0].clusters, ["c1"]);
    let qs = queries("general", &f.spec.images["general"], &ns).unwrap();
    assert_eq!(
        qs[1].1,
        ImageQuery::AwsSsm {
            region: "us-east-1".into(),
            parameter:
                "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/standard/recommended/image_id"
                    .into(),
            arch: Arch::Arm64,
        }
    );
    assert!(matches!(&qs[3].1, ImageQuery::GcpFamily { family, .. } if family == "acme-general"));
    // A cloud the source does not cover is named with its clusters.
    let mut ch = f.spec.images["general"].clone();
    ch.source.as_mut().unwrap().gcp = None;
    let e = queries("general", &ch, &ns).unwrap_err();
    assert!(e.contains("clusters c2 are on gcp"), "{e}");
}

/// Image squatting: a name filter with no owner would ask EC2 for every public AMI of that
/// name, a stranger's included. Even when a repo slipped past validation, no such query is
/// made.
#[test]
fn a_name_filter_with_no_owner_is_never_asked() {
    let f = fleet(FLEET);
    let ns = needs(&f, "general");
    let mut ch = f.spec.images["general"].clone();
    ch.source.as_mut().unwrap().aws = Some(crate::fleet::model::AwsImageSource {
        ssm_parameter: None,
        name_filter: Some("acme-general-*".into()),
        owners: vec![],
    });
    let e = queries("general", &ch, &ns).unwrap_err();
    assert!(
        e.contains("spec.images.general.source.aws.owners: a nameFilter needs owners"),
        "{e}"
    );
    ch.source.as_mut().unwrap().aws.as_mut().unwrap().owners = vec!["aws-marketplace".into()];
    let e = queries("general", &ch, &ns).unwrap_err();
    assert!(
        e.contains("owners.0: owner `aws-marketplace` is refused"),
        "{e}"
    );
    ch.source.as_mut().unwrap().aws.as_mut().unwrap().owners = vec!["123456789012".into()];
    let qs = queries("general", &ch, &ns).unwrap();
    assert!(matches!(&qs[0].1, ImageQuery::AwsName { owners, .. } if owners == &["123456789012"]));
}

#[test]
fn a_new_build_everywhere_is_proposed_by_region_and_arch_once_baked() {
    let f = fleet(FLEET);
    let ch = &f.spec.images["general"];
    let found = answers(&f, "v20261120", "2026-11-20T10:00:00Z");
    // Younger than minAge (72h): wait, saying until when.
    let early = decide("general", ch, &found, t("2026-11-21T10:00:00Z"), None);
    assert_eq!(
        early,
        Outcome::Bake {
            version: "20261120".into(),
            released: t("2026-11-20T10:00:00Z"),
            until: t("2026-11-23T10:00:00Z"),
        }
    );
    // --security skips the bake and keeps why.
    let Outcome::Propose(p) = decide(
        "general",
        ch,
        &found,
        t("2026-11-21T10:00:00Z"),
        Some("CVE-2026-1234"),
    ) else {
        panic!("a security bump must be proposed")
    };
    assert_eq!(p.bake_skipped.as_deref(), Some("CVE-2026-1234"));
    let Outcome::Propose(p) = decide("general", ch, &found, t("2026-11-24T10:00:00Z"), None) else {
        panic!("a baked build must be proposed")
    };
    assert_eq!(p.version, "20261120");
    assert_eq!(p.bake_skipped, None);
    let aws = p.images.aws.as_ref().unwrap();
    let AwsImages::ByRegion(m) = aws else {
        panic!("AWS images go by region")
    };
    assert_eq!(
        m["us-west-2"],
        RegionImage::One(ami("us-west-2", Arch::X86_64))
    );
    assert!(
        matches!(&m["us-east-1"], RegionImage::ByArch(a) if a[&Arch::Arm64] == ami("us-east-1", Arch::Arm64) && a[&Arch::X86_64] == ami("us-east-1", Arch::X86_64))
    );
    assert_eq!(
        p.images.gcp.as_deref(),
        Some("projects/acme/global/images/general-new")
    );
}

#[test]
fn a_region_without_the_build_holds_the_proposal_and_names_the_region() {
    let f = fleet(FLEET);
    let ch = &f.spec.images["general"];
    let mut found = answers(&f, "v20261120", "2026-11-20T10:00:00Z");
    found[2].1.name = "amazon-eks-node-al2023-x86_64-standard-1.31-v20261101".into();
    let Outcome::Mismatch { why } = decide("general", ch, &found, t("2026-12-01T00:00:00Z"), None)
    else {
        panic!("a lagging region must hold the proposal")
    };
    assert!(
        why.contains(
            "20261101: aws us-west-2 x86_64 (amazon-eks-node-al2023-x86_64-standard-1.31-v20261101)"
        ),
        "{why}"
    );
}

#[test]
fn versions_are_named_after_the_release_people_know() {
    assert_eq!(
        version_label(&build_name("acme-general-arm64-2026-11-3")),
        "2026.11.3"
    );
    assert_eq!(
        version_label(&build_name(
            "amazon-eks-node-al2023-x86_64-standard-1.31-v20241109"
        )),
        "20241109"
    );
    assert_eq!(
        version_label(&build_name("bottlerocket-aws-k8s-1.31-aarch64-v1.26.2")),
        "1.26.2"
    );
    assert_eq!(version_label("2026.11.3"), "2026.11.3");
    assert_eq!(version_label("cos-117-18613-0-79"), "117.18613.0.79");
    // A hash at the end: the whole build name, which still tells builds apart.
    assert_eq!(
        version_label("bottlerocket-aws-k8s-1.31-v1.26.2-a3b9a5d6"),
        "bottlerocket-aws-k8s-1.31-v1.26.2-a3b9a5d6"
    );
    assert_eq!(
        build_name("amazon-eks-node-al2023-arm64-standard-1.31-v1"),
        build_name("amazon-eks-node-al2023-x86_64-standard-1.31-v1")
    );
}

#[test]
fn name_filters_match_as_aws_does() {
    assert!(glob_match("acme-general-*", "acme-general-2026-11-3"));
    assert!(glob_match("acme-*-2026-??-3", "acme-general-2026-11-3"));
    assert!(!glob_match("acme-general-*", "acme-gpu-2026-11-3"));
    assert!(glob_match("*", ""));
    assert!(!glob_match("a?", "a"));
    assert!(glob_match("*a*b", "xxaxxb"));
}

#[test]
fn the_version_goes_in_as_a_person_writes_it_and_a_second_run_changes_nothing() {
    let f = fleet(FLEET);
    let ch = &f.spec.images["general"];
    let found = answers(&f, "v20261120", "2026-11-20T10:00:00Z");
    let Outcome::Propose(p) = decide("general", ch, &found, t("2026-11-24T10:00:00Z"), None) else {
        panic!()
    };
    let files = [SourceFile::new("fleet.yaml", FLEET)];
    let (path, text) = insert_version(&files, &p).unwrap();
    assert_eq!(path, "fleet.yaml");
    // Every line the user wrote is still there, in order; only the entry was added.
    let added: Vec<&str> = text
        .lines()
        .filter(|l| !FLEET.lines().any(|o| o == *l))
        .collect();
    assert_eq!(
        added,
        [
            "        \"20261120\":",
            "          released: \"2026-11-20T10:00:00Z\"",
            "            us-east-1: {x86_64: ami-00000000000000e10, arm64: ami-00000000000000e11}",
            "            us-west-2: ami-00000000000000e20",
            "          gcp: projects/acme/global/images/general-new",
        ],
        "{text}"
    );
    assert_eq!(
        text.len() - FLEET.len(),
        added.iter().map(|l| l.len() + 1).sum::<usize>() + "          aws:\n".len()
    );
    // The entry sits at the end of the versions map, before the waves.
    let entry = text.find("\"20261120\":").unwrap();
    assert!(text.find("\"1.0.1\":").unwrap() < entry && entry < text.find("  waves:").unwrap());
    // Run again on the result: the same images are there, nothing to do.
    let again = fleet(&text);
    assert_eq!(
        decide(
            "general",
            &again.spec.images["general"],
            &found,
            t("2026-11-24T10:00:00Z"),
            None
        ),
        Outcome::UpToDate {
            version: "20261120".into()
        }
    );
}

#[test]
fn flow_maps_comments_and_quotes_survive_the_edit() {
    let p = Proposal {
        channel: "gpu".into(),
        version: "2026.11.3".into(),
        released: t("2026-11-20T10:00:00Z"),
        images: CloudImages {
            released: Some(t("2026-11-20T10:00:00Z")),
            aws: Some(AwsImages::ByRegion(
                [("us-east-1".to_string(), RegionImage::One("ami-1".into()))].into(),
            )),
            ..Default::default()
        },
        builds: vec![],
        bake_skipped: None,
    };
    let head = "kind: Fleet\nspec:\n  images:\n    gpu:\n";
    // A flow map, with a quoted key holding a brace and a comment after it.
    let text = format!(
        "{head}      versions: {{'2026.11.1': {{aws: \"ami-}}0\"}}}}   # old\n  waves: []\n"
    );
    let (_, out) = insert_version(&[SourceFile::new("f.yaml", text.clone())], &p).unwrap();
    assert!(
        out.contains(
            "versions: {'2026.11.1': {aws: \"ami-}0\"}, \"2026.11.3\": {released: \"2026-11-20T10:00:00Z\", aws: {us-east-1: ami-1}}}   # old\n"
        ),
        "{out}"
    );
    // An empty flow map.
    let text = format!("{head}      versions: {{}}\n");
    let (_, out) = insert_version(&[SourceFile::new("f.yaml", text)], &p).unwrap();
    assert!(
        out.contains("versions: {\"2026.11.3\": {released:"),
        "{out}"
    );
    // A block map indented by 4, a comment inside the map and one for the next key.
    let text = format!(
        "{head}      versions:\n          '2026.11.1':\n              aws: ami-0   # keep\n          # an old note\n\n      # about description\n      description: x\n"
    );
    let (_, out) = insert_version(&[SourceFile::new("f.yaml", text.clone())], &p).unwrap();
    assert_eq!(
        out,
        text.replace(
            "          # an old note\n",
            "          # an old note\n          \"2026.11.3\":\n              released: \"2026-11-20T10:00:00Z\"\n              aws:\n                  us-east-1: ami-1\n"
        )
    );
    // No versions map: an error naming the file and line, nothing written.
    let text = format!("{head}      description: x\n");
    let e = insert_version(&[SourceFile::new("f.yaml", text)], &p).unwrap_err();
    assert!(
        e.starts_with("f.yaml:5:7:") && e.contains("no versions map"),
        "{e}"
    );
}
