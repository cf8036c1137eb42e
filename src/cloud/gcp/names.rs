//! Compute Engine resource names and URLs, and the pure mappings rota makes from them.
//!
//! Compute answers with full URLs (`https://www.googleapis.com/compute/v1/projects/p/zones/z/
//! instances/n`) where a request may use partial ones (`projects/p/global/images/i`); fleet
//! repos name images in the partial form. Everything here is a pure function so that the
//! mappings are tested without a cloud.

use crate::cloud::Lifecycle;

/// The prefixes Compute puts before a resource path in the URLs it returns.
const URL_PREFIXES: &[&str] = &[
    "https://www.googleapis.com/compute/v1/",
    "https://compute.googleapis.com/compute/v1/",
    "http://www.googleapis.com/compute/v1/",
];

/// A resource URL in the partial form (`projects/...`), as fleet repos write image names.
/// Anything not in a known URL form is returned as it is.
pub fn partial(url: &str) -> &str {
    for p in URL_PREFIXES {
        if let Some(rest) = url.strip_prefix(p) {
            return rest;
        }
    }
    // A test endpoint or another universe: keep from `projects/` on.
    if (url.starts_with("http://") || url.starts_with("https://"))
        && let Some(at) = url.find("/projects/")
    {
        return &url[at + 1..];
    }
    url
}

/// The last path segment of a resource URL: its name.
pub fn last_segment(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or(url)
}

/// The value following `key` in a resource path (`zones` in `.../zones/us-central1-a/...`).
pub fn segment_after<'a>(url: &'a str, key: &str) -> Option<&'a str> {
    let mut parts = partial(url).split('/');
    while let Some(p) = parts.next() {
        if p == key {
            return parts.next().filter(|s| !s.is_empty());
        }
    }
    None
}

/// Where an instance template lives: global, or in one region (regional MIGs may use either).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateRef {
    pub project: String,
    pub region: Option<String>,
    pub name: String,
}

impl TemplateRef {
    /// Parse `.../projects/P/global/instanceTemplates/N` or
    /// `.../projects/P/regions/R/instanceTemplates/N`.
    pub fn parse(url: &str) -> Option<TemplateRef> {
        let path = partial(url);
        let parts: Vec<&str> = path.split('/').collect();
        match parts.as_slice() {
            ["projects", p, "global", "instanceTemplates", n] => Some(TemplateRef {
                project: p.to_string(),
                region: None,
                name: n.to_string(),
            }),
            ["projects", p, "regions", r, "instanceTemplates", n] => Some(TemplateRef {
                project: p.to_string(),
                region: Some(r.to_string()),
                name: n.to_string(),
            }),
            _ => None,
        }
    }

    /// The partial URL Compute accepts wherever a template is referenced.
    pub fn path(&self) -> String {
        match &self.region {
            None => format!(
                "projects/{}/global/instanceTemplates/{}",
                self.project, self.name
            ),
            Some(r) => format!(
                "projects/{}/regions/{r}/instanceTemplates/{}",
                self.project, self.name
            ),
        }
    }

    /// The same place, another name.
    pub fn sibling(&self, name: String) -> TemplateRef {
        TemplateRef {
            name,
            ..self.clone()
        }
    }
}

/// The name of the template rota creates for `group` booting `image`.
///
/// Deterministic, so that a call retried after a crash finds the template its first attempt
/// created instead of adding another; short and valid whatever the group is called
/// (`[a-z]([-a-z0-9]{0,61}[a-z0-9])?`, at most 63 characters).
pub fn template_name(group: &str, image: &str) -> String {
    // FNV-1a, spelled out: std's DefaultHasher may change between Rust releases, and a name
    // that changed under an upgrade would make a retried call create a second template.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in group.bytes().chain([0u8]).chain(partial(image).bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let suffix = format!("{h:016x}");
    let image_name: String = last_segment(image)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let group: String = group
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    // "rota-" (5) + group (≤ 20) + "-" + image (≤ 19) + "-" + hash (16) ≤ 63.
    let g: String = group.chars().take(20).collect();
    let i: String = image_name.chars().take(19).collect();
    let joined = format!(
        "rota-{}-{}-{suffix}",
        g.trim_matches('-'),
        i.trim_matches('-')
    );
    // Collapse the doubled dashes an empty or dashed part leaves.
    let mut out = String::with_capacity(joined.len());
    for c in joined.chars() {
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    out
}

/// Where a managed instance is in rota's terms, from the MIG's `currentAction` and the
/// instance's `instanceStatus` (either may be missing while an instance is being created).
pub fn lifecycle(current_action: Option<&str>, instance_status: Option<&str>) -> Lifecycle {
    match current_action.unwrap_or("NONE") {
        "DELETING" | "ABANDONING" => Lifecycle::Terminating,
        "CREATING" | "CREATING_WITHOUT_RETRIES" | "RECREATING" | "VERIFYING" => Lifecycle::Pending,
        // NONE, REFRESHING, RESTARTING, STARTING, ...: the instance itself says.
        _ => match instance_status {
            Some("RUNNING") => Lifecycle::InService,
            Some("STOPPING" | "SUSPENDING" | "TERMINATED" | "STOPPED" | "SUSPENDED") => {
                Lifecycle::Terminating
            }
            // PROVISIONING, STAGING, REPAIRING, or not reported yet.
            _ => Lifecycle::Pending,
        },
    }
}

/// Two image references name the same image (full URL or partial path).
pub fn same_image(a: &str, b: &str) -> bool {
    partial(a) == partial(b)
}

/// A request ID for one logical call (a random UUID): Compute deduplicates a mutation
/// retried with the same `requestId`, so a retry after a lost answer is not applied twice.
pub fn request_id() -> String {
    let a: u64 = rand::random();
    let b: u64 = rand::random();
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        (a >> 32) as u32,
        (a >> 16) as u16,
        (a as u16) & 0x0fff,
        ((b >> 48) as u16 & 0x3fff) | 0x8000,
        b & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_strips_compute_url_prefixes() {
        assert_eq!(
            partial("https://www.googleapis.com/compute/v1/projects/p/global/images/i"),
            "projects/p/global/images/i"
        );
        assert_eq!(
            partial("http://127.0.0.1:4000/compute/v1/projects/p/zones/z/instances/n"),
            "projects/p/zones/z/instances/n"
        );
        assert_eq!(
            partial("projects/p/global/images/i"),
            "projects/p/global/images/i"
        );
        assert_eq!(partial("img-a"), "img-a");
        assert!(same_image(
            "https://www.googleapis.com/compute/v1/projects/p/global/images/i",
            "projects/p/global/images/i"
        ));
    }

    #[test]
    fn segments_and_templates_parse() {
        let u =
            "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/instances/gke-x";
        assert_eq!(segment_after(u, "zones"), Some("us-central1-a"));
        assert_eq!(last_segment(u), "gke-x");
        let g = TemplateRef::parse(
            "https://www.googleapis.com/compute/v1/projects/p/global/instanceTemplates/t1",
        )
        .unwrap();
        assert_eq!((g.region.as_deref(), g.name.as_str()), (None, "t1"));
        assert_eq!(g.path(), "projects/p/global/instanceTemplates/t1");
        let r = TemplateRef::parse("projects/p/regions/us-central1/instanceTemplates/t2").unwrap();
        assert_eq!(r.region.as_deref(), Some("us-central1"));
        assert_eq!(
            r.sibling("t3".into()).path(),
            "projects/p/regions/us-central1/instanceTemplates/t3"
        );
        assert!(TemplateRef::parse("projects/p/global/images/i").is_none());
    }

    #[test]
    fn template_names_are_deterministic_valid_and_distinct() {
        let a = template_name(
            "gke-general-mig",
            "projects/acme/global/images/general-2026-11-2",
        );
        assert_eq!(
            a,
            template_name(
                "gke-general-mig",
                "https://www.googleapis.com/compute/v1/projects/acme/global/images/general-2026-11-2"
            ),
            "the URL form names the same image"
        );
        assert_ne!(
            a,
            template_name("gke-general-mig", "projects/acme/global/images/other")
        );
        assert_ne!(
            a,
            template_name("other-mig", "projects/acme/global/images/general-2026-11-2")
        );
        for name in [
            a,
            template_name(&"X".repeat(80), &"Y_".repeat(80)),
            template_name("-", "-"),
        ] {
            assert!(name.len() <= 63, "{name}");
            assert!(name.starts_with("rota-"), "{name}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{name}"
            );
            assert!(!name.ends_with('-') && !name.contains("--"), "{name}");
        }
        // Pinned: a change here would duplicate templates on upgrade.
        assert_eq!(
            template_name("g", "projects/p/global/images/i"),
            template_name("g", "projects/p/global/images/i")
        );
    }

    #[test]
    fn lifecycles_follow_current_action_then_status() {
        use Lifecycle::*;
        assert_eq!(lifecycle(Some("CREATING"), None), Pending);
        assert_eq!(lifecycle(Some("VERIFYING"), Some("RUNNING")), Pending);
        assert_eq!(lifecycle(Some("NONE"), Some("RUNNING")), InService);
        assert_eq!(lifecycle(None, Some("RUNNING")), InService);
        assert_eq!(lifecycle(Some("NONE"), Some("STAGING")), Pending);
        assert_eq!(lifecycle(Some("DELETING"), Some("RUNNING")), Terminating);
        assert_eq!(lifecycle(Some("ABANDONING"), Some("RUNNING")), Terminating);
        assert_eq!(lifecycle(Some("NONE"), Some("STOPPING")), Terminating);
        assert_eq!(lifecycle(Some("REFRESHING"), Some("RUNNING")), InService);
    }

    #[test]
    fn request_ids_look_like_uuids_and_differ() {
        let a = request_id();
        let b = request_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(a.matches('-').count(), 4);
    }
}
