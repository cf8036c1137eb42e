//! Kubernetes `spec.providerID` strings in each cloud's real format, both ways.
//!
//! Nodes and instances meet only here: a node's providerID names the instance it runs on.
//! - AWS:   `aws:///us-east-1a/i-0abc123def4567890`
//! - GCP:   `gce://acme-prod/us-central1-a/gke-general-mig-x1b2`
//! - Azure: `azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachineScaleSets/<vmss>/virtualMachines/<n>`

use super::Cloud;

/// The instance a providerID names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceRef {
    pub cloud: Cloud,
    /// Zone for AWS and GCP; empty for Azure.
    pub zone: String,
    /// AWS instance ID, GCE instance name, or VMSS instance ID.
    pub instance: String,
}

pub fn aws(zone: &str, instance_id: &str) -> String {
    format!("aws:///{zone}/{instance_id}")
}

pub fn gcp(project: &str, zone: &str, name: &str) -> String {
    format!("gce://{project}/{zone}/{name}")
}

pub fn azure(
    subscription: &str,
    resource_group: &str,
    scale_set: &str,
    instance_id: &str,
) -> String {
    format!(
        "azure:///subscriptions/{subscription}/resourceGroups/{resource_group}/providers/Microsoft.Compute/virtualMachineScaleSets/{scale_set}/virtualMachines/{instance_id}"
    )
}

/// Parse a providerID; `None` for anything not in one of the three formats.
pub fn parse(provider_id: &str) -> Option<InstanceRef> {
    if let Some(rest) = provider_id.strip_prefix("aws:///") {
        let (zone, id) = rest.split_once('/')?;
        return (!id.is_empty() && !id.contains('/')).then(|| InstanceRef {
            cloud: Cloud::Aws,
            zone: zone.to_string(),
            instance: id.to_string(),
        });
    }
    if let Some(rest) = provider_id.strip_prefix("gce://") {
        let mut parts = rest.split('/');
        let (_project, zone, name) = (parts.next()?, parts.next()?, parts.next()?);
        return (parts.next().is_none() && !name.is_empty()).then(|| InstanceRef {
            cloud: Cloud::Gcp,
            zone: zone.to_string(),
            instance: name.to_string(),
        });
    }
    if let Some(rest) = provider_id.strip_prefix("azure://") {
        let lower = rest.to_ascii_lowercase();
        let marker = "/virtualmachines/";
        let at = lower.rfind(marker)?;
        let id = &rest[at + marker.len()..];
        return (lower.contains("/virtualmachinescalesets/") && !id.is_empty()).then(|| {
            InstanceRef {
                cloud: Cloud::Azure,
                zone: String::new(),
                instance: id.to_string(),
            }
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_each_cloud() {
        let a = parse(&aws("us-east-1a", "i-0abc")).unwrap();
        assert_eq!(
            (a.cloud, a.zone.as_str(), a.instance.as_str()),
            (Cloud::Aws, "us-east-1a", "i-0abc")
        );
        let g = parse(&gcp("acme", "us-central1-a", "gke-x")).unwrap();
        assert_eq!((g.cloud, g.instance.as_str()), (Cloud::Gcp, "gke-x"));
        let z = parse(&azure("sub", "rg", "vmss", "7")).unwrap();
        assert_eq!((z.cloud, z.instance.as_str()), (Cloud::Azure, "7"));
        assert!(parse("kind://docker/x").is_none());
        assert!(parse("aws:///zone-only").is_none());
    }
}
