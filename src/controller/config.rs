//! How a controller identifies itself and what it owns ([`Config`]): its version and
//! identity, the Lease's namespace, its clock's speed and the flags that tune a pass. The
//! controller holds one; it lives below every file of the controller.

/// How a controller identifies itself and what it owns.
#[derive(Clone, Debug)]
pub struct Config {
    /// rota's version: names the Lease and selects the resources it owns.
    pub version: String,
    /// Also own resources without a `rota.dev/agent-version` label.
    pub is_default: bool,
    /// This process among the candidates (the Lease's holder identity).
    pub identity: String,
    /// Namespace of the Lease.
    pub lease_namespace: String,
    /// Controller time runs this many times faster than real time (see [`clock`]).
    pub speed: f64,
    /// Publish Kubernetes events on the resources.
    pub events: bool,
    /// A rotation without progress for this long is Stuck (`--stuck-after`).
    pub stuck_after: std::time::Duration,
    /// How far the cloud's describes may lag behind writes (`--describe-lag`); see
    /// [`rota_core::rotate::observed::Observed::describe_lag`].
    pub describe_lag: std::time::Duration,
    /// How often a pool with nothing to rotate describes its group anyway
    /// (`--idle-describe-interval`); see [`Described`].
    pub idle_describe_interval: std::time::Duration,
    /// Whether a cluster autoscaler may share the pools' groups (`true` unless
    /// `--no-cluster-autoscaler`); see
    /// [`rota_core::rotate::observed::Observed::cluster_autoscaler`].
    pub cluster_autoscaler: bool,
    /// This replica's wall clock is off by this much (tests: clock skew between replicas).
    pub clock_skew: chrono::Duration,
}

impl Config {
    pub fn new(version: &str, identity: &str) -> Config {
        Config {
            version: version.into(),
            is_default: true,
            identity: identity.into(),
            lease_namespace: "kube-system".into(),
            speed: 1.0,
            events: true,
            stuck_after: std::time::Duration::from_secs(30 * 60),
            describe_lag: std::time::Duration::ZERO,
            idle_describe_interval: std::time::Duration::from_secs(3600),
            cluster_autoscaler: true,
            clock_skew: chrono::Duration::zero(),
        }
    }
}
