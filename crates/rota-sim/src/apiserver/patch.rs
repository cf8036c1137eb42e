//! The four patch types of the Kubernetes API: JSON patch (RFC 6902), JSON merge patch
//! (RFC 7386), strategic merge patch (merge patch plus list merging by key and `$patch`
//! directives, for what kubectl sends), and server-side apply (merge of the applied
//! configuration, field ownership per manager in `managedFields`, conflicts, and removal of
//! fields a manager stops applying).

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::store::{ApiError, ResourceType};

/// RFC 7386: objects merge recursively, `null` deletes, anything else replaces.
pub fn merge(target: &mut Value, patch: &Value) {
    let Some(p) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let t = target.as_object_mut().expect("object");
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// RFC 6902.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
    json_patch::patch(target, &ops).map_err(|e| {
        ApiError::new(
            422,
            "Invalid",
            format!("the server rejected our request due to an error in our request: {e}"),
        )
    })
}

/// The merge key of a list field, as the Kubernetes types declare it
/// (`patchStrategy:"merge" patchMergeKey:"..."`). `Some("")` marks a list of scalars merged
/// as a set (finalizers). Lists not named here are replaced whole.
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "volumeDevices"
        | "resourceClaims" => "name",
        "ports" => "containerPort",
        "volumeMounts" => "mountPath",
        "conditions" | "addresses" => "type",
        "taints" => "key",
        "ownerReferences" => "uid",
        "hostAliases" => "ip",
        "finalizers" => "",
        _ => return None,
    })
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

/// Strategic merge patch for the built-in types.
pub fn strategic_merge(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let Some(p) = patch.as_object() else {
        *target = patch.clone();
        return Ok(());
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *target = strip_directives(patch);
            return Ok(());
        }
        Some("delete") => {
            *target = json!({});
            return Ok(());
        }
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unknown patch type: {other:?} in map"
            )));
        }
        None => {}
    }
    if !target.is_object() {
        *target = json!({});
    }
    let retain: Option<Vec<String>> = p.get("$retainKeys").and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect()
    });
    let t = target.as_object_mut().expect("object");
    for (k, v) in p {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(gone)) = (t.get_mut(field), v.as_array()) {
                list.retain(|x| !gone.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            // $setElementOrder/..., $retainKeys: ordering hints and the key list used below.
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        match (v, merge_key(k)) {
            (Value::Object(_), _) => {
                if v.get("$patch").and_then(Value::as_str) == Some("delete") {
                    t.remove(k);
                } else {
                    strategic_merge(t.entry(k.clone()).or_insert(Value::Null), v)?;
                }
            }
            (Value::Array(items), Some(key)) => {
                let cur = t.entry(k.clone()).or_insert_with(|| json!([]));
                if !cur.is_array() {
                    *cur = json!([]);
                }
                merge_list(cur.as_array_mut().expect("array"), items, key)?;
            }
            _ => {
                t.insert(k.clone(), strip_directives(v));
            }
        }
    }
    if let Some(keep) = retain {
        t.retain(|k, _| keep.contains(k));
    }
    Ok(())
}

fn merge_list(cur: &mut Vec<Value>, items: &[Value], key: &str) -> Result<(), ApiError> {
    if key.is_empty() {
        for i in items {
            if !cur.contains(i) {
                cur.push(i.clone());
            }
        }
        return Ok(());
    }
    // `[{"$patch": "replace"}, ...]` replaces the list.
    if items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *cur = items
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .map(strip_directives)
            .collect();
        return Ok(());
    }
    for item in items {
        let Some(kv) = item.get(key) else {
            return Err(ApiError::bad_request(format!(
                "map: {item} does not contain declared merge key: {key}"
            )));
        };
        let pos = cur.iter().position(|c| c.get(key) == Some(kv));
        if item.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(i) = pos {
                cur.remove(i);
            }
            continue;
        }
        match pos {
            Some(i) => strategic_merge(&mut cur[i], item)?,
            None => cur.push(strip_directives(item)),
        }
    }
    Ok(())
}

/// One owned field: a path of `f:<field>` and `k:<merge key json>` steps, as in FieldsV1.
type FieldPath = Vec<String>;

/// The leaf paths an applied configuration sets.
fn config_paths(v: &Value, prefix: &mut FieldPath, out: &mut BTreeSet<FieldPath>, field: &str) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, c) in m {
                prefix.push(format!("f:{k}"));
                config_paths(c, prefix, out, k);
                prefix.pop();
            }
        }
        Value::Array(items) if merge_key(field).is_some_and(|k| !k.is_empty()) => {
            let key = merge_key(field).expect("checked");
            for item in items {
                match item.get(key) {
                    Some(kv) => {
                        prefix.push(format!("k:{}", json!({ key: kv })));
                        // The element itself is owned, and each field set inside it.
                        out.insert(prefix.clone());
                        if let Some(m) = item.as_object() {
                            for (k, c) in m.iter().filter(|(k, _)| *k != key) {
                                prefix.push(format!("f:{k}"));
                                config_paths(c, prefix, out, k);
                                prefix.pop();
                            }
                        }
                        prefix.pop();
                    }
                    None => {
                        out.insert(prefix.clone());
                    }
                }
            }
        }
        _ => {
            out.insert(prefix.clone());
        }
    }
}

/// FieldsV1 JSON from a set of paths.
fn fields_v1(paths: &BTreeSet<FieldPath>) -> Value {
    let mut root = json!({});
    for p in paths {
        let mut cur = &mut root;
        for step in p {
            cur = cur
                .as_object_mut()
                .expect("object")
                .entry(step.clone())
                .or_insert_with(|| json!({}));
        }
        if p.last().is_some_and(|s| s.starts_with("k:")) {
            cur.as_object_mut()
                .expect("object")
                .insert(".".into(), json!({}));
        }
    }
    root
}

/// Paths back out of FieldsV1 (leaves, and list elements marked with ".").
fn parse_fields_v1(v: &Value, prefix: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
    let Some(m) = v.as_object() else { return };
    let children: Vec<_> = m.iter().filter(|(k, _)| k.as_str() != ".").collect();
    if (m.contains_key(".") || children.is_empty()) && !prefix.is_empty() {
        out.insert(prefix.clone());
    }
    for (k, c) in children {
        prefix.push(k.clone());
        parse_fields_v1(c, prefix, out);
        prefix.pop();
    }
}

/// The value at a field path, if present.
fn lookup<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for step in path {
        cur = if let Some(f) = step.strip_prefix("f:") {
            cur.get(f)?
        } else if let Some(k) = step.strip_prefix("k:") {
            let kv: Map<String, Value> = serde_json::from_str(k).ok()?;
            cur.as_array()?
                .iter()
                .find(|e| kv.iter().all(|(k, v)| e.get(k) == Some(v)))?
        } else {
            return None;
        };
    }
    Some(cur)
}

/// Removes the value at a field path (a field, or a list element by key).
fn remove_path(obj: &mut Value, path: &[String]) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for step in parent {
        let next = if let Some(f) = step.strip_prefix("f:") {
            cur.get_mut(f)
        } else if let Some(k) = step.strip_prefix("k:") {
            let Ok(kv) = serde_json::from_str::<Map<String, Value>>(k) else {
                return;
            };
            cur.as_array_mut().and_then(|a| {
                a.iter_mut()
                    .find(|e| kv.iter().all(|(k, v)| e.get(k) == Some(v)))
            })
        } else {
            None
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(k) = last.strip_prefix("k:")
        && let Ok(kv) = serde_json::from_str::<Map<String, Value>>(k)
        && let Some(a) = cur.as_array_mut()
    {
        a.retain(|e| !kv.iter().all(|(k, v)| e.get(k) == Some(v)));
    }
}

/// Merge for apply: like strategic merge without directives (an applied configuration is a
/// partial object).
fn apply_merge(target: &mut Value, cfg: &Value) {
    let _ = strategic_merge(target, &strip_directives(cfg));
}

/// Who applies, and how.
#[derive(Clone, Copy, Debug)]
pub struct Applier<'a> {
    /// The field manager (`?fieldManager=`).
    pub manager: &'a str,
    /// `?force=true`: take over conflicting fields.
    pub force: bool,
    /// "" for the main resource, "status" for `/status`.
    pub subresource: &'a str,
    /// The time recorded in the managedFields entry.
    pub now: &'a str,
}

/// Server-side apply of `cfg` by `manager` onto `current` (None: the object does not exist).
/// `subresource` is "status" for `/status` applies. Returns the new object.
pub fn server_side_apply(
    rt: &ResourceType,
    name: &str,
    current: Option<&Value>,
    cfg: &Value,
    by: &Applier<'_>,
) -> Result<Value, ApiError> {
    check_identity(rt, cfg)?;
    let owned_cfg = owned_config(cfg);
    let mut new_paths = BTreeSet::new();
    config_paths(&owned_cfg, &mut vec![], &mut new_paths, "");

    let mut obj = current
        .cloned()
        .unwrap_or_else(|| json!({"metadata": {"name": name}}));
    let mut entries: Vec<Value> = obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let is_mine = |e: &Value| by.owns_entry(e);
    if !by.force {
        refuse_conflicts(rt, name, &obj, &owned_cfg, &new_paths, &entries, by)?;
    }
    // Fields this manager applied before and no longer applies go away, unless another
    // manager also owns them.
    let previous = entries
        .iter()
        .find(|e| is_mine(e))
        .map(owned_by)
        .unwrap_or_default();
    let others: BTreeSet<FieldPath> = entries
        .iter()
        .filter(|e| !is_mine(e))
        .flat_map(owned_by)
        .collect();
    for p in previous.difference(&new_paths) {
        if !others.contains(p) {
            remove_path(&mut obj, p);
        }
    }
    apply_merge(&mut obj, &owned_cfg);
    // With force, the fields move to this manager.
    if by.force {
        for e in entries.iter_mut().filter(|e| !is_mine(e)) {
            let left: BTreeSet<_> = owned_by(e).difference(&new_paths).cloned().collect();
            e["fieldsV1"] = fields_v1(&left);
        }
    }
    entries.retain(|e| !is_mine(e));
    let mut mine = json!({
        "manager": by.manager,
        "operation": "Apply",
        "apiVersion": rt.api_version(),
        "time": by.now,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields_v1(&new_paths),
    });
    if !by.subresource.is_empty() {
        mine["subresource"] = json!(by.subresource);
    }
    entries.push(mine);
    obj["metadata"]["managedFields"] = Value::Array(entries);
    obj["apiVersion"] = json!(rt.api_version());
    obj["kind"] = json!(rt.kind);
    Ok(obj)
}

impl Applier<'_> {
    /// Whether a managedFields entry is this applier's own (its manager, an Apply, on its
    /// subresource).
    fn owns_entry(&self, e: &Value) -> bool {
        e.get("manager").and_then(Value::as_str) == Some(self.manager)
            && e.get("operation").and_then(Value::as_str) == Some("Apply")
            && e.get("subresource").and_then(Value::as_str).unwrap_or("") == self.subresource
    }
}

/// The field paths a managedFields entry owns.
fn owned_by(e: &Value) -> BTreeSet<FieldPath> {
    let mut s = BTreeSet::new();
    if let Some(f) = e.get("fieldsV1") {
        parse_fields_v1(f, &mut vec![], &mut s);
    }
    s
}

/// An applied configuration is an object of the resource's own apiVersion and kind.
fn check_identity(rt: &ResourceType, cfg: &Value) -> Result<(), ApiError> {
    if !cfg.is_object() {
        return Err(ApiError::bad_request(
            "apply: the applied configuration must be an object",
        ));
    }
    for (field, want) in [("apiVersion", rt.api_version()), ("kind", rt.kind.clone())] {
        match cfg.get(field).and_then(Value::as_str) {
            Some(v) if v == want => {}
            Some(v) => {
                return Err(ApiError::bad_request(format!(
                    "apply: {field} {v:?} does not match the resource ({want:?})"
                )));
            }
            None => {
                return Err(ApiError::bad_request(format!(
                    "apply: {field} must be set in the applied configuration"
                )));
            }
        }
    }
    Ok(())
}

/// The configuration whose fields the applier comes to own: ownership is tracked for what
/// the configuration sets, not for identity fields.
fn owned_config(cfg: &Value) -> Value {
    let mut owned_cfg = cfg.clone();
    if let Some(m) = owned_cfg.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
        if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in [
                "name",
                "namespace",
                "resourceVersion",
                "uid",
                "managedFields",
            ] {
                meta.remove(k);
            }
            if meta.is_empty() {
                m.remove("metadata");
            }
        }
    }
    owned_cfg
}

/// Without force, a 409 naming every field another manager owns that this apply sets to a
/// different value.
fn refuse_conflicts(
    rt: &ResourceType,
    name: &str,
    obj: &Value,
    owned_cfg: &Value,
    new_paths: &BTreeSet<FieldPath>,
    entries: &[Value],
    by: &Applier<'_>,
) -> Result<(), ApiError> {
    let mut conflicts = Vec::new();
    for e in entries.iter().filter(|e| !by.owns_entry(e)) {
        let theirs = owned_by(e);
        for p in new_paths.intersection(&theirs) {
            if lookup(obj, p) != lookup(owned_cfg, p) {
                conflicts.push(format!(
                    "conflict with \"{}\": .{}",
                    e.get("manager").and_then(Value::as_str).unwrap_or(""),
                    p.iter()
                        .map(|s| s.trim_start_matches("f:").to_string())
                        .collect::<Vec<_>>()
                        .join(".")
                ));
            }
        }
    }
    if conflicts.is_empty() {
        return Ok(());
    }
    let n = conflicts.len();
    let mut err = ApiError::new(
        409,
        "Conflict",
        format!(
            "Apply failed with {n} conflict{}: {}",
            if n == 1 { "" } else { "s" },
            conflicts.join(", ")
        ),
    );
    err.details = Some(json!({"name": name, "group": rt.group, "kind": rt.plural}));
    Err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_patch_deletes_with_null() {
        let mut t = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        merge(&mut t, &json!({"a": {"b": null, "d": 3}, "l": [3]}));
        assert_eq!(t, json!({"a": {"c": 2, "d": 3}, "l": [3]}));
    }

    #[test]
    fn json_patch_ops() {
        let mut t = json!({"spec": {"unschedulable": false}});
        json_patch(
            &mut t,
            &json!([{"op": "replace", "path": "/spec/unschedulable", "value": true},
                    {"op": "test", "path": "/spec/unschedulable", "value": true}]),
        )
        .unwrap();
        assert_eq!(t["spec"]["unschedulable"], true);
        let e = json_patch(
            &mut t,
            &json!([{"op": "test", "path": "/spec/unschedulable", "value": false}]),
        )
        .unwrap_err();
        assert_eq!(e.code, 422);
    }

    #[test]
    fn strategic_merge_lists_by_key_and_directives() {
        let mut t = json!({
            "metadata": {"labels": {"a": "1"}, "finalizers": ["x"]},
            "spec": {"taints": [{"key": "k1", "effect": "NoSchedule"}],
                     "containers": [{"name": "c", "image": "v1"}, {"name": "d", "image": "v1"}],
                     "tolerations": [{"key": "t"}]}
        });
        strategic_merge(
            &mut t,
            &json!({
                "metadata": {"labels": {"b": "2", "a": null}, "finalizers": ["y"]},
                "spec": {"$setElementOrder/containers": [{"name": "c"}],
                         "taints": [{"key": "k2", "effect": "NoExecute"}],
                         "containers": [{"name": "c", "image": "v2"}, {"name": "d", "$patch": "delete"}],
                         "tolerations": [{"key": "u"}]}
            }),
        )
        .unwrap();
        assert_eq!(t["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(t["metadata"]["finalizers"], json!(["x", "y"]));
        assert_eq!(t["spec"]["taints"].as_array().unwrap().len(), 2);
        assert_eq!(
            t["spec"]["containers"],
            json!([{"name": "c", "image": "v2"}])
        );
        assert_eq!(
            t["spec"]["tolerations"],
            json!([{"key": "u"}]),
            "no strategy: replace"
        );
        strategic_merge(
            &mut t,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}),
        )
        .unwrap();
        assert_eq!(t["metadata"]["finalizers"], json!(["y"]));
    }

    fn by(manager: &str, force: bool) -> Applier<'_> {
        Applier {
            manager,
            force,
            subresource: "",
            now: "t",
        }
    }

    #[test]
    fn apply_owns_fields_conflicts_and_prunes() {
        let rt = ResourceType::deployments();
        let cfg1 = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                          "metadata": {"name": "d", "labels": {"a": "1", "b": "2"}},
                          "spec": {"replicas": 3}});
        let o1 = server_side_apply(&rt, "d", None, &cfg1, &by("alice", false)).unwrap();
        assert_eq!(o1["spec"]["replicas"], 3);
        let mf = &o1["metadata"]["managedFields"][0];
        assert_eq!(mf["manager"], "alice");
        assert_eq!(mf["fieldsV1"]["f:spec"]["f:replicas"], json!({}));
        // Bob changing replicas conflicts; with force he takes it over.
        let cfg2 = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                          "spec": {"replicas": 5}});
        let e = server_side_apply(&rt, "d", Some(&o1), &cfg2, &by("bob", false)).unwrap_err();
        assert_eq!(e.code, 409);
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"alice\": .spec.replicas"
        );
        let o2 = server_side_apply(&rt, "d", Some(&o1), &cfg2, &by("bob", true)).unwrap();
        assert_eq!(o2["spec"]["replicas"], 5);
        // Setting the same value is shared ownership, not a conflict.
        let same = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"a": "1"}}});
        server_side_apply(&rt, "d", Some(&o2), &same, &by("carol", false)).unwrap();
        // Alice stops applying label b and replicas: b goes, replicas (now Bob's) stays.
        let cfg3 = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                          "metadata": {"name": "d", "labels": {"a": "1"}}});
        let o3 = server_side_apply(&rt, "d", Some(&o2), &cfg3, &by("alice", false)).unwrap();
        assert_eq!(o3["metadata"]["labels"], json!({"a": "1"}));
        assert_eq!(o3["spec"]["replicas"], 5);
        let bad = json!({"apiVersion": "v1", "kind": "Deployment"});
        assert_eq!(
            server_side_apply(&rt, "d", None, &bad, &by("x", false))
                .unwrap_err()
                .code,
            400
        );
    }
}
