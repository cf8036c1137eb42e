//! Kubernetes versions and the version-skew rule: a version's `kubernetes` (the kubelet minor
//! its images carry) against a Cluster's `spec.kubernetes` (its control plane's minor), as
//! `rota validate` checks what is declared, and against the API server's live `/version`, as
//! the planner checks before the first surge of a rotation.
//!
//! The rule is the Kubernetes version-skew policy: a kubelet may be up to three minors older
//! than its kube-apiserver and never newer. A control plane on 1.31 takes kubelets 1.28 to
//! 1.31; a 1.32 kubelet is refused (newer), a 1.27 one too (four minors older).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::diagnostics::Diagnostics;
use super::load::Origin;
use super::model::CloudImages;
use super::yaml::escape_token;

/// How many minors a kubelet may trail its control plane.
pub const MAX_KUBELET_LAG: u32 = 3;

/// A Kubernetes `major.minor`, as the fleet repo spells it (`"1.31"`) and as `/version`
/// reports it (`major: "1"`, `minor: "31+"` on some providers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct KubeMinor {
    pub major: u32,
    pub minor: u32,
}

impl KubeMinor {
    /// `"1.31"` (what the fleet repo writes; the schema holds it to this form).
    pub fn parse(s: &str) -> Option<KubeMinor> {
        let (major, minor) = s.trim().split_once('.')?;
        Some(KubeMinor {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }

    /// The `major` and `minor` fields of an API server's `/version`. Managed control planes
    /// append a `+` to the minor (EKS: `"31+"`); anything else after the digits is refused
    /// rather than guessed.
    pub fn of_version_info(major: &str, minor: &str) -> Option<KubeMinor> {
        let minor = minor.strip_suffix('+').unwrap_or(minor);
        Some(KubeMinor {
            major: major.trim().parse().ok()?,
            minor: minor.trim().parse().ok()?,
        })
    }
}

impl fmt::Display for KubeMinor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// How a kubelet minor breaks the skew policy against a control plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skew {
    /// The kubelet is newer than the control plane.
    Newer,
    /// The kubelet trails the control plane by more than [`MAX_KUBELET_LAG`] minors.
    TooOld,
}

impl Skew {
    /// What is wrong, in words that fit after "kubelet X is ".
    pub fn describe(self) -> &'static str {
        match self {
            Skew::Newer => "newer than",
            Skew::TooOld => "more than three minors older than",
        }
    }
}

/// The skew a kubelet of `kubelet` would have against a control plane of `control_plane`;
/// `None` when the policy allows it. A different major is never allowed.
pub fn skew(kubelet: KubeMinor, control_plane: KubeMinor) -> Option<Skew> {
    if kubelet.major != control_plane.major {
        return Some(if kubelet.major > control_plane.major {
            Skew::Newer
        } else {
            Skew::TooOld
        });
    }
    if kubelet.minor > control_plane.minor {
        Some(Skew::Newer)
    } else if control_plane.minor - kubelet.minor > MAX_KUBELET_LAG {
        Some(Skew::TooOld)
    } else {
        None
    }
}

/// The kubelet minors a control plane accepts, for hints: `"1.27 to 1.30"`.
pub fn accepted_range(control_plane: KubeMinor) -> String {
    let oldest = control_plane.minor.saturating_sub(MAX_KUBELET_LAG);
    format!("{}.{oldest} to {control_plane}", control_plane.major)
}

/// One pinned version against one cluster, as `rota validate` checks it: both declared,
/// and skewed, gives an error at the wave's pin (the line a promotion changes) naming the
/// version's `kubernetes` and the cluster's `spec.kubernetes`, each with its file:line.
pub struct PinnedOnCluster<'a> {
    pub fleet: &'a Origin,
    pub wave_index: usize,
    pub wave: &'a str,
    pub channel: &'a str,
    pub version: &'a str,
    pub images: &'a CloudImages,
    pub cluster_origin: &'a Origin,
    pub cluster: &'a str,
    pub control_plane: Option<&'a str>,
}

impl PinnedOnCluster<'_> {
    pub fn check(&self, diags: &mut Diagnostics) {
        let (Some(kubelet), Some(cp)) = (
            self.images.kubernetes.as_deref().and_then(KubeMinor::parse),
            self.control_plane.and_then(KubeMinor::parse),
        ) else {
            // Undeclared on either side: nothing to check here (the agent checks the live
            // control plane). A malformed value is the schema's error.
            return;
        };
        let Some(skew) = skew(kubelet, cp) else {
            return;
        };
        let pin = format!(
            "/spec/waves/{}/images/{}",
            self.wave_index,
            escape_token(self.channel)
        );
        let declared = format!(
            "/spec/images/{}/versions/{}/kubernetes",
            escape_token(self.channel),
            escape_token(self.version)
        );
        diags.push(
            self.fleet
                .error(
                    &pin,
                    format!(
                        "wave `{}` pins {}@{}, whose kubelet {kubelet} ({}) is {} the control plane {cp} of cluster `{}` (spec.kubernetes at {}): the Kubernetes version-skew policy forbids it",
                        self.wave,
                        self.channel,
                        self.version,
                        self.fleet.describe(&declared),
                        skew.describe(),
                        self.cluster,
                        self.cluster_origin.describe("/spec/kubernetes"),
                    ),
                )
                .with_hint(format!(
                    "pin a version whose kubernetes is {} for this wave, or upgrade the control plane first and raise spec.kubernetes",
                    accepted_range(cp)
                )),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> KubeMinor {
        KubeMinor::parse(s).unwrap()
    }

    #[test]
    fn a_kubelet_may_trail_by_three_minors_and_never_lead() {
        assert_eq!(skew(v("1.30"), v("1.30")), None);
        assert_eq!(skew(v("1.27"), v("1.30")), None);
        assert_eq!(skew(v("1.31"), v("1.30")), Some(Skew::Newer));
        assert_eq!(skew(v("1.26"), v("1.30")), Some(Skew::TooOld));
        assert_eq!(skew(v("2.0"), v("1.30")), Some(Skew::Newer));
        assert_eq!(skew(v("1.30"), v("2.0")), Some(Skew::TooOld));
        assert_eq!(accepted_range(v("1.30")), "1.27 to 1.30");
        assert_eq!(accepted_range(v("1.2")), "1.0 to 1.2");
    }

    const FLEET: &str = r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {name: acme}
spec:
  images:
    general:
      versions:
        "2026.11.1":
          kubernetes: "1.30"
          aws: ami-0a1b2c3d4e5f60718
        "2026.11.2":
          kubernetes: "KUBELET"
          aws: ami-0f9e8d7c6b5a40312
  waves:
    - name: main
      clusters: [prod, other]
      images: {general: "2026.11.2"}
"#;

    fn cluster(name: &str, control_plane: &str) -> String {
        format!(
            r#"apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {{name: {name}}}
spec:
  cloud: {{aws: {{region: us-east-1}}}}
  kubernetes: "{control_plane}"
  pools:
    - name: general
      channel: general
      nodeSelector: {{pool: general}}
      group: {{autoScalingGroup: asg-{name}}}
    - name: batch
      channel: general
      nodeSelector: {{pool: batch}}
      group: {{autoScalingGroup: asg-{name}-batch}}
"#
        )
    }

    fn load(kubelet: &str, prod: &str, other: &str) -> Result<super::super::Fleet, Diagnostics> {
        super::super::load_files(&[
            super::super::SourceFile::new("fleet.yaml", FLEET.replace("KUBELET", kubelet)),
            super::super::SourceFile::new("clusters/prod.yaml", cluster("prod", prod)),
            super::super::SourceFile::new("clusters/other.yaml", cluster("other", other)),
        ])
    }

    #[test]
    fn validate_refuses_a_pin_the_control_plane_would_refuse_at_the_pin_naming_both() {
        let d = load("1.31", "1.30", "1.31").unwrap_err();
        let all: Vec<_> = d.iter().collect();
        // One error for prod (two pools, one pin), none for other (1.31 takes 1.31).
        assert_eq!(all.len(), 1, "{d}");
        let e = all[0];
        assert_eq!((e.file.as_str(), e.line), ("fleet.yaml", 17), "{d}");
        assert_eq!(
            e.message,
            "wave `main` pins general@2026.11.2, whose kubelet 1.31 (fleet.yaml:12) is newer than the control plane 1.30 of cluster `prod` (spec.kubernetes at clusters/prod.yaml:6): the Kubernetes version-skew policy forbids it"
        );
        assert!(
            e.hint
                .as_deref()
                .unwrap()
                .contains("kubernetes is 1.27 to 1.30"),
            "{e:?}"
        );

        let d = load("1.26", "1.30", "1.29").unwrap_err();
        let msgs: Vec<_> = d.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(msgs.len(), 1, "{d}");
        assert!(msgs[0].contains("kubelet 1.26 (fleet.yaml:12) is more than three minors older than the control plane 1.30 of cluster `prod`"), "{d}");

        assert!(load("1.27", "1.30", "1.28").is_ok());
    }

    #[test]
    fn a_kubernetes_version_not_written_as_a_quoted_minor_is_refused_at_its_line() {
        for bad in ["1.31.2", "v1.31"] {
            let d = load(bad, "1.30", "1.30").unwrap_err();
            assert!(
                d.iter().any(|e| e.file == "fleet.yaml" && e.line == 12),
                "{bad}: {d}"
            );
        }
    }

    #[test]
    fn versions_parse_as_the_repo_and_the_api_server_write_them() {
        assert_eq!(KubeMinor::parse("1.31"), Some(v("1.31")));
        assert_eq!(KubeMinor::parse("1.31.2"), None);
        assert_eq!(KubeMinor::parse("v1.31"), None);
        assert_eq!(KubeMinor::of_version_info("1", "31+"), Some(v("1.31")));
        assert_eq!(KubeMinor::of_version_info("1", "31"), Some(v("1.31")));
        assert_eq!(KubeMinor::of_version_info("1", "31-gke"), None);
        assert_eq!(v("1.9").to_string(), "1.9");
    }
}
