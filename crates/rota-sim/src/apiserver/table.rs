//! Server-side printing: the `meta.k8s.io/v1` Table that `kubectl get` asks for, with the
//! columns kubectl users expect for nodes, pods, PDBs and deployments (Name and Age for the
//! rest).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::store::ResourceType;

/// Kubernetes' `duration.HumanDuration`, e.g. `45s`, `3m12s`, `5h`, `2d4h`.
pub fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if d < 8 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else {
        format!("{d}d")
    }
}

fn age(o: &Value, now: DateTime<Utc>) -> String {
    o.pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| human_duration((now - t.with_timezone(&Utc)).num_seconds()))
        .unwrap_or_else(|| "<unknown>".into())
}

fn s<'a>(o: &'a Value, p: &str) -> &'a str {
    o.pointer(p).and_then(Value::as_str).unwrap_or("")
}

fn int_or_none(o: &Value, p: &str) -> Value {
    match o.pointer(p) {
        Some(Value::Number(n)) => json!(n.to_string()),
        Some(Value::String(x)) => json!(x),
        _ => json!("N/A"),
    }
}

fn node_status(n: &Value) -> String {
    let ready = n
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        })
        .map(|c| match c.get("status").and_then(Value::as_str) {
            Some("True") => "Ready",
            Some("False") => "NotReady",
            _ => "Unknown",
        })
        .unwrap_or("Unknown");
    let mut out = ready.to_string();
    if n.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        out.push_str(",SchedulingDisabled");
    }
    out
}

fn node_roles(n: &Value) -> String {
    let roles: Vec<&str> = n
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|l| {
            l.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .collect()
        })
        .unwrap_or_default();
    if roles.is_empty() {
        "<none>".into()
    } else {
        roles.join(",")
    }
}

fn pod_cells(p: &Value) -> Vec<Value> {
    let total = p
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let statuses = p
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array);
    let ready = statuses.map_or(0, |a| {
        a.iter()
            .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
            .count()
    });
    let restarts: i64 = statuses.map_or(0, |a| {
        a.iter()
            .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
            .sum()
    });
    let status = if p.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating".to_string()
    } else {
        let phase = s(p, "/status/phase");
        if phase.is_empty() {
            "Unknown".into()
        } else {
            phase.to_string()
        }
    };
    vec![
        json!(format!("{ready}/{total}")),
        json!(status),
        json!(restarts),
    ]
}

/// The type-specific cells of one row.
type CellsFn = dyn Fn(&Value) -> Vec<Value>;

/// The Table for a list of objects of one type.
pub fn table(rt: &ResourceType, items: &[Value], rv: &str, now: DateTime<Utc>) -> Value {
    let col = |name: &str, ty: &str| json!({"name": name, "type": ty, "format": if name == "Name" {"name"} else {""}, "description": "", "priority": 0});
    let (cols, extra): (Vec<Value>, Box<CellsFn>) = match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "nodes") => (
            vec![col("Status", "string"), col("Roles", "string")],
            Box::new(|n| vec![json!(node_status(n)), json!(node_roles(n))]),
        ),
        ("", "pods") => (
            vec![
                col("Ready", "string"),
                col("Status", "string"),
                col("Restarts", "integer"),
            ],
            Box::new(pod_cells),
        ),
        ("policy", "poddisruptionbudgets") => (
            vec![
                col("Min Available", "string"),
                col("Max Unavailable", "string"),
                col("Allowed Disruptions", "integer"),
            ],
            Box::new(|p| {
                vec![
                    int_or_none(p, "/spec/minAvailable"),
                    int_or_none(p, "/spec/maxUnavailable"),
                    json!(
                        p.pointer("/status/disruptionsAllowed")
                            .and_then(Value::as_i64)
                            .unwrap_or(0)
                    ),
                ]
            }),
        ),
        ("apps", "deployments") => (
            vec![
                col("Ready", "string"),
                col("Up-to-date", "integer"),
                col("Available", "integer"),
            ],
            Box::new(|d| {
                let n = |p: &str| d.pointer(p).and_then(Value::as_i64).unwrap_or(0);
                vec![
                    json!(format!(
                        "{}/{}",
                        n("/status/readyReplicas"),
                        d.pointer("/spec/replicas")
                            .and_then(Value::as_i64)
                            .unwrap_or(1)
                    )),
                    json!(n("/status/updatedReplicas")),
                    json!(n("/status/availableReplicas")),
                ]
            }),
        ),
        ("", "events") => (
            vec![
                col("Type", "string"),
                col("Reason", "string"),
                col("Object", "string"),
                col("Message", "string"),
            ],
            Box::new(|e| {
                let obj = format!(
                    "{}/{}",
                    s(e, "/involvedObject/kind").to_lowercase(),
                    s(e, "/involvedObject/name")
                );
                vec![
                    json!(s(e, "/type")),
                    json!(s(e, "/reason")),
                    json!(obj),
                    json!(s(e, "/message")),
                ]
            }),
        ),
        _ => (vec![], Box::new(|_| vec![])),
    };
    let mut columns = vec![col("Name", "string")];
    columns.extend(cols);
    columns.push(col("Age", "string"));
    if rt.plural == "nodes" && rt.group.is_empty() {
        columns.push(col("Version", "string"));
    }
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let mut cells = vec![json!(s(o, "/metadata/name"))];
            cells.extend(extra(o));
            cells.push(json!(age(o, now)));
            if rt.plural == "nodes" && rt.group.is_empty() {
                cells.push(json!(s(o, "/status/nodeInfo/kubeletVersion")));
            }
            json!({"cells": cells, "object": o})
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
           "columnDefinitions": columns, "rows": rows})
}

/// The value at a CRD printer column's JSONPath (the simple `.a.b.c` form).
fn json_path<'a>(o: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = o;
    for seg in path
        .trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
    {
        cur = cur.get(seg)?;
    }
    Some(cur)
}

/// The Table of a custom resource whose CRD declares `additionalPrinterColumns`: Name, then
/// those columns (dates shown as ages, as the API server does).
pub fn custom_table(items: &[Value], rv: &str, now: DateTime<Utc>, printer: &[Value]) -> Value {
    let mut columns = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0}),
    ];
    for c in printer {
        let ty = c.get("type").and_then(Value::as_str).unwrap_or("string");
        columns.push(json!({"name": c.get("name").cloned().unwrap_or(json!("")),
                            "type": if ty == "date" { "string" } else { ty },
                            "format": c.get("format").cloned().unwrap_or(json!("")),
                            "description": c.get("description").cloned().unwrap_or(json!("")),
                            "priority": c.get("priority").cloned().unwrap_or(json!(0))}));
    }
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let mut cells = vec![json!(s(o, "/metadata/name"))];
            for c in printer {
                let path = c.get("jsonPath").and_then(Value::as_str).unwrap_or("");
                let v = json_path(o, path);
                cells.push(match (c.get("type").and_then(Value::as_str), v) {
                    (_, None | Some(Value::Null)) => Value::Null,
                    (Some("date"), Some(Value::String(t))) => DateTime::parse_from_rfc3339(t)
                        .map(|t| json!(human_duration((now - t.with_timezone(&Utc)).num_seconds())))
                        .unwrap_or_else(|_| json!(t)),
                    (_, Some(v @ (Value::String(_) | Value::Number(_) | Value::Bool(_)))) => {
                        v.clone()
                    }
                    (_, Some(other)) => json!(other.to_string()),
                });
            }
            json!({"cells": cells, "object": o})
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
           "columnDefinitions": columns, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printer_columns() {
        let now = Utc::now();
        let t = (now - chrono::Duration::seconds(90)).to_rfc3339();
        let o = json!({"metadata": {"name": "pool-a", "creationTimestamp": t},
                       "status": {"phase": "Soaking", "batch": 2}});
        let cols = [
            json!({"name": "Phase", "type": "string", "jsonPath": ".status.phase"}),
            json!({"name": "Batch", "type": "integer", "jsonPath": ".status.batch"}),
            json!({"name": "Gate", "type": "string", "jsonPath": ".status.gate"}),
            json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}),
        ];
        let tbl = custom_table(&[o], "1", now, &cols);
        assert_eq!(
            tbl["rows"][0]["cells"],
            json!(["pool-a", "Soaking", 2, null, "90s"])
        );
        assert_eq!(tbl["columnDefinitions"][4]["type"], "string");
    }

    #[test]
    fn human_durations() {
        assert_eq!(human_duration(45), "45s");
        assert_eq!(human_duration(192), "3m12s");
        assert_eq!(human_duration(1800), "30m");
        assert_eq!(human_duration(5 * 3600), "5h");
        assert_eq!(human_duration(5 * 3600 + 600), "5h10m");
        assert_eq!(human_duration(52 * 3600), "2d4h");
        assert_eq!(human_duration(20 * 86400), "20d");
    }
}
