//! The kubeconfig for simulated clusters: one cluster, user and context per simulated
//! cluster, each context named after the cluster, each pointing at that cluster's own loopback
//! HTTP listener (one listener per cluster, so API paths are the standard ones).

use std::path::Path;

use serde_json::{Value, json};

/// The cluster extension in which the kubeconfig names the simulated cloud's endpoint (what
/// `kube::kubeconfig::SIM_CLOUD_EXTENSION` reads, a test holds the two equal).
pub const CLOUD_EXTENSION: &str = "rota.dev/sim-cloud";

/// A kubeconfig (YAML) for `(cluster name, server URL)` pairs; the first is the current context.
pub fn render(clusters: &[(String, String)]) -> String {
    let cl: Vec<Value> = clusters
        .iter()
        .map(|(n, url)| json!({"name": n, "cluster": {"server": url}}))
        .collect();
    let users: Vec<Value> = clusters
        .iter()
        .map(|(n, _)| json!({"name": n, "user": {"token": "rota-sim"}}))
        .collect();
    let ctx: Vec<Value> = clusters
        .iter()
        .map(|(n, _)| json!({"name": n, "context": {"cluster": n, "user": n, "namespace": "default"}}))
        .collect();
    let doc = json!({
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": cl, "users": users, "contexts": ctx,
        "current-context": clusters.first().map(|c| c.0.clone()).unwrap_or_default(),
    });
    serde_yaml::to_string(&doc).expect("a JSON value always renders as YAML")
}

/// Writes the kubeconfig to `path` (mode 0600, as kubectl does for files with credentials).
pub fn write(path: &Path, clusters: &[(String, String)]) -> std::io::Result<()> {
    write_text(path, &render(clusters))
}

fn write_text(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

/// [`write`], with the simulated cloud's endpoint `cloud` as the cluster extension
/// `rota controller --cloud sim` reads (kubectl ignores extensions).
pub fn write_with_cloud(
    path: &Path,
    clusters: &[(String, String)],
    cloud: &str,
) -> std::io::Result<()> {
    let mut doc: Value = serde_yaml::from_str(&render(clusters)).map_err(std::io::Error::other)?;
    for c in doc["clusters"].as_array_mut().into_iter().flatten() {
        c["cluster"]["extensions"] = json!([
            {"name": CLOUD_EXTENSION, "extension": {"url": cloud}}
        ]);
    }
    write_text(
        path,
        &serde_yaml::to_string(&doc).map_err(std::io::Error::other)?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_context_per_cluster() {
        let y = render(&[
            ("eu-1".into(), "http://127.0.0.1:1".into()),
            ("us-1".into(), "http://127.0.0.1:2".into()),
        ]);
        let v: Value = serde_yaml::from_str(&y).unwrap();
        assert_eq!(v["current-context"], "eu-1");
        assert_eq!(v["contexts"][1]["name"], "us-1");
        assert_eq!(v["contexts"][1]["context"]["cluster"], "us-1");
        assert_eq!(v["clusters"][1]["cluster"]["server"], "http://127.0.0.1:2");
    }
}
