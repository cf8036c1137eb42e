//! Moving a wave's pins (`spec.waves[k].images`) to other versions: what a promotion, a
//! revert and a discovered version's first wave write. The edit is textual, like a person's:
//! only the version scalars change, comments, quoting and layout stay. Where each pin is
//! written comes from the YAML parser's positions.

use crate::fleet::SourceFile;
use crate::fleet::yaml::{self, escape_token, offset};

/// One pin to move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinChange {
    pub channel: String,
    pub from: String,
    pub to: String,
}

/// Edits `files` (the fleet repo at some commit) so that wave `wave` pins each change's
/// channel to its `to`. Returns the path of the edited file and its new text.
pub fn edit_pins(
    files: &[SourceFile],
    wave: &str,
    changes: &[PinChange],
) -> Result<(String, String), String> {
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
            let waves = doc.value["spec"]["waves"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let Some(k) = waves.iter().position(|w| w["name"].as_str() == Some(wave)) else {
                return Err(format!("{}: the Fleet has no wave named {wave}", f.path));
            };
            // Replace from the end of the file backwards: earlier offsets stay valid.
            let mut edits = Vec::new();
            for c in changes {
                let pointer = format!("/spec/waves/{k}/images/{}", escape_token(&c.channel));
                if waves[k]["images"].get(&c.channel).is_none() {
                    return Err(format!(
                        "{}: wave {wave} does not pin channel {} yet; add `{}: \"{}\"` to its images by hand",
                        f.path, c.channel, c.channel, c.to
                    ));
                }
                let pos = doc.positions.value(&pointer);
                let start = offset(text, pos.line, pos.column).ok_or_else(|| {
                    format!(
                        "{}:{}:{}: cannot locate the pin of {}",
                        f.path, pos.line, pos.column, c.channel
                    )
                })?;
                let (len, scalar, quote) = scalar_at(&text[start..]);
                if scalar != c.from {
                    return Err(format!(
                        "{}:{}:{}: expected the pin {} = {:?}, found {scalar:?}",
                        f.path, pos.line, pos.column, c.channel, c.from
                    ));
                }
                let q = quote.unwrap_or('"');
                edits.push((start, len, format!("{q}{}{q}", c.to)));
            }
            edits.sort_by_key(|e| std::cmp::Reverse(e.0));
            let mut out = text.to_string();
            for (start, len, with) in edits {
                out.replace_range(start..start + len, &with);
            }
            return Ok((f.path.clone(), out));
        }
    }
    Err("no Fleet document in the fleet repo".into())
}

/// The scalar at the start of `s`: (bytes it spans, its value, its quote character).
fn scalar_at(s: &str) -> (usize, String, Option<char>) {
    let first = s.chars().next();
    if let Some(q @ ('"' | '\'')) = first
        && let Some(end) = s[1..].find(q)
    {
        return (end + 2, s[1..end + 1].to_string(), Some(q));
    }
    let len = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        .unwrap_or(s.len());
    (len, s[..len].to_string(), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLEET: &str = r#"# the fleet
kind: Fleet
spec:
  waves:
    - name: canary
      images: {general: "2026.11.2", gpu: '2026.11.1'}   # newest
    - name: main
      images:
        general: 2026.11.1   # plain
        gpu: '2026.10.3'
"#;

    fn change(c: &str, from: &str, to: &str) -> PinChange {
        PinChange {
            channel: c.into(),
            from: from.into(),
            to: to.into(),
        }
    }

    #[test]
    fn only_the_version_scalars_change() {
        let files = [SourceFile::new("fleet.yaml", FLEET)];
        let (path, text) = edit_pins(
            &files,
            "main",
            &[
                change("general", "2026.11.1", "2026.11.2"),
                change("gpu", "2026.10.3", "2026.11.1"),
            ],
        )
        .unwrap();
        assert_eq!(path, "fleet.yaml");
        assert_eq!(
            text,
            FLEET
                .replace(
                    "general: 2026.11.1   # plain",
                    "general: \"2026.11.2\"   # plain"
                )
                .replace("gpu: '2026.10.3'", "gpu: '2026.11.1'")
        );
        let (_, flow) =
            edit_pins(&files, "canary", &[change("gpu", "2026.11.1", "2026.11.9")]).unwrap();
        assert!(
            flow.contains(r#"{general: "2026.11.2", gpu: '2026.11.9'}   # newest"#),
            "{flow}"
        );
    }

    #[test]
    fn a_stale_or_missing_pin_is_refused() {
        let files = [SourceFile::new("fleet.yaml", FLEET)];
        let e = edit_pins(
            &files,
            "main",
            &[change("general", "2026.10.1", "2026.11.2")],
        )
        .unwrap_err();
        assert!(
            e.contains("expected the pin general = \"2026.10.1\""),
            "{e}"
        );
        let e = edit_pins(&files, "main", &[change("arm", "1", "2")]).unwrap_err();
        assert!(e.contains("does not pin channel arm"), "{e}");
        let e = edit_pins(&files, "nope", &[]).unwrap_err();
        assert!(e.contains("no wave named nope"), "{e}");
    }
}
