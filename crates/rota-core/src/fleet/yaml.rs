//! A strict, span-aware YAML reader: YAML text to `serde_json::Value` documents plus a map from
//! JSON pointer to source position, so that every later error can name its line and column.
//!
//! It reads the YAML 1.2 core schema and refuses what a fleet repo never needs but an attacker
//! or a careless merge could bring: aliases (the "billion laughs" bomb; anchors alone are
//! harmless and allowed), tags, non-scalar or duplicate mapping keys, nesting deeper than
//! [`MAX_DEPTH`]. Size and UTF-8 are checked by the caller before the text gets here. The
//! parser is event-based (saphyr-parser), so memory stays proportional to the input.

use std::collections::HashMap;

use saphyr_parser::{Event, Marker, Parser, ScalarStyle};
use serde_json::{Map, Number, Value};

use super::diagnostics::{Diagnostic, Location};

/// Deepest nesting of mappings and sequences accepted; the real format needs about 8.
pub const MAX_DEPTH: usize = 32;

/// Line and column (both 1-based) of a node or a key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pos {
    pub line: u32,
    pub column: u32,
}

impl From<&Marker> for Pos {
    fn from(m: &Marker) -> Self {
        Pos {
            line: m.line() as u32,
            column: m.col() as u32 + 1,
        }
    }
}

/// Positions of the nodes of one document, looked up by JSON pointer (`/spec/pools/0/name`).
///
/// Stored as a tree that mirrors the document (each node keeps its own key once), not as a map
/// from full pointer strings: with full pointers, a key tens of kilobytes long was copied into
/// the pointer of every node below it, and memory grew with the square of the file (a 90 KB
/// file took 1 GiB). Here memory is linear in the input: one node per YAML node, one copy of
/// each key.
#[derive(Clone, Debug)]
pub struct Positions {
    nodes: Vec<PosNode>,
}

#[derive(Clone, Debug, Default)]
struct PosNode {
    value: Pos,
    /// Where the key of this member is written (`None` for sequence items and the root).
    key: Option<Pos>,
    /// Boxed: most nodes are scalars without children, and every node counts.
    children: Option<Box<Children>>,
}

#[derive(Clone, Debug)]
enum Children {
    Map(Keys),
    Seq(Vec<u32>),
}

/// A mapping's members by key. A short list while the mapping is small: a fleet file's
/// mappings have a handful of keys each, and a hash map for each of them was a tenth of
/// parsing a 10,000-cluster fleet. A hash map past [`Keys::LIST_UP_TO`] keys, so that one
/// huge mapping in a hostile file still costs time linear in its size.
#[derive(Clone, Debug)]
enum Keys {
    List(Vec<(Box<str>, u32)>),
    Hashed(HashMap<Box<str>, u32>),
}

impl Keys {
    const LIST_UP_TO: usize = 16;

    fn get(&self, k: &str) -> Option<u32> {
        match self {
            Keys::List(v) => v.iter().find(|(key, _)| &**key == k).map(|(_, id)| *id),
            Keys::Hashed(m) => m.get(k).copied(),
        }
    }

    /// Records `k` at `id`; a key written twice points at its last node (as a map's insert).
    fn insert(&mut self, k: &str, id: u32) {
        match self {
            Keys::List(v) => {
                if let Some(entry) = v.iter_mut().find(|(key, _)| &**key == k) {
                    entry.1 = id;
                } else if v.len() < Self::LIST_UP_TO {
                    v.push((k.into(), id));
                } else {
                    let mut m: HashMap<Box<str>, u32> = std::mem::take(v).into_iter().collect();
                    m.insert(k.into(), id);
                    *self = Keys::Hashed(m);
                }
            }
            Keys::Hashed(m) => {
                m.insert(k.into(), id);
            }
        }
    }

    /// Bytes held: the entries' room and the keys' text.
    fn stored_bytes(&self) -> usize {
        match self {
            Keys::List(v) => {
                v.capacity() * std::mem::size_of::<(Box<str>, u32)>()
                    + v.iter().map(|(k, _)| k.len()).sum::<usize>()
            }
            Keys::Hashed(m) => {
                m.capacity() * (std::mem::size_of::<(Box<str>, u32)>() + 1)
                    + m.keys().map(|k| k.len()).sum::<usize>()
            }
        }
    }
}

impl Default for Positions {
    fn default() -> Self {
        Positions {
            nodes: vec![PosNode::default()],
        }
    }
}

impl Positions {
    const ROOT: u32 = 0;

    /// The deepest node written on the way to `pointer`, and whether it is `pointer` itself.
    fn walk(&self, pointer: &str) -> (u32, bool) {
        let mut at = Self::ROOT;
        for raw in pointer.split('/').skip(1) {
            let token = if raw.contains('~') {
                std::borrow::Cow::Owned(raw.replace("~1", "/").replace("~0", "~"))
            } else {
                std::borrow::Cow::Borrowed(raw)
            };
            let next = match self.nodes[at as usize].children.as_deref() {
                Some(Children::Map(m)) => m.get(token.as_ref()),
                Some(Children::Seq(items)) => token
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| items.get(i).copied()),
                None => None,
            };
            match next {
                Some(n) => at = n,
                None => return (at, false),
            }
        }
        (at, true)
    }

    /// Where the value at `pointer` starts; falls back to the nearest ancestor that is known
    /// (a missing field is reported where its parent object starts).
    pub fn value(&self, pointer: &str) -> Pos {
        self.nodes[self.walk(pointer).0 as usize].value
    }

    /// Where the key of the member at `pointer` is written (for unknown or duplicate fields);
    /// the value position when it has no key (a sequence item).
    pub fn key(&self, pointer: &str) -> Pos {
        let (at, exact) = self.walk(pointer);
        let node = &self.nodes[at as usize];
        match (exact, node.key) {
            (true, Some(k)) => k,
            _ => node.value,
        }
    }

    /// Bytes held by the position tree (keys and nodes), for the bound tests: linear in the
    /// input whatever its shape.
    pub fn stored_bytes(&self) -> usize {
        let mut total = self.nodes.capacity() * std::mem::size_of::<PosNode>();
        for n in &self.nodes {
            total += match n.children.as_deref() {
                None => 0,
                Some(Children::Seq(v)) => std::mem::size_of::<Children>() + v.capacity() * 4,
                Some(Children::Map(m)) => std::mem::size_of::<Children>() + m.stored_bytes(),
            };
        }
        total
    }

    /// A new child of `parent` (the member `key`, or the next item of a sequence).
    fn add(&mut self, parent: u32, key: Option<(&str, Pos)>, value: Pos) -> u32 {
        let id = self.nodes.len() as u32;
        self.nodes.push(PosNode {
            value,
            key: key.map(|(_, p)| p),
            children: None,
        });
        let children = &mut self.nodes[parent as usize].children;
        match key {
            Some((k, _)) => {
                if !matches!(children.as_deref(), Some(Children::Map(_))) {
                    *children = Some(Box::new(Children::Map(Keys::List(Vec::new()))));
                }
                if let Some(Children::Map(m)) = children.as_deref_mut() {
                    m.insert(k, id);
                }
            }
            None => {
                if !matches!(children.as_deref(), Some(Children::Seq(_))) {
                    *children = Some(Box::new(Children::Seq(Vec::new())));
                }
                if let Some(Children::Seq(v)) = children.as_deref_mut() {
                    v.push(id);
                }
            }
        }
        id
    }

    /// Gives back what growing the tree over-allocated (the document is complete).
    fn shrink(&mut self) {
        self.nodes.shrink_to_fit();
        for n in &mut self.nodes {
            match n.children.as_deref_mut() {
                Some(Children::Seq(v)) => v.shrink_to_fit(),
                Some(Children::Map(Keys::List(v))) => v.shrink_to_fit(),
                _ => {}
            }
        }
    }

    /// Where the key `k` of the mapping node `map` was written, if it was.
    fn key_of(&self, map: u32, k: &str) -> Option<Pos> {
        match self.nodes[map as usize].children.as_deref() {
            Some(Children::Map(m)) => m.get(k).and_then(|id| self.nodes[id as usize].key),
            _ => None,
        }
    }
}

/// One YAML document of a file.
#[derive(Clone, Debug)]
pub struct Document {
    /// 0-based index of the document in its file.
    pub index: usize,
    pub value: Value,
    pub positions: Positions,
}

/// Byte offset of 1-based `line` and `column` (columns count characters).
pub fn offset(text: &str, line: u32, column: u32) -> Option<usize> {
    if line == 0 || column == 0 {
        return None;
    }
    let mut at = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line as usize {
            return l
                .char_indices()
                .nth(column as usize - 1)
                .map(|(b, _)| at + b);
        }
        at += l.len();
    }
    None
}

/// Escape one JSON pointer token (RFC 6901).
pub fn escape_token(t: &str) -> String {
    t.replace('~', "~0").replace('/', "~1")
}

/// `/spec/pools/0/group` → `spec.pools[0].group`, the form people read in error messages.
pub fn pointer_to_path(pointer: &str) -> String {
    let mut out = String::new();
    for raw in pointer.split('/').skip(1) {
        let t = raw.replace("~1", "/").replace("~0", "~");
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{t}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            if t.contains('.') || t.contains(' ') {
                out.push_str(&format!("{t:?}"));
            } else {
                out.push_str(&t);
            }
        }
    }
    out
}

enum Frame {
    Map {
        map: Map<String, Value>,
        /// This mapping's node in [`Positions`].
        node: u32,
        /// The key read and where it is written, waiting for its value.
        key: Option<(String, Pos)>,
    },
    Seq {
        items: Vec<Value>,
        node: u32,
    },
}

struct Builder<'f> {
    file: &'f str,
    stack: Vec<Frame>,
    positions: Positions,
    root: Option<Value>,
}

impl Builder<'_> {
    fn err(&self, m: &Marker, message: impl Into<String>) -> Diagnostic {
        let pos = Pos::from(m);
        Diagnostic::new(
            &Location {
                file: self.file.to_string(),
                line: pos.line,
                column: pos.column,
            },
            "",
            message,
        )
    }

    /// Whether the node that starts now is a mapping key.
    fn expects_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { key: None, .. }))
    }

    /// Record where the (non-key) node that starts now is, returning its position node.
    fn place(&mut self, at: Pos) -> u32 {
        let Builder {
            stack, positions, ..
        } = self;
        match stack.last() {
            None => {
                positions.nodes[Positions::ROOT as usize].value = at;
                Positions::ROOT
            }
            Some(Frame::Seq { node, .. }) => positions.add(*node, None, at),
            Some(Frame::Map {
                node,
                key: Some((k, kp)),
                ..
            }) => positions.add(*node, Some((k, *kp)), at),
            Some(Frame::Map { key: None, .. }) => unreachable!("checked by expects_key"),
        }
    }

    /// Attach a finished value to its parent.
    fn attach(&mut self, value: Value) {
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map { map, key, .. }) => {
                let (k, _) = key.take().expect("a value follows its key");
                map.insert(k, value);
            }
        }
    }

    fn start_collection(&mut self, m: &Marker, seq: bool) -> Result<(), Diagnostic> {
        if self.expects_key() {
            return Err(self.err(m, "mapping keys must be plain strings, not collections"));
        }
        if self.stack.len() >= MAX_DEPTH {
            return Err(self.err(
                m,
                format!("nesting deeper than {MAX_DEPTH} levels is not allowed"),
            ));
        }
        let node = self.place(Pos::from(m));
        self.stack.push(if seq {
            Frame::Seq {
                items: Vec::new(),
                node,
            }
        } else {
            Frame::Map {
                map: Map::new(),
                node,
                key: None,
            }
        });
        Ok(())
    }

    fn scalar(&mut self, m: &Marker, text: &str, style: ScalarStyle) -> Result<(), Diagnostic> {
        if !self.expects_key() {
            self.place(Pos::from(m));
            let v = resolve_scalar(text, style);
            self.attach(v);
            return Ok(());
        }
        let Some(Frame::Map { map, node, .. }) = self.stack.last() else {
            unreachable!("keys only exist in mappings");
        };
        if map.contains_key(text) {
            let first = self.positions.key_of(*node, text).unwrap_or_default();
            return Err(self
                .err(m, format!("duplicate key `{text}`"))
                .with_hint(format!("first defined at line {}", first.line)));
        }
        if let Some(Frame::Map { key, .. }) = self.stack.last_mut() {
            *key = Some((text.to_string(), Pos::from(m)));
        }
        Ok(())
    }

    fn end_collection(&mut self) {
        let value = match self.stack.pop() {
            Some(Frame::Map { map, .. }) => Value::Object(map),
            Some(Frame::Seq { items, .. }) => Value::Array(items),
            None => return,
        };
        self.attach(value);
    }
}

/// YAML 1.2 core schema resolution of a scalar: quoted scalars are strings; plain ones may be
/// null, booleans, integers or floats. Non-finite floats (`.inf`, `.nan`) stay strings: JSON
/// has no place for them and no fleet field wants them.
fn resolve_scalar(text: &str, style: ScalarStyle) -> Value {
    if style != ScalarStyle::Plain {
        return Value::String(text.to_string());
    }
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(i) = text.parse::<i64>() {
            return Value::Number(i.into());
        }
        if let Ok(u) = text.parse::<u64>() {
            return Value::Number(u.into());
        }
    }
    if let Some(hex) = text.strip_prefix("0x")
        && let Ok(u) = u64::from_str_radix(hex, 16)
    {
        return Value::Number(u.into());
    }
    if let Some(oct) = text.strip_prefix("0o")
        && let Ok(u) = u64::from_str_radix(oct, 8)
    {
        return Value::Number(u.into());
    }
    if is_yaml_float(digits)
        && let Ok(f) = text.parse::<f64>()
        && let Some(n) = Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(text.to_string())
}

/// `[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?` or `\.[0-9]+(...)`, sign already stripped.
fn is_yaml_float(s: &str) -> bool {
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int, frac) = match mantissa.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (mantissa, None),
    };
    let all_digits = |x: &str| x.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = all_digits(int)
        && frac.is_none_or(all_digits)
        && (!int.is_empty() || frac.is_some_and(|f| !f.is_empty()));
    let exp_ok = exp.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && all_digits(e)
    });
    mantissa_ok && exp_ok && (frac.is_some() || exp.is_some())
}

/// Parse every document of one file. Empty documents (only comments) are skipped.
/// Stops at the first error of a file: after a syntax error the rest cannot be trusted.
pub fn parse(file: &str, text: &str) -> Result<Vec<Document>, Diagnostic> {
    let mut docs = Vec::new();
    let mut b = Builder {
        file,
        stack: Vec::new(),
        positions: Positions::default(),
        root: None,
    };
    let mut index = 0;
    for next in Parser::new_from_str(text) {
        let (event, span) = match next {
            Ok(e) => e,
            Err(e) => {
                return Err(b.err(e.marker(), format!("invalid YAML: {}", e.info())));
            }
        };
        let m = &span.start;
        match event {
            Event::Alias(_) => {
                return Err(b
                    .err(m, "YAML aliases (`*name`) are not allowed")
                    .with_hint("write the value out; rota merges rollout policies fleet → cluster → pool, so repetition is rarely needed"));
            }
            Event::Scalar(_, _, _, Some(tag))
            | Event::SequenceStart(_, Some(tag))
            | Event::MappingStart(_, Some(tag)) => {
                return Err(b.err(
                    m,
                    format!("YAML tags (`{}{}`) are not allowed", tag.handle, tag.suffix),
                ));
            }
            Event::Scalar(text, style, _, None) => b.scalar(m, &text, style)?,
            Event::SequenceStart(_, None) => b.start_collection(m, true)?,
            Event::MappingStart(_, None) => b.start_collection(m, false)?,
            Event::SequenceEnd | Event::MappingEnd => b.end_collection(),
            Event::DocumentEnd => {
                let mut positions = std::mem::take(&mut b.positions);
                positions.shrink();
                if let Some(value) = b.root.take()
                    && !value.is_null()
                {
                    docs.push(Document {
                        index,
                        value,
                        positions,
                    });
                }
                index += 1;
            }
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentStart(_) => {}
        }
    }
    Ok(docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Document {
        let mut docs = parse("t.yaml", text).unwrap();
        assert_eq!(docs.len(), 1);
        docs.remove(0)
    }

    #[test]
    fn reads_values_and_positions() {
        let d = one("a:\n  b: [1, \"2\", x]\n  c: 1.5\n  d: 2026.11.1\n  e: ~\n");
        assert_eq!(
            d.value,
            serde_json::json!({"a": {"b": [1, "2", "x"], "c": 1.5, "d": "2026.11.1", "e": null}})
        );
        assert_eq!(
            d.positions.value("/a/b/2"),
            Pos {
                line: 2,
                column: 15
            }
        );
        assert_eq!(d.positions.key("/a/c"), Pos { line: 3, column: 3 });
        assert_eq!(d.positions.value("/a/c"), Pos { line: 3, column: 6 });
        // Unknown members fall back to their parent.
        assert_eq!(d.positions.value("/a/zzz"), Pos { line: 2, column: 3 });
    }

    #[test]
    fn keys_are_placed_in_small_and_large_mappings_and_duplicates_caught_in_both() {
        // Up to 16 keys a mapping's positions are a list, past it a hash map: both answer.
        let text: String = (0..40).map(|i| format!("k{i}: {i}\n")).collect();
        let d = one(&text);
        for i in [0u32, 15, 16, 17, 39] {
            assert_eq!(
                d.positions.key(&format!("/k{i}")),
                Pos {
                    line: i + 1,
                    column: 1
                }
            );
            let column = format!("k{i}: ").len() as u32 + 1;
            assert_eq!(
                d.positions.value(&format!("/k{i}")),
                Pos {
                    line: i + 1,
                    column
                }
            );
        }
        for n in [3, 30] {
            let mut text: String = (0..n).map(|i| format!("k{i}: {i}\n")).collect();
            text.push_str("k1: again\n");
            let e = parse("t.yaml", &text).unwrap_err();
            assert_eq!((e.line, e.column), (n + 1, 1), "{n} keys");
            assert_eq!(
                e.hint.as_deref(),
                Some("first defined at line 2"),
                "{n} keys"
            );
        }
    }

    #[test]
    fn splits_documents_and_skips_empty_ones() {
        let docs = parse("t.yaml", "a: 1\n---\n# nothing\n---\nb: 2\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].index, 0);
        assert_eq!(docs[1].index, 2);
        assert_eq!(docs[1].positions.key("/b"), Pos { line: 5, column: 1 });
    }

    #[test]
    fn rejects_duplicates_aliases_tags_and_depth() {
        let e = parse("t.yaml", "a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!((e.line, e.column), (3, 1));
        assert!(e.message.contains("duplicate key `a`"), "{e:?}");
        assert_eq!(e.hint.as_deref(), Some("first defined at line 1"));

        let e = parse("t.yaml", "a: &x [1]\nb: *x\n").unwrap_err();
        assert!(e.message.contains("aliases"), "{e:?}");
        assert_eq!(e.line, 2);

        let e = parse("t.yaml", "a: !!binary aGk=\n").unwrap_err();
        assert!(e.message.contains("tags"), "{e:?}");

        let deep = "[".repeat(100) + &"]".repeat(100);
        let e = parse("t.yaml", &deep).unwrap_err();
        assert!(e.message.contains("nesting"), "{e:?}");

        let e = parse("t.yaml", "{[1]: 2}\n").unwrap_err();
        assert!(e.message.contains("keys"), "{e:?}");
    }

    #[test]
    fn resolves_core_schema_scalars() {
        let d = one("[true, False, 0x1F, 0o17, -3, 1e3, .5, '1', .inf, 10%, 1h]");
        assert_eq!(
            d.value,
            serde_json::json!([
                true, false, 31, 15, -3, 1000.0, 0.5, "1", ".inf", "10%", "1h"
            ])
        );
    }

    #[test]
    fn syntax_errors_have_positions() {
        let e = parse("t.yaml", "a: [1, 2\nb: 3\n").unwrap_err();
        assert!(e.message.starts_with("invalid YAML"), "{e:?}");
        assert!(e.line >= 1);
    }

    #[test]
    fn paths_read_like_fields() {
        assert_eq!(
            pointer_to_path("/spec/pools/0/group"),
            "spec.pools[0].group"
        );
        assert_eq!(
            pointer_to_path("/spec/images/general/versions/2026.11.1/aws"),
            "spec.images.general.versions.\"2026.11.1\".aws"
        );
        assert_eq!(pointer_to_path("/a~1b"), "a/b");
    }
}

/// Write a JSON value as block YAML (for `rota render`). Strings are written plain when the
/// reader above would read them back as the same string, double-quoted (JSON escaping, which
/// is valid YAML) otherwise, so the output always round-trips.
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    emit(v, 0, &mut out);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => {
            let plain_safe = !s.is_empty()
                && s.chars().all(|c| {
                    c.is_ascii_alphanumeric()
                        || matches!(c, '.' | '_' | '-' | '/' | '%' | '@' | '+')
                })
                && !s.starts_with(['-', '%', '@'])
                && resolve_scalar(s, ScalarStyle::Plain) == Value::String(s.clone());
            if plain_safe {
                s.clone()
            } else {
                Value::String(s.clone()).to_string()
            }
        }
        other => other.to_string(),
    }
}

fn key_text(k: &str) -> String {
    scalar_text(&Value::String(k.to_string()))
}

fn emit(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, val) in m {
                out.push_str(&pad);
                out.push_str(&key_text(k));
                out.push(':');
                match val {
                    Value::Object(x) if !x.is_empty() => {
                        out.push('\n');
                        emit(val, indent + 2, out);
                    }
                    Value::Array(x) if !x.is_empty() => {
                        out.push('\n');
                        emit(val, indent, out);
                    }
                    _ => {
                        out.push(' ');
                        out.push_str(&inline(val));
                        out.push('\n');
                    }
                }
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                out.push_str(&pad);
                out.push_str("- ");
                match item {
                    Value::Object(x) if !x.is_empty() => {
                        // First member on the dash line, the rest aligned under it.
                        let mut nested = String::new();
                        emit(item, indent + 2, &mut nested);
                        out.push_str(nested.trim_start());
                    }
                    Value::Array(x) if !x.is_empty() => {
                        let mut nested = String::new();
                        emit(item, indent + 2, &mut nested);
                        out.push_str(nested.trim_start());
                    }
                    _ => {
                        out.push_str(&inline(item));
                        out.push('\n');
                    }
                }
            }
        }
        other => {
            out.push_str(&pad);
            out.push_str(&inline(other));
            out.push('\n');
        }
    }
}

fn inline(v: &Value) -> String {
    match v {
        Value::Object(_) => "{}".to_string(),
        Value::Array(_) => "[]".to_string(),
        other => scalar_text(other),
    }
}

#[cfg(test)]
mod emit_tests {
    use super::*;

    #[test]
    fn emitted_yaml_reads_back_identically() {
        let v = serde_json::json!({
            "name": "prod-use1",
            "labels": {"ring": "main", "eks.amazonaws.com/nodegroup": "general"},
            "version": "2026.11", "count": 3, "ratio": 0.5, "flag": true, "none": null,
            "tricky": ["10%", "yes: no", "#x", "", "true", "1", " lead", "a\nb", "-x"],
            "nested": [{"a": 1, "b": [1, 2]}, [3, [4]], {}, []],
            "empty": {}
        });
        let text = to_yaml(&v);
        let back = parse("t.yaml", &text).unwrap();
        assert_eq!(back[0].value, v, "{text}");
    }
}
