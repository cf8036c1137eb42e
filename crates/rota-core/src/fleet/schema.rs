//! The JSON Schemas of the fleet repo (`schemas/*.schema.json`, draft 2020-12), embedded in the
//! binary and enforced with the jsonschema crate; schema errors are turned into diagnostics
//! that point at the offending key or value.
//!
//! The same files serve editors (yaml-language-server modeline, see `docs/fleet-repo.md`), so
//! what an editor underlines and what `rota validate` reports agree.

use std::sync::OnceLock;

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

use super::diagnostics::{Diagnostic, Location, did_you_mean};
use super::yaml::{Positions, escape_token, pointer_to_path};

pub const FLEET_SCHEMA: &str = include_str!("../../../../schemas/fleet.schema.json");
pub const CLUSTER_SCHEMA: &str = include_str!("../../../../schemas/cluster.schema.json");
pub const HEALTHGATE_SCHEMA: &str = include_str!("../../../../schemas/healthgate.schema.json");

struct Compiled {
    schema: Value,
    validator: jsonschema::Validator,
}

fn compile(text: &str) -> Compiled {
    let schema: Value = serde_json::from_str(text).expect("embedded schema is valid JSON");
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&schema)
        .expect("embedded schema compiles");
    Compiled { schema, validator }
}

fn compiled(kind: &str) -> Option<&'static Compiled> {
    static FLEET: OnceLock<Compiled> = OnceLock::new();
    static CLUSTER: OnceLock<Compiled> = OnceLock::new();
    static GATE: OnceLock<Compiled> = OnceLock::new();
    match kind {
        "Fleet" => Some(FLEET.get_or_init(|| compile(FLEET_SCHEMA))),
        "Cluster" => Some(CLUSTER.get_or_init(|| compile(CLUSTER_SCHEMA))),
        "HealthGate" => Some(GATE.get_or_init(|| compile(HEALTHGATE_SCHEMA))),
        _ => None,
    }
}

/// Validate one document of a known kind; every violation becomes a diagnostic.
pub fn validate(file: &str, kind: &str, value: &Value, positions: &Positions) -> Vec<Diagnostic> {
    let Some(c) = compiled(kind) else {
        return Vec::new();
    };
    // The boolean check is much cheaper than collecting errors, and nearly every document
    // of a real repo is valid.
    if c.validator.is_valid(value) {
        return Vec::new();
    }
    let site = Site { file, positions };
    let mut out = Vec::new();
    for err in c.validator.iter_errors(value) {
        diagnose(c, &site, &err, &mut out);
    }
    out
}

/// Where a document's errors point: its file and the positions of its keys and values.
struct Site<'a> {
    file: &'a str,
    positions: &'a Positions,
}

impl Site<'_> {
    /// The location of the key (`key`) or the value at a JSON pointer.
    fn at(&self, pointer: &str, key: bool) -> Location {
        let pos = if key {
            self.positions.key(pointer)
        } else {
            self.positions.value(pointer)
        };
        Location {
            file: self.file.to_string(),
            line: pos.line,
            column: pos.column,
        }
    }
}

/// One schema violation as the diagnostics a person reads: the field, what was expected (the
/// schema node's description where it has one) and what was found.
fn diagnose(
    c: &Compiled,
    site: &Site<'_>,
    err: &jsonschema::ValidationError<'_>,
    out: &mut Vec<Diagnostic>,
) {
    let instance_path = err.instance_path().to_string();
    let schema_path = err.schema_path().to_string();
    // The schema node holding the failed keyword: its description says what is expected.
    let parent = schema_path
        .rfind('/')
        .map(|i| &schema_path[..i])
        .unwrap_or("");
    let node = resolve(&c.schema, parent);
    let path = pointer_to_path(&instance_path);
    let here = site.at(&instance_path, false);
    match err.kind() {
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            unknown_fields(site, node, &instance_path, unexpected, out)
        }
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            out.push(Diagnostic::new(
                &here,
                path,
                format!("missing required field `{name}`"),
            ));
        }
        ValidationErrorKind::Constant { expected_value } => {
            out.push(Diagnostic::new(
                &here,
                path,
                format!(
                    "expected {expected_value}, got {}",
                    short(err.instance().as_ref())
                ),
            ));
        }
        ValidationErrorKind::PropertyNames { error } => {
            out.push(bad_key_name(c, site, node, &instance_path, error))
        }
        ValidationErrorKind::UniqueItems => {
            let items = err.instance().as_array().cloned().unwrap_or_default();
            let mut seen = Vec::new();
            let mut dups = Vec::new();
            for i in &items {
                if seen.contains(&i) && !dups.contains(&i) {
                    dups.push(i);
                }
                seen.push(i);
            }
            let dups: Vec<String> = dups.iter().map(|d| short(d)).collect();
            out.push(Diagnostic::new(
                &here,
                path,
                format!("listed more than once: {}", dups.join(", ")),
            ));
        }
        ValidationErrorKind::MinItems { limit } => {
            out.push(Diagnostic::new(
                &here,
                path,
                format!(
                    "needs at least {limit} item{}",
                    if *limit == 1 { "" } else { "s" }
                ),
            ));
        }
        kind => {
            let got = short(err.instance().as_ref());
            let message = match node.and_then(|n| description(&c.schema, n)) {
                Some(expected) => format!("expected {expected}, got {got}"),
                None => match kind {
                    ValidationErrorKind::Type { kind } => {
                        format!("expected {}, got {got}", type_name(kind))
                    }
                    _ => truncate(&err.to_string()),
                },
            };
            out.push(Diagnostic::new(&here, path, message));
        }
    }
}

/// Fields the schema does not know, each at its key, with the nearest known name or the list.
fn unknown_fields(
    site: &Site<'_>,
    node: Option<&Value>,
    instance_path: &str,
    unexpected: &[String],
    out: &mut Vec<Diagnostic>,
) {
    let known: Vec<&str> = node
        .and_then(|n| n.get("properties"))
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    for name in unexpected {
        let member = format!("{instance_path}/{}", escape_token(name));
        let d = Diagnostic::new(
            &site.at(&member, true),
            pointer_to_path(&member),
            format!("unknown field `{name}`"),
        );
        out.push(match did_you_mean(name, known.iter().copied()) {
            Some(s) => d.with_hint(format!("did you mean `{s}`?")),
            None if !known.is_empty() => {
                d.with_hint(format!("expected one of: {}", known.join(", ")))
            }
            None => d,
        });
    }
}

/// A map key (channel, version, label) that breaks its naming rule: pointed at the key itself,
/// with the rule's description.
fn bad_key_name(
    c: &Compiled,
    site: &Site<'_>,
    node: Option<&Value>,
    instance_path: &str,
    error: &jsonschema::ValidationError<'_>,
) -> Diagnostic {
    let name = error.instance().as_str().unwrap_or_default().to_string();
    let member = format!("{instance_path}/{}", escape_token(&name));
    let inner = error.schema_path().to_string();
    let inner_parent = inner.rfind('/').map(|i| &inner[..i]).unwrap_or("");
    let expected = node
        .and_then(|n| n.get("propertyNames"))
        .and_then(|p| description(&c.schema, p))
        .or_else(|| node.and_then(|n| description(&c.schema, n)))
        .or_else(|| resolve(&c.schema, inner_parent).and_then(|n| description(&c.schema, n)))
        .unwrap_or_else(|| error.to_string());
    Diagnostic::new(
        &site.at(&member, true),
        pointer_to_path(&member),
        format!("invalid name {name:?}: expected {expected}"),
    )
}

fn type_name(kind: &jsonschema::error::TypeKind) -> String {
    match kind {
        jsonschema::error::TypeKind::Single(t) => format!("{t:?}").to_lowercase(),
        jsonschema::error::TypeKind::Multiple(ts) => {
            let names: Vec<String> = ts
                .into_iter()
                .map(|t| format!("{t:?}").to_lowercase())
                .collect();
            names.join(" or ")
        }
    }
}

/// The description of a schema node, following one `$ref` (descriptions live on `$defs`).
fn description(root: &Value, node: &Value) -> Option<String> {
    if let Some(d) = node.get("description").and_then(Value::as_str) {
        return Some(d.to_string());
    }
    let r = node.get("$ref")?.as_str()?.strip_prefix('#')?;
    resolve(root, r)?
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn resolve<'a>(root: &'a Value, pointer: &str) -> Option<&'a Value> {
    root.pointer(pointer)
}

/// A value as it appears in a message: short, one line.
fn short(v: &Value) -> String {
    let s = match v {
        Value::Object(m) if m.is_empty() => "an empty mapping".to_string(),
        Value::Object(m) => {
            let keys: Vec<&str> = m.keys().map(String::as_str).collect();
            format!("a mapping of {}", keys.join(", "))
        }
        Value::Array(a) if a.is_empty() => "an empty list".to_string(),
        Value::Array(a) => format!("a list of {}", a.len()),
        Value::Null => "nothing (null)".to_string(),
        other => other.to_string(),
    };
    truncate(&s)
}

fn truncate(s: &str) -> String {
    const MAX: usize = 160;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
