//! The fault profile: what goes wrong in a simulated cloud, and how often.
//!
//! Faults are drawn from the cloud's seeded generator, so a scenario with the same seed and
//! the same sequence of calls fails in exactly the same places. Two kinds exist:
//! - rates: every API call may be throttled (429) or fail with a 5xx; a call that changes
//!   something may take effect and still answer an error (a lost response, a timeout); every
//!   launch may fail for lack of capacity; every boot may fail (the instance dies before it
//!   is in service, and the cloud replaces it);
//! - eventual consistency: a describe may answer the group as it was a while ago
//!   (`consistency.describeLag`), as EC2 and the Auto Scaling API do after writes;
//! - scripts: "the next N `SetDesiredCapacity` calls on group X answer `Throttled`", for tests
//!   and demos that need a fault at a precise point.
//!
//! A fault profile is YAML (see `docs/simulated-fleet.md`):
//!
//! ```yaml
//! boot: {min: 60s, max: 120s, failureRate: 0.05}
//! api: {throttleRate: 0.02, serverErrorRate: 0.01, lostResponseRate: 0.01}
//! consistency: {describeLag: 5s}
//! launch: {capacityErrorRate: 0.1}
//! quota: {instances: 500}
//! scripted:
//!   - {call: setCapacity, group: eks-general, error: throttled, times: 2}
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};

use rota_core::cloud::CloudErrorKind;
use rota_core::fleet::duration::GoDuration;

/// Everything that can go wrong in one simulated cloud.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct FaultProfile {
    pub boot: BootProfile,
    pub api: ApiFaults,
    pub launch: LaunchFaults,
    pub quota: Quota,
    pub consistency: Consistency,
    pub scripted: Vec<ScriptedFault>,
}

/// How far behind the writes a read of the cloud may be.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Consistency {
    /// Each describe answers the group as it was up to this long ago (drawn uniformly per
    /// call, so two reads in a row may even go back in time, as behind a load balancer).
    /// Zero: reads see every write at once.
    pub describe_lag: GoDuration,
}

/// How long an instance takes from launch to in-service, and how often it never gets there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct BootProfile {
    /// Shortest boot (uniformly drawn between `min` and `max`).
    pub min: GoDuration,
    pub max: GoDuration,
    /// Share of launches (0..=1) whose instance fails to boot and is replaced by the cloud.
    pub failure_rate: f64,
    /// How long a terminating instance stays listed as `terminating` before it is gone.
    pub shutdown: GoDuration,
}

impl Default for BootProfile {
    fn default() -> Self {
        BootProfile {
            min: GoDuration::from_secs(60),
            max: GoDuration::from_secs(120),
            failure_rate: 0.0,
            shutdown: GoDuration::from_secs(30),
        }
    }
}

/// Faults of the cloud API itself, drawn per call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ApiFaults {
    /// Share of calls (0..=1) answered with 429 / rate exceeded.
    pub throttle_rate: f64,
    /// Share of calls (0..=1) answered with a 5xx.
    pub server_error_rate: f64,
    /// Share of calls that change something (0..=1) which take effect and then answer a
    /// 5xx anyway, as when the response is lost or the client times out.
    pub lost_response_rate: f64,
}

/// Faults of launching instances (asynchronous, as scaling activities fail in real clouds).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LaunchFaults {
    /// Share of launch attempts (0..=1) that fail with insufficient capacity; the cloud retries.
    pub capacity_error_rate: f64,
    /// Wait before the cloud retries a failed launch.
    pub retry_after: GoDuration,
}

impl Default for LaunchFaults {
    fn default() -> Self {
        LaunchFaults {
            capacity_error_rate: 0.0,
            retry_after: GoDuration::from_secs(10),
        }
    }
}

/// Account limits.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Quota {
    /// Most instances the whole cloud account may hold (sum of desired capacities); `None`:
    /// unlimited. A `set_capacity` that would exceed it answers `Quota`.
    pub instances: Option<u32>,
}

/// Calls a scripted fault can target, named as in the profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Call {
    Describe,
    SetImage,
    SetCapacity,
    Terminate,
    /// EKS `DescribeNodegroup` (with its newest update) of a simulated managed node group.
    DescribeNodegroup,
    /// EKS `UpdateNodegroupVersion` of a simulated managed node group.
    UpdateNodegroupVersion,
    /// GKE `nodePools.get` (and the newest operation's `operations.get`).
    GetNodePool,
    /// GKE `nodePools.update`.
    UpdateNodePool,
    /// AKS `AgentPools_Get`.
    GetAgentPool,
    /// AKS's node image upgrade (`AgentPools_CreateOrUpdate` with its settings, then
    /// `AgentPools_UpgradeNodeImageVersion`).
    UpgradeNodeImageVersion,
    /// EKS `CreateNodegroup` (a blue-green twin).
    CreateNodegroup,
    /// EKS `UpdateNodegroupConfig` with a `scalingConfig`.
    UpdateNodegroupConfig,
    /// EKS `DeleteNodegroup`.
    DeleteNodegroup,
    /// GKE `nodePools.create` (a blue-green twin).
    CreateNodePool,
    /// GKE `nodePools.setSize`.
    SetNodePoolSize,
    /// Compute `instanceGroupManagers.deleteInstances` on a GKE node pool's group.
    DeleteInstances,
    /// GKE `nodePools.delete`.
    DeleteNodePool,
    /// AKS `AgentPools_CreateOrUpdate` of a blue-green twin.
    CreateAgentPool,
    /// AKS `AgentPools_CreateOrUpdate` with a new `count`.
    ScaleAgentPool,
    /// AKS `AgentPools_DeleteMachines`.
    DeleteMachines,
    /// AKS `AgentPools_Delete`.
    DeleteAgentPool,
}

impl Call {
    /// The provider-style call name that errors carry.
    pub fn api_name(self) -> &'static str {
        match self {
            Call::Describe => "DescribeGroup",
            Call::SetImage => "SetTemplateImage",
            Call::SetCapacity => "SetDesiredCapacity",
            Call::Terminate => "TerminateInstance",
            Call::DescribeNodegroup => "DescribeNodegroup",
            Call::UpdateNodegroupVersion => "UpdateNodegroupVersion",
            Call::GetNodePool => "nodePools.get",
            Call::UpdateNodePool => "nodePools.update",
            Call::GetAgentPool => "AgentPools_Get",
            Call::UpgradeNodeImageVersion => "AgentPools_UpgradeNodeImageVersion",
            Call::CreateNodegroup => "CreateNodegroup",
            Call::UpdateNodegroupConfig => "UpdateNodegroupConfig",
            Call::DeleteNodegroup => "DeleteNodegroup",
            Call::CreateNodePool => "nodePools.create",
            Call::SetNodePoolSize => "nodePools.setSize",
            Call::DeleteInstances => "instanceGroupManagers.deleteInstances",
            Call::DeleteNodePool => "nodePools.delete",
            Call::CreateAgentPool | Call::ScaleAgentPool => "AgentPools_CreateOrUpdate",
            Call::DeleteMachines => "AgentPools_DeleteMachines",
            Call::DeleteAgentPool => "AgentPools_Delete",
        }
    }
}

/// The error a scripted fault answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ScriptedError {
    Throttled,
    ServerError,
    Quota,
    Permission,
}

impl ScriptedError {
    pub fn kind(self) -> CloudErrorKind {
        match self {
            ScriptedError::Throttled => CloudErrorKind::Throttled,
            ScriptedError::ServerError => CloudErrorKind::Transient,
            ScriptedError::Quota => CloudErrorKind::Quota,
            ScriptedError::Permission => CloudErrorKind::Permission,
        }
    }
}

/// "The next `times` calls of `call` (on `group`, or any group) fail with `error`."
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptedFault {
    pub call: Call,
    /// The group's own name (`GroupRef::name`); absent: any group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub error: ScriptedError,
    #[serde(default = "one")]
    pub times: u32,
}

fn one() -> u32 {
    1
}

/// A fault profile that cannot be used, naming the file and field.
#[derive(Debug, thiserror::Error)]
pub enum FaultProfileError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: {field}: {message}")]
    Invalid {
        path: String,
        field: &'static str,
        message: String,
    },
}

impl FaultProfile {
    /// Parse and check a profile; `origin` names it in errors (a path or `<inline>`).
    pub fn from_yaml(text: &str, origin: &str) -> Result<Self, FaultProfileError> {
        let profile: FaultProfile =
            serde_yaml::from_str(text).map_err(|e| FaultProfileError::Parse {
                path: origin.to_string(),
                message: e.to_string(),
            })?;
        profile.check(origin)?;
        Ok(profile)
    }

    pub fn load(path: &Path) -> Result<Self, FaultProfileError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| FaultProfileError::Read {
            path: origin.clone(),
            source,
        })?;
        Self::from_yaml(&text, &origin)
    }

    fn check(&self, origin: &str) -> Result<(), FaultProfileError> {
        let invalid = |field: &'static str, message: String| FaultProfileError::Invalid {
            path: origin.to_string(),
            field,
            message,
        };
        let rates = [
            ("boot.failureRate", self.boot.failure_rate),
            ("api.throttleRate", self.api.throttle_rate),
            ("api.serverErrorRate", self.api.server_error_rate),
            ("api.lostResponseRate", self.api.lost_response_rate),
            ("launch.capacityErrorRate", self.launch.capacity_error_rate),
        ];
        for (field, rate) in rates {
            if !(0.0..=1.0).contains(&rate) {
                return Err(invalid(
                    field,
                    format!("{rate} is not a share between 0 and 1"),
                ));
            }
        }
        if self.api.throttle_rate + self.api.server_error_rate > 1.0 {
            return Err(invalid(
                "api",
                "throttleRate + serverErrorRate is more than 1".into(),
            ));
        }
        if self.boot.min > self.boot.max {
            return Err(invalid(
                "boot.min",
                format!(
                    "{} is longer than boot.max {}",
                    self.boot.min, self.boot.max
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_boot_in_60_to_120_seconds_without_faults() {
        let p = FaultProfile::from_yaml("{}", "<t>").unwrap();
        assert_eq!(p.boot.min, GoDuration::from_secs(60));
        assert_eq!(p.boot.max, GoDuration::from_secs(120));
        assert_eq!(p.api.throttle_rate, 0.0);
        assert!(p.scripted.is_empty());
    }

    #[test]
    fn parses_a_full_profile() {
        let p = FaultProfile::from_yaml(
            "boot: {min: 30s, max: 2m, failureRate: 0.1}\n\
             api: {throttleRate: 0.2, serverErrorRate: 0.05}\n\
             launch: {capacityErrorRate: 0.5}\n\
             quota: {instances: 40}\n\
             consistency: {describeLag: 5s}\n\
             scripted:\n  - {call: setCapacity, group: g, error: throttled, times: 2}\n",
            "<t>",
        )
        .unwrap();
        assert_eq!(p.boot.max, GoDuration::from_secs(120));
        assert_eq!(p.quota.instances, Some(40));
        assert_eq!(p.consistency.describe_lag, GoDuration::from_secs(5));
        assert_eq!(p.scripted[0].call, Call::SetCapacity);
        assert_eq!(p.scripted[0].times, 2);
    }

    #[test]
    fn bad_input_names_the_file_and_field() {
        let e = FaultProfile::from_yaml("api: {throttleRate: 1.5}", "f.yaml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.yaml: api.throttleRate: 1.5 is not a share between 0 and 1"
        );
        let e = FaultProfile::from_yaml("api: {throtleRate: 0.1}", "f.yaml").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("f.yaml: api: unknown field `throtleRate`"),
            "{e}"
        );
        let e = FaultProfile::from_yaml("boot: {min: 3m}", "f.yaml").unwrap_err();
        assert!(e.to_string().contains("boot.min"), "{e}");
    }
}
