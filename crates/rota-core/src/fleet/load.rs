//! From source files to typed documents: UTF-8 and YAML checks, the envelope (`apiVersion`,
//! `kind`), the JSON Schema of the kind, then the typed model. Each document keeps its
//! [`Origin`] so that semantic checks can still point at lines.

use serde::de::DeserializeOwned;

use super::diagnostics::{Diagnostic, Diagnostics, Location, did_you_mean};
use super::model::{API_VERSION, Cluster, FleetManifest, HealthGate, KINDS, Manifest};
use super::schema;
use super::source_file::SourceFile;
use super::yaml::{self, Positions, pointer_to_path};

/// Where a document came from.
#[derive(Clone, Debug)]
pub struct Origin {
    pub file: String,
    pub positions: Positions,
}

impl Origin {
    /// The location of the value at `pointer` (or of its nearest written ancestor).
    pub fn at(&self, pointer: &str) -> Location {
        let p = self.positions.value(pointer);
        Location {
            file: self.file.clone(),
            line: p.line,
            column: p.column,
        }
    }

    /// The location of the key of the member at `pointer`.
    pub fn key_at(&self, pointer: &str) -> Location {
        let p = self.positions.key(pointer);
        Location {
            file: self.file.clone(),
            line: p.line,
            column: p.column,
        }
    }

    /// A diagnostic about the value at `pointer`.
    pub fn error(&self, pointer: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(&self.at(pointer), pointer_to_path(pointer), message)
    }

    /// A diagnostic about the key of the member at `pointer`.
    pub fn key_error(&self, pointer: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(&self.key_at(pointer), pointer_to_path(pointer), message)
    }

    /// `file:line` of a pointer, for hints that refer to another place.
    pub fn describe(&self, pointer: &str) -> String {
        let l = self.at(pointer);
        format!("{}:{}", l.file, l.line)
    }
}

/// The typed documents of a repo, before semantic validation.
#[derive(Default)]
pub struct Documents {
    pub fleets: Vec<(Origin, FleetManifest)>,
    pub clusters: Vec<(Origin, Cluster)>,
    pub gates: Vec<(Origin, HealthGate)>,
    /// `(kind, name)` of documents that were rejected but whose name could be read: references
    /// to them are not reported again as "not declared" (one mistake, one error).
    pub rejected: std::collections::BTreeSet<(String, String)>,
}

/// Parse and type every document of `files`, collecting every problem.
pub fn documents(files: &[SourceFile], diags: &mut Diagnostics) -> Documents {
    // Files are independent until the semantic checks: a fleet of 10,000 cluster files is
    // parsed on every core, in chunks whose results are joined in file order, so the
    // outcome is the one a single pass gives.
    let parts = crate::parallel::in_chunks(files, |part| {
        let mut out = Documents::default();
        let mut diags = Diagnostics::new();
        for f in part {
            read_file(f, &mut out, &mut diags);
        }
        (out, diags)
    });
    let mut out = Documents::default();
    for (d, more) in parts {
        out.fleets.extend(d.fleets);
        out.clusters.extend(d.clusters);
        out.gates.extend(d.gates);
        out.rejected.extend(d.rejected);
        diags.extend(more);
    }
    out
}

fn read_file(f: &SourceFile, out: &mut Documents, diags: &mut Diagnostics) {
    let text = match std::str::from_utf8(&f.bytes) {
        Ok(t) => t,
        Err(e) => {
            let before = &f.bytes[..e.valid_up_to()];
            let line = before.iter().filter(|b| **b == b'\n').count() as u32 + 1;
            let column = (before.len()
                - before
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |i| i + 1)) as u32
                + 1;
            diags.push(Diagnostic::new(
                &Location {
                    file: f.path.clone(),
                    line,
                    column,
                },
                "",
                "file is not valid UTF-8",
            ));
            return;
        }
    };
    let docs = match yaml::parse(&f.path, text) {
        Ok(d) => d,
        Err(d) => {
            diags.push(d);
            return;
        }
    };
    for doc in docs {
        let yaml::Document {
            value, positions, ..
        } = doc;
        let origin = Origin {
            file: f.path.clone(),
            positions,
        };
        let Some(obj) = value.as_object() else {
            diags.push(origin.error(
                "",
                "a document must be a mapping with apiVersion, kind, metadata and spec",
            ));
            continue;
        };
        match obj.get("apiVersion") {
            Some(v) if v.as_str() == Some(API_VERSION) => {}
            Some(v) => {
                diags.push(
                    origin
                        .error("/apiVersion", format!("unsupported apiVersion {v}: expected {API_VERSION}"))
                        .with_hint("rota refuses documents it does not understand so that none is silently skipped"),
                );
                continue;
            }
            None => {
                diags
                    .push(origin.error("", format!("missing apiVersion (expected {API_VERSION})")));
                continue;
            }
        }
        let kind = match obj.get("kind").and_then(|k| k.as_str()) {
            Some(k) if KINDS.contains(&k) => k.to_string(),
            Some(k) => {
                let mut d = origin.error(
                    "/kind",
                    format!("unknown kind {k:?}: expected one of {}", KINDS.join(", ")),
                );
                if let Some(s) = did_you_mean(k, KINDS) {
                    d = d.with_hint(format!("did you mean `{s}`?"));
                }
                diags.push(d);
                continue;
            }
            None => {
                diags.push(origin.error("", "missing kind (Fleet, Cluster or HealthGate)"));
                continue;
            }
        };
        let name = value
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .map(|n| (kind.clone(), n.to_string()));
        let errors = schema::validate(&f.path, &kind, &value, &origin.positions);
        if !errors.is_empty() {
            diags.0.extend(errors);
            out.rejected.extend(name);
            continue;
        }
        let ok = match kind.as_str() {
            "Fleet" => typed(origin, value, diags).map(|d| out.fleets.push(d)),
            "Cluster" => typed(origin, value, diags).map(|d| out.clusters.push(d)),
            _ => typed(origin, value, diags).map(|d| out.gates.push(d)),
        };
        if ok.is_none() {
            out.rejected.extend(name);
        }
    }
}

/// Deserialize a schema-valid document into the typed model. A failure here means schema
/// and model disagree, or a value passed the schema's shape but not a finer rule (a duration
/// longer than a year); it is reported on the document.
fn typed<S: DeserializeOwned>(
    origin: Origin,
    value: serde_json::Value,
    diags: &mut Diagnostics,
) -> Option<(Origin, Manifest<S>)> {
    use serde::Deserialize as _;
    match Manifest::<S>::deserialize(&value) {
        Ok(m) => Some((origin, m)),
        Err(e) => {
            // serde_json errors carry no path; the message quotes the bad value, so point at
            // the first string equal to it.
            let msg = e.to_string();
            let quoted = msg.split('"').nth(1).unwrap_or_default();
            let pointer = find_string(&value, quoted, String::new()).unwrap_or_default();
            diags.push(origin.error(&pointer, msg));
            None
        }
    }
}

fn find_string(v: &serde_json::Value, needle: &str, here: String) -> Option<String> {
    match v {
        serde_json::Value::String(s) if !needle.is_empty() && s == needle => Some(here),
        serde_json::Value::Object(m) => m
            .iter()
            .find_map(|(k, v)| find_string(v, needle, format!("{here}/{}", yaml::escape_token(k)))),
        serde_json::Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, v)| find_string(v, needle, format!("{here}/{i}"))),
        _ => None,
    }
}
