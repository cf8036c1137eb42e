//! The smallest fleets the tests drive: one AWS cluster `canary-1` with one pool `general`,
//! in one wave `canary` pinned to `version` (the agent's process tests and latency bench);
//! and the same in two waves, `canary` then `main` (`main-1`), for the promotion guard's
//! tests ([`two_waves_yaml`]).

/// The fleet repo as one YAML file. `rollout` is the fleet's rollout policy (a flow mapping);
/// `fleet_extra` is appended to the Fleet's `spec` (lines indented by two spaces).
pub fn canary_fleet_yaml(version: &str, rollout: &str, fleet_extra: &str) -> String {
    format!(
        r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {{name: acme}}
spec:
  images:
    general:
      versions:
        "2026.11.1": {{aws: ami-0a1b2c3d4e5f60718}}
        "2026.11.2": {{aws: ami-0f9e8d7c6b5a40312}}
  waves:
    - name: canary
      clusters: [canary-1]
      images: {{general: "{version}"}}
  rollout: {rollout}
{fleet_extra}---
apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {{name: canary-1}}
spec:
  cloud: {{aws: {{region: us-east-1}}}}
  pools:
    - name: general
      channel: general
      nodeSelector: {{rota.dev/pool: general}}
      group: {{autoScalingGroup: canary-general}}
"#
    )
}

/// Two waves: `canary` (`canary-1`, pinned to `canary`, a 30-minute soak) then `main`
/// (`main-1`, pinned to `main`), one pool `general` each. `fleet_extra` is appended to the
/// Fleet's `spec` (lines indented by two spaces: `rollout`, `promotion`).
pub fn two_waves_yaml(canary: &str, main: &str, fleet_extra: &str) -> String {
    format!(
        r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {{name: acme}}
spec:
  images:
    general:
      versions:
        "2026.11.1": {{aws: ami-0a1b2c3d4e5f60718}}
        "2026.11.2": {{aws: ami-0f9e8d7c6b5a40312}}
  waves:
    - name: canary
      clusters: [canary-1]
      images: {{general: "{canary}"}}
      soak: 30m
    - name: main
      clusters: [main-1]
      images: {{general: "{main}"}}
{fleet_extra}---
apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {{name: canary-1}}
spec:
  cloud: {{aws: {{region: us-east-1}}}}
  pools:
    - {{name: general, channel: general, nodeSelector: {{rota.dev/pool: general}}, group: {{autoScalingGroup: canary-general}}}}
---
apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {{name: main-1}}
spec:
  cloud: {{aws: {{region: us-east-1}}}}
  pools:
    - {{name: general, channel: general, nodeSelector: {{rota.dev/pool: general}}, group: {{autoScalingGroup: main-general}}}}
"#
    )
}
