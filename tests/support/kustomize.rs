//! The deploy tests' view of `deploy/` and `examples/deploy/`: `kubectl kustomize` rendered
//! to JSON objects, and the round trip through a Kubernetes type that finds the fields the
//! type does not know (a typo such as `readinesProbe` would be dropped by the API server
//! without a word).
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// `kubectl kustomize DIR` as JSON values, one per object.
pub fn render(dir: &Path) -> Vec<Value> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl is missing (scripts/test installs it)");
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| {
            let v: serde_yaml::Value = serde::Deserialize::deserialize(d).unwrap();
            serde_json::to_value(v).unwrap()
        })
        .collect()
}

/// Paths present in `original` but missing or different after the typed round trip: fields
/// the Kubernetes type does not know, or values it reads differently.
pub fn unknown_fields(original: &Value, typed: &Value, path: &str, out: &mut Vec<String>) {
    match (original, typed) {
        (Value::Object(o), Value::Object(t)) => {
            for (k, v) in o {
                match t.get(k) {
                    Some(tv) => unknown_fields(v, tv, &format!("{path}.{k}"), out),
                    None if v.is_null() => {}
                    None => out.push(format!("{path}.{k}")),
                }
            }
        }
        (Value::Array(o), Value::Array(t)) if o.len() == t.len() => {
            for (i, (a, b)) in o.iter().zip(t).enumerate() {
                unknown_fields(a, b, &format!("{path}[{i}]"), out);
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        (a, b) if a == b => {}
        (a, b) => out.push(format!("{path}: {a} read as {b}")),
    }
}

/// What the round trip of `obj` through `T` loses (empty: all of it is `T`'s).
pub fn typed_check<T: serde::de::DeserializeOwned + serde::Serialize>(obj: &Value) -> Vec<String> {
    let typed: T = match serde_json::from_value(obj.clone()) {
        Ok(t) => t,
        Err(e) => return vec![format!("does not parse: {e}")],
    };
    let back = serde_json::to_value(&typed).unwrap();
    let mut out = Vec::new();
    unknown_fields(obj, &back, "", &mut out);
    out
}

/// The object `kind`/`name` of `objects` as its type `T`; every field it has must be `T`'s.
pub fn find<T: serde::de::DeserializeOwned + serde::Serialize>(
    objects: &[Value],
    kind: &str,
    name: &str,
) -> T {
    let o = objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"));
    let lost = typed_check::<T>(o);
    assert!(lost.is_empty(), "{kind}/{name}: {lost:?}");
    serde_json::from_value(o.clone()).unwrap()
}

/// A container's command line as rota's own parser reads it (`$(ROTA_REPO)` filled in from
/// the container's env, as the kubelet does), with the argv it parsed.
pub fn container_cli(
    c: &k8s_openapi::api::core::v1::Container,
) -> (rota::cli::Command, Vec<String>) {
    use clap::Parser;
    let repo = c
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "ROTA_REPO")
        .and_then(|e| e.value.clone())
        .unwrap_or_default();
    let mut argv = vec!["rota".to_string()];
    argv.extend(
        c.args
            .iter()
            .flatten()
            .map(|a| a.replace("$(ROTA_REPO)", &repo)),
    );
    let cli = rota::cli::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    (cli.command, argv)
}
