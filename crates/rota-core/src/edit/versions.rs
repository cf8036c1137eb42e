//! Adding a discovered version to a channel (`rota images discover --write`), as a person would: the new entry is
//! inserted at the end of the channel's `versions` map, in the map's own style (a block map
//! at its keys' indentation; a flow map `{…}` inline), and nothing else in the file moves:
//! comments, quoting, blank lines and key order stay. The result is parsed again and must
//! hold exactly the proposed images before the caller commits it.

use crate::fleet::SourceFile;
use crate::fleet::model::{AwsImages, CloudImages, RegionImage};
use crate::fleet::yaml::{self, escape_token, offset};

use crate::images::Proposal;

/// Inserts `p`'s version into the file that holds the Fleet document. Returns the file's
/// path and new text.
pub fn insert_version(files: &[SourceFile], p: &Proposal) -> Result<(String, String), String> {
    for f in files {
        let Ok(text) = std::str::from_utf8(&f.bytes) else {
            continue;
        };
        let Ok(docs) = yaml::parse(&f.path, text) else {
            continue;
        };
        for doc in docs {
            if doc.value.get("kind").and_then(|k| k.as_str()) != Some("Fleet") {
                continue;
            }
            let pointer = format!("/spec/images/{}/versions", escape_token(&p.channel));
            let versions = &doc.value["spec"]["images"][&p.channel]["versions"];
            if !versions.is_object() {
                let at = doc.positions.value(&pointer);
                return Err(format!(
                    "{}:{}:{}: spec.images.{} has no versions map to add {} to",
                    f.path, at.line, at.column, p.channel, p.version
                ));
            }
            let key = doc.positions.key(&pointer);
            let value = doc.positions.value(&pointer);
            let out = if value.line == key.line {
                let start = offset(text, value.line, value.column).ok_or("bad position")?;
                insert_flow(text, start, p).ok_or_else(|| {
                    format!("{}:{}: cannot read the versions map", f.path, key.line)
                })?
            } else {
                insert_block(text, key.line, key.column, value.column, p)
            };
            check(&f.path, &out, p)?;
            return Ok((f.path.clone(), out));
        }
    }
    Err("no Fleet document in the fleet repo".into())
}

/// The edit must give back exactly the proposed images (and still parse).
fn check(path: &str, text: &str, p: &Proposal) -> Result<(), String> {
    let docs = yaml::parse(path, text).map_err(|d| format!("the edit broke {path}: {d:?}"))?;
    let got = docs
        .iter()
        .find(|d| d.value.get("kind").and_then(|k| k.as_str()) == Some("Fleet"))
        .map(|d| d.value["spec"]["images"][&p.channel]["versions"][&p.version].clone())
        .unwrap_or_default();
    let got: CloudImages = serde_json::from_value(got)
        .map_err(|e| format!("the edit of {path} does not read back: {e}"))?;
    if got != p.images {
        return Err(format!(
            "the edit of {path} reads back as {got:?}, not {:?}",
            p.images
        ));
    }
    Ok(())
}

fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// An image ID as a YAML scalar: plain when it is safe (AMI IDs, GCP and Azure paths).
fn scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if plain { s.to_string() } else { quoted(s) }
}

fn released(p: &Proposal) -> String {
    p.released
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn region_flow(img: &RegionImage) -> String {
    match img {
        RegionImage::One(id) => scalar(id),
        RegionImage::ByArch(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(a, id)| format!("{a}: {}", scalar(id)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// One member of the entry: its key, and its value inline or (AWS by region) nested lines.
type Member = (String, Option<String>, Vec<(String, String)>);

/// The entry's members; AWS regions nested one level deeper.
fn members(images: &CloudImages) -> Vec<Member> {
    let mut out = Vec::new();
    if let Some(aws) = &images.aws {
        match aws {
            AwsImages::One(id) => out.push(("aws".into(), Some(scalar(id)), vec![])),
            AwsImages::ByRegion(m) => out.push((
                "aws".into(),
                None,
                m.iter()
                    .map(|(r, img)| (r.clone(), region_flow(img)))
                    .collect(),
            )),
        }
    }
    if let Some(id) = &images.gcp {
        out.push(("gcp".into(), Some(scalar(id)), vec![]));
    }
    if let Some(id) = &images.azure {
        out.push(("azure".into(), Some(scalar(id)), vec![]));
    }
    out
}

/// Appends the entry to a block map whose key `versions:` is at (`key_line`, `key_col`) and
/// whose entries start at column `entry_col`; the map ends before the first line (not blank)
/// indented no deeper than `versions:`. Trailing blank lines and a comment that belongs to
/// the next key stay after the new entry.
fn insert_block(text: &str, key_line: u32, key_col: u32, entry_col: u32, p: &Proposal) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let indent_of = |l: &str| l.chars().take_while(|c| *c == ' ').count() as u32 + 1;
    let mut last = key_line as usize - 1;
    for (i, l) in lines.iter().enumerate().skip(key_line as usize) {
        if l.trim().is_empty() {
            continue;
        }
        if indent_of(l) <= key_col {
            break;
        }
        last = i;
    }
    // The step between an entry's key and its members, as the file writes it (else 2).
    let step = lines
        .iter()
        .skip(key_line as usize)
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| indent_of(l))
        .find(|c| *c > entry_col)
        .map(|c| c - entry_col)
        .unwrap_or(2) as usize;
    let pad = " ".repeat(entry_col as usize - 1);
    let one = " ".repeat(step);
    let mut entry = format!(
        "{pad}{}:\n{pad}{one}released: {}\n",
        quoted(&p.version),
        quoted(&released(p))
    );
    for (k, v, nested) in members(&p.images) {
        match v {
            Some(v) => entry.push_str(&format!("{pad}{one}{k}: {v}\n")),
            None => {
                entry.push_str(&format!("{pad}{one}{k}:\n"));
                for (r, v) in nested {
                    entry.push_str(&format!("{pad}{one}{one}{r}: {v}\n"));
                }
            }
        }
    }
    let mut out = String::with_capacity(text.len() + entry.len() + 1);
    for (i, l) in lines.iter().enumerate() {
        out.push_str(l);
        if i == last {
            if !l.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&entry);
        }
    }
    out
}

/// Inserts the entry before the closing brace of the flow map that starts at `start`.
fn insert_flow(text: &str, start: usize, p: &Proposal) -> Option<String> {
    let bytes = text.as_bytes();
    if bytes.get(start) != Some(&b'{') {
        return None;
    }
    let (mut depth, mut quote, mut i) = (0i32, None::<u8>, start);
    let close = loop {
        let b = *bytes.get(i)?;
        match (quote, b) {
            (Some(q), b) if b == q => quote = None,
            (Some(b'"'), b'\\') => i += 1,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(b),
            (None, b'{' | b'[') => depth += 1,
            (None, b'}' | b']') => {
                depth -= 1;
                if depth == 0 {
                    break i;
                }
            }
            _ => {}
        }
        i += 1;
    };
    let inner = &text[start + 1..close];
    let mut fields = vec![format!("released: {}", quoted(&released(p)))];
    for (k, v, nested) in members(&p.images) {
        let v = v.unwrap_or_else(|| {
            format!(
                "{{{}}}",
                nested
                    .iter()
                    .map(|(r, v)| format!("{r}: {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        });
        fields.push(format!("{k}: {v}"));
    }
    let entry = format!("{}: {{{}}}", quoted(&p.version), fields.join(", "));
    let body = inner.trim_end();
    let sep = if body.trim().is_empty() { "" } else { ", " };
    let mut out = String::with_capacity(text.len() + entry.len() + 2);
    out.push_str(&text[..start + 1]);
    out.push_str(body);
    out.push_str(sep);
    out.push_str(&entry);
    out.push_str(&inner[body.len()..]);
    out.push_str(&text[close..]);
    Some(out)
}
