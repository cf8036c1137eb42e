//! Label and field selectors as the Kubernetes API server understands them: the string forms
//! of `?labelSelector=` and `?fieldSelector=`, and the `LabelSelector` object of PDBs and
//! workloads (`matchLabels` / `matchExpressions`).

use serde_json::Value;

/// An object's `metadata.labels` as owned pairs, for indexes that keep labels outside the
/// JSON (the store, the disruption controller); non-string values read as "".
pub fn label_pairs(obj: &Value) -> impl Iterator<Item = (Box<str>, Box<str>)> + '_ {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str().into(), v.as_str().unwrap_or("").into()))
}

/// The value of label `k` among such pairs.
pub fn label_in<'a>(pairs: &'a [(Box<str>, Box<str>)], k: &str) -> Option<&'a str> {
    pairs.iter().find(|(lk, _)| &**lk == k).map(|(_, v)| &**v)
}

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector: all requirements must hold. `nothing` is the null selector of a
/// `LabelSelector` object, which matches no object (unlike the empty one, which matches all).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    pub reqs: Vec<LabelReq>,
    pub nothing: bool,
}

impl LabelSelector {
    /// Parses the string form, e.g. `app=web,tier!=db,env in (a,b),!legacy`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in split_top_level(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            reqs.push(parse_label_req(part)?);
        }
        Ok(LabelSelector {
            reqs,
            nothing: false,
        })
    }

    /// Builds a selector from a `metav1.LabelSelector` JSON value. `None`/`null` matches nothing.
    pub fn from_object(v: Option<&Value>) -> Result<Self, String> {
        let Some(v) = v.filter(|v| !v.is_null()) else {
            return Ok(LabelSelector {
                reqs: vec![],
                nothing: true,
            });
        };
        let mut reqs = Vec::new();
        if let Some(m) = v.get("matchLabels").and_then(Value::as_object) {
            for (k, val) in m {
                reqs.push(LabelReq::Eq(
                    k.clone(),
                    val.as_str().unwrap_or_default().to_string(),
                ));
            }
        }
        if let Some(exprs) = v.get("matchExpressions").and_then(Value::as_array) {
            for e in exprs {
                let key = e
                    .get("key")
                    .and_then(Value::as_str)
                    .ok_or("matchExpressions[].key is required")?
                    .to_string();
                let values: Vec<String> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
                reqs.push(match op {
                    "In" => LabelReq::In(key, values),
                    "NotIn" => LabelReq::NotIn(key, values),
                    "Exists" => LabelReq::Exists(key),
                    "DoesNotExist" => LabelReq::DoesNotExist(key),
                    other => return Err(format!("{other:?} is not a valid selector operator")),
                });
            }
        }
        Ok(LabelSelector {
            reqs,
            nothing: false,
        })
    }

    pub fn is_everything(&self) -> bool {
        !self.nothing && self.reqs.is_empty()
    }

    /// Does an object (its `metadata.labels`) satisfy the selector?
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
        self.matches_with(|k| labels.and_then(|l| l.get(k)).and_then(Value::as_str))
    }

    /// Matches against labels given by a lookup (the store keeps labels outside the JSON).
    pub fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        if self.nothing {
            return false;
        }
        self.reqs.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::DoesNotExist(k) => get(k).is_none(),
        })
    }
}

/// Splits on commas that are not inside parentheses (`env in (a,b)` stays whole).
fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_label_req(part: &str) -> Result<LabelReq, String> {
    if let Some(k) = part.strip_prefix('!') {
        return Ok(LabelReq::DoesNotExist(valid_key(k.trim())?));
    }
    if let Some((k, v)) = part.split_once("!=") {
        return Ok(LabelReq::NotEq(valid_key(k.trim())?, v.trim().to_string()));
    }
    if let Some((k, v)) = part.split_once("==") {
        return Ok(LabelReq::Eq(valid_key(k.trim())?, v.trim().to_string()));
    }
    if let Some((k, v)) = part.split_once('=') {
        return Ok(LabelReq::Eq(valid_key(k.trim())?, v.trim().to_string()));
    }
    // Set-based: `key in (a,b)` / `key notin (a,b)`.
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let key = valid_key(words[0])?;
        let rest = words[1].trim();
        let (op, list) = if let Some(l) = rest.strip_prefix("notin") {
            ("notin", l)
        } else if let Some(l) = rest.strip_prefix("in") {
            ("in", l)
        } else {
            return Err(format!("unable to parse requirement: {part:?}"));
        };
        let list = list.trim();
        let inner = list
            .strip_prefix('(')
            .and_then(|l| l.strip_suffix(')'))
            .ok_or_else(|| format!("unable to parse requirement: {part:?}: expected (values)"))?;
        let values = inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        return Ok(if op == "in" {
            LabelReq::In(key, values)
        } else {
            LabelReq::NotIn(key, values)
        });
    }
    Ok(LabelReq::Exists(valid_key(part)?))
}

fn valid_key(k: &str) -> Result<String, String> {
    let ok = !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(k.to_string())
    } else {
        Err(format!(
            "unable to parse requirement: invalid label key {k:?}"
        ))
    }
}

/// A parsed field selector: `spec.nodeName=n1,status.phase!=Succeeded`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// (dotted path, must equal?, value)
    pub reqs: Vec<(String, bool, String)>,
}

impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                ));
            };
            reqs.push((k.trim().to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector { reqs })
    }

    /// The value an equality requirement pins `path` to, if any (used to hit an index).
    pub fn equals(&self, path: &str) -> Option<&str> {
        self.reqs
            .iter()
            .find(|(p, eq, _)| *eq && p == path)
            .map(|(_, _, v)| v.as_str())
    }

    /// Missing fields compare as the empty string, as in Kubernetes (`spec.nodeName=` selects
    /// unscheduled pods).
    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs.iter().all(|(path, eq, want)| {
            let mut cur = Some(obj);
            for seg in path.split('.') {
                cur = cur.and_then(|c| c.get(seg));
            }
            let got = match cur {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(other) => other.to_string(),
            };
            (got == *want) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"labels": labels}, "spec": {"nodeName": "n1"}})
    }

    #[test]
    fn string_selectors() {
        let o = obj(json!({"app": "web", "env": "prod"}));
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(&o);
        assert!(m(""));
        assert!(m("app=web"));
        assert!(m("app==web,env"));
        assert!(!m("app!=web"));
        assert!(m("env in (prod, dev)"));
        assert!(!m("env notin (prod,dev)"));
        assert!(m("!legacy"));
        assert!(!m("!app"));
        assert!(m("tier notin (db)"));
        assert!(LabelSelector::parse("a in b").is_err());
        assert!(LabelSelector::parse("a b=c").is_err());
    }

    #[test]
    fn object_selectors() {
        let o = obj(json!({"app": "web"}));
        let sel = |v: Value| LabelSelector::from_object(Some(&v)).unwrap();
        assert!(
            sel(json!({})).matches(&o),
            "empty selector matches everything"
        );
        assert!(
            !LabelSelector::from_object(None).unwrap().matches(&o),
            "null matches nothing"
        );
        assert!(sel(json!({"matchLabels": {"app": "web"}})).matches(&o));
        assert!(
            !sel(json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}))
                .matches(&o)
        );
        assert!(
            LabelSelector::from_object(Some(
                &json!({"matchExpressions": [{"key": "a", "operator": "Is"}]})
            ))
            .is_err()
        );
    }

    #[test]
    fn field_selectors() {
        let o = obj(json!({}));
        let f = |s: &str| FieldSelector::parse(s).unwrap();
        assert!(f("spec.nodeName=n1").matches(&o));
        assert!(!f("spec.nodeName!=n1").matches(&o));
        assert!(f("status.phase!=Failed").matches(&o));
        assert!(f("status.phase=").matches(&o));
        assert_eq!(f("spec.nodeName==n1").equals("spec.nodeName"), Some("n1"));
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
