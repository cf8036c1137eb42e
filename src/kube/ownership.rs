//! Version-scoped ownership: which NodePoolRotation resources a controller of one rota
//! version reconciles, and the name of the Lease it leads through.
//!
//! Two versions of rota can run side by side while a fleet moves to a new agent pool by
//! pool: a resource labelled `rota.dev/agent-version: <v>` belongs to the controller of
//! version `<v>`; an unlabelled one belongs to the controller running as the default.

use std::collections::BTreeMap;

use super::crd::AGENT_VERSION_LABEL;

/// Whether the controller of `version` (the default one when `is_default`) reconciles a
/// resource with these labels.
pub fn reconciles(labels: &BTreeMap<String, String>, version: &str, is_default: bool) -> bool {
    match labels.get(AGENT_VERSION_LABEL) {
        Some(v) => v == version,
        None => is_default,
    }
}

/// The Lease a controller of `version` leads through: one per version, so that two versions
/// each have a leader. A Lease name is a DNS-1123 subdomain: `0.1.0+build` becomes
/// `rota-controller-0-1-0-build`.
pub fn lease_name(version: &str) -> String {
    let v: String = version
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let name = format!("rota-controller-{}", v.trim_matches('-'));
    name.chars()
        .take(63)
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(v: Option<&str>) -> BTreeMap<String, String> {
        v.map(|v| (AGENT_VERSION_LABEL.to_string(), v.to_string()))
            .into_iter()
            .collect()
    }

    #[test]
    fn labelled_resources_belong_to_their_version_unlabelled_to_the_default() {
        assert!(reconciles(&labels(Some("0.2.0")), "0.2.0", false));
        assert!(!reconciles(&labels(Some("0.2.0")), "0.1.0", true));
        assert!(reconciles(&labels(None), "0.1.0", true));
        assert!(!reconciles(&labels(None), "0.2.0", false));
    }

    #[test]
    fn lease_names_are_valid_and_carry_the_version() {
        assert_eq!(lease_name("0.1.0"), "rota-controller-0-1-0");
        assert_eq!(lease_name("1.2.3+Build.7"), "rota-controller-1-2-3-build-7");
        assert!(lease_name(&"9".repeat(100)).len() <= 63);
    }
}
