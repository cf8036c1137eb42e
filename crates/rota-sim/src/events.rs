//! Events are stored once and served in two forms, as in Kubernetes: core `v1` Events (what
//! `kubectl get events` and `kubectl describe` read) and `events.k8s.io/v1` Events (what
//! kube-rs' `Recorder` writes). The store keeps the core form; these functions convert.

use serde_json::{Map, Value, json};

/// (core v1 field, events.k8s.io/v1 field)
const RENAMES: [(&str, &str); 8] = [
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingInstance", "reportingInstance"),
];

fn rename(obj: Value, to_v1: bool, api_version: &str) -> Value {
    let Value::Object(m) = obj else { return obj };
    let mut out = Map::new();
    for (k, v) in m {
        let k2 = RENAMES
            .iter()
            .find(|(core, v1)| if to_v1 { core == &k } else { v1 == &k })
            .map(|(core, v1)| {
                if to_v1 {
                    v1.to_string()
                } else {
                    core.to_string()
                }
            })
            .unwrap_or(k);
        out.insert(k2, v);
    }
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!("Event"));
    Value::Object(out)
}

/// An events.k8s.io/v1 Event in its stored (core v1) form.
pub fn to_core(v1: Value) -> Value {
    rename(v1, false, "v1")
}

/// A stored (core v1) Event as events.k8s.io/v1.
pub fn to_v1(core: Value) -> Value {
    rename(core, true, "events.k8s.io/v1")
}

/// A field selector written against events.k8s.io/v1 names, in core names.
pub fn field_selector_to_core(s: &str) -> String {
    s.split(',')
        .map(|part| {
            let mut p = part.to_string();
            for (core, v1) in RENAMES {
                if let Some(rest) = p.strip_prefix(v1)
                    && rest.starts_with(['.', '=', '!'])
                {
                    p = format!("{core}{rest}");
                    break;
                }
            }
            p
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
                        "regarding": {"kind": "Node", "name": "n1"}, "note": "cordoned", "reason": "Cordon",
                        "reportingController": "rota", "reportingInstance": "rota-0", "type": "Normal"});
        let core = to_core(v1.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "n1");
        assert_eq!(core["message"], "cordoned");
        assert_eq!(core["reportingComponent"], "rota");
        assert_eq!(to_v1(core), v1);
        assert_eq!(
            field_selector_to_core("regarding.name=n1,reason=Cordon"),
            "involvedObject.name=n1,reason=Cordon"
        );
    }
}
