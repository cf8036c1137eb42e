//! Reading a kubeconfig for the long-running commands (`rota agent`, `rota controller`), and
//! the cluster extension in which `rota sim serve` names its simulated cloud's endpoint.
//!
//! Lives here, not in `cli/`, so that the cloud choice (`cli::cloud`) and the commands that
//! load a kubeconfig (`cli::controller`, `cli::agent`) depend on it rather than on each other.

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};

/// Kubeconfig cluster extension naming the simulated cloud's endpoint (as the simulated
/// fleet writes it, `sim::kubeconfig::CLOUD_EXTENSION`; also known to a build without it, to
/// say why such a kubeconfig cannot be used).
pub const SIM_CLOUD_EXTENSION: &str = "rota.dev/sim-cloud";

/// The client configuration, and the kubeconfig it came from (with the context asked for)
/// when there was one (in-cluster configuration has none).
pub type Loaded = (kube::Config, Option<(Kubeconfig, Option<String>)>);

/// `path` (else `$KUBECONFIG`), at `context` (else its current one); without either, the
/// in-cluster configuration.
pub async fn load(path: Option<&Path>, context: Option<&str>) -> Result<Loaded, String> {
    let path = path
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("KUBECONFIG").map(PathBuf::from));
    let Some(path) = path else {
        let c = kube::Config::infer()
            .await
            .map_err(|e| format!("no Kubernetes configuration: {e}"))?;
        return Ok((c, None));
    };
    let k = Kubeconfig::read_from(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let opts = KubeConfigOptions {
        context: context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    let c = kube::Config::from_custom_kubeconfig(k.clone(), &opts)
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((c, Some((k, context.map(str::to_string)))))
}

/// The simulated cloud's endpoint named in the kubeconfig, for `context` (or the current
/// context).
pub fn sim_cloud_endpoint(k: &Kubeconfig, context: Option<&str>) -> Option<String> {
    let ctx = context
        .map(String::from)
        .or_else(|| k.current_context.clone())?;
    let cluster = k
        .contexts
        .iter()
        .find(|c| c.name == ctx)?
        .context
        .as_ref()?
        .cluster
        .clone();
    let cluster = k
        .clusters
        .iter()
        .find(|c| c.name == cluster)?
        .cluster
        .as_ref()?;
    cluster
        .extensions
        .iter()
        .flatten()
        .find(|e| e.name == SIM_CLOUD_EXTENSION)?
        .extension
        .get("url")?
        .as_str()
        .map(String::from)
}

#[cfg(test)]
mod tests {
    #[cfg(feature = "sim")]
    #[test]
    fn the_simulated_fleet_writes_the_extension_read_here() {
        assert_eq!(SIM_CLOUD_EXTENSION, rota_sim::kubeconfig::CLOUD_EXTENSION);
    }

    use super::*;

    #[test]
    fn the_sim_cloud_endpoint_is_read_from_the_contexts_cluster() {
        let k = Kubeconfig::from_yaml(
            r#"
apiVersion: v1
kind: Config
current-context: a
clusters:
- name: a
  cluster:
    server: http://127.0.0.1:1
    extensions:
    - name: rota.dev/sim-cloud
      extension: {url: "http://127.0.0.1:9"}
- name: b
  cluster: {server: "http://127.0.0.1:2"}
contexts:
- {name: a, context: {cluster: a, user: a}}
- {name: b, context: {cluster: b, user: b}}
users:
- {name: a, user: {token: t}}
- {name: b, user: {token: t}}
"#,
        )
        .unwrap();
        assert_eq!(
            sim_cloud_endpoint(&k, None).as_deref(),
            Some("http://127.0.0.1:9")
        );
        assert_eq!(sim_cloud_endpoint(&k, Some("b")), None);
    }
}
