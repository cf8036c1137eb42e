//! Validation errors of a fleet repo, each pointing at a file, line, column and field, and their
//! three renderings: `human` for a terminal, `json` for tools, `github` for workflow annotations.
//!
//! Every stage of loading (reading files, YAML, JSON Schema, typed model, semantic checks)
//! appends to one [`Diagnostics`] list, so that a pull request author sees every mistake at once
//! rather than fixing them one CI run at a time.

use std::fmt::Write as _;

use serde::Serialize;

/// One problem in the fleet repo.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Diagnostic {
    /// Path of the file, relative to the repo root (or prefixed, see [`Diagnostics::with_prefix`]).
    pub file: String,
    /// 1-based; 0 when the problem concerns the whole file (e.g. it is too large).
    pub line: u32,
    /// 1-based; 0 when unknown.
    pub column: u32,
    /// Field path inside the document, such as `spec.pools[0].group`; empty for the document.
    pub path: String,
    /// What is wrong and what was expected.
    pub message: String,
    /// A suggestion ("did you mean `batchSoak`?"), if there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// Longest field path or file name a diagnostic keeps (longer ones end in `…`).
pub const MAX_PATH: usize = 256;
/// Longest message or hint a diagnostic keeps (longer ones end in `…`).
pub const MAX_MESSAGE: usize = 512;

/// `s` cut to at most `max` characters (an ellipsis marks the cut), on a char boundary.
pub fn shorten(s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = s[..end].to_string();
    out.push('…');
    out
}

/// The location part of a diagnostic, as the loaders know it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    pub file: String,
    pub line: u32,
    pub column: u32,
}

impl Diagnostic {
    /// Path, message and hint are cut to [`MAX_PATH`] and [`MAX_MESSAGE`] characters: they
    /// quote keys and values of the repo, and a hostile repo must not make one error line a
    /// megabyte long (a 1 MB `timeZone` used to be echoed whole).
    pub fn new(at: &Location, path: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            file: shorten(at.file.clone(), MAX_PATH),
            line: at.line,
            column: at.column,
            path: shorten(path.into(), MAX_PATH),
            message: shorten(message.into(), MAX_MESSAGE),
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(shorten(hint.into(), MAX_MESSAGE));
        self
    }

    /// `file:line:column` (line and column left out when unknown).
    pub fn position(&self) -> String {
        if self.file.is_empty() {
            // A problem of the repo as a whole, e.g. no Fleet document.
            return "fleet repo".to_string();
        }
        match (self.line, self.column) {
            (0, _) => self.file.clone(),
            (l, 0) => format!("{}:{l}", self.file),
            (l, c) => format!("{}:{l}:{c}", self.file),
        }
    }
}

/// Every problem found in a fleet repo, sorted by file and position when rendered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Diagnostics(pub Vec<Diagnostic>);

/// Output formats of `rota validate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Human,
    Json,
    Github,
}

impl Format {
    /// Every format by the name the command line takes.
    pub const ALL: [(&'static str, Format); 3] = [
        ("human", Format::Human),
        ("json", Format::Json),
        ("github", Format::Github),
    ];
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Format, String> {
        Format::ALL
            .iter()
            .find(|(name, _)| *name == s)
            .map(|(_, f)| *f)
            .ok_or_else(|| format!("unknown format {s:?}: one of human, json, github"))
    }
}

impl Diagnostics {
    pub fn new() -> Self {
        Diagnostics(Vec::new())
    }

    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }

    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }

    /// Sort by file, line, column and drop exact duplicates (a value can fail the same check
    /// through two routes, e.g. schema and typed model).
    pub fn sorted(mut self) -> Self {
        self.0.sort();
        self.0.dedup();
        self
    }

    /// Prefix every file with `dir/`, so that paths are relative to where the user ran rota
    /// (`rota validate fleet/` reports `fleet/clusters/a.yaml`), which is also what GitHub
    /// annotations need to land on the right file of a pull request.
    pub fn with_prefix(mut self, dir: &str) -> Self {
        let dir = dir.trim_end_matches('/');
        if dir.is_empty() || dir == "." {
            return self;
        }
        for d in &mut self.0 {
            d.file = if d.file.is_empty() {
                dir.to_string()
            } else {
                format!("{dir}/{}", d.file)
            };
        }
        self
    }

    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Human => self.render_human(),
            Format::Json => self.render_json(),
            Format::Github => self.render_github(),
        }
    }

    /// `file:line:col: error: path: message` and an indented hint, then a count.
    pub fn render_human(&self) -> String {
        let mut out = self.lines_human("error");
        let n = self.0.len();
        let _ = writeln!(out, "{n} error{}", if n == 1 { "" } else { "s" });
        out
    }

    /// These diagnostics as warnings (`file:line:col: warning: path: message`, hint),
    /// without a count; GitHub workflow commands `::warning`; JSON `[...]`.
    pub fn render_warnings(&self, format: Format) -> String {
        match format {
            Format::Human => self.lines_human("warning"),
            Format::Github => self.lines_github("warning"),
            Format::Json => serde_json::to_string(&self.0).unwrap_or_default() + "\n",
        }
    }

    fn lines_human(&self, level: &str) -> String {
        let mut out = String::new();
        for d in &self.0 {
            let _ = write!(out, "{}: {level}: ", d.position());
            if !d.path.is_empty() {
                let _ = write!(out, "{}: ", d.path);
            }
            let _ = writeln!(out, "{}", d.message);
            if let Some(h) = &d.hint {
                let _ = writeln!(out, "  hint: {h}");
            }
        }
        out
    }

    /// `{"valid": bool, "errors": [...]}` on one line.
    pub fn render_json(&self) -> String {
        serde_json::json!({"valid": self.0.is_empty(), "errors": self.0}).to_string() + "\n"
    }

    /// `{"valid": true, "errors": [], "warnings": [...]}` on one line: a valid repo and what
    /// validation warns about (no `warnings` key when there is none, as before warnings).
    pub fn render_json_valid_with(warnings: &Diagnostics) -> String {
        if warnings.is_empty() {
            return Diagnostics::new().render_json();
        }
        serde_json::json!({"valid": true, "errors": [], "warnings": warnings.0}).to_string() + "\n"
    }

    /// GitHub Actions workflow commands: `::error file=F,line=L,col=C,title=T::message`.
    /// Data is escaped as the runner expects (`%`, CR, LF; and `:` `,` in properties).
    pub fn render_github(&self) -> String {
        self.lines_github("error")
    }

    fn lines_github(&self, level: &str) -> String {
        let mut out = String::new();
        for d in &self.0 {
            // Without a file GitHub shows the annotation on the run rather than on a line.
            let mut props = if d.file.is_empty() {
                String::new()
            } else {
                format!("file={},", escape_property(&d.file))
            };
            if d.line > 0 && !d.file.is_empty() {
                let _ = write!(props, "line={},", d.line);
            }
            if d.column > 0 && !d.file.is_empty() {
                let _ = write!(props, "col={},", d.column);
            }
            let title = if d.path.is_empty() {
                "rota validate".to_string()
            } else {
                format!("rota validate: {}", d.path)
            };
            let _ = write!(props, "title={}", escape_property(&title));
            let mut msg = d.message.clone();
            if let Some(h) = &d.hint {
                msg.push_str(" (hint: ");
                msg.push_str(h);
                msg.push(')');
            }
            let _ = writeln!(out, "::{level} {props}::{}", escape_data(&msg));
        }
        out
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(d: Diagnostic) -> Self {
        Diagnostics(vec![d])
    }
}

impl std::fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render_human())
    }
}

impl std::error::Error for Diagnostics {}

fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// Longest word "did you mean" compares: a typo of a name is about as long as the name, and
/// names here (fields, time zones, channels) are far shorter. Comparing a 1 MB `timeZone`
/// with every zone name took 13 s.
pub const MAX_SUGGEST_LEN: usize = 64;

/// The closest of `candidates` to `word`, if it is close enough to be a likely typo.
///
/// Jaro-Winkler favours a shared prefix, which is how field names are usually mistyped
/// (`batchSoak` vs `batchsoak`, `nodeSelectr`); the threshold keeps unrelated names out.
/// Words longer than [`MAX_SUGGEST_LEN`] get no suggestion and candidates longer than twice
/// that are skipped, so one comparison costs at most a few thousand steps.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    if word.len() > MAX_SUGGEST_LEN {
        return None;
    }
    let lower = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .filter(|c| c.len() <= 2 * MAX_SUGGEST_LEN)
        .map(|c| (strsim::jaro_winkler(&lower, &c.to_ascii_lowercase()), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Diagnostics {
        let at = Location {
            file: "clusters/a.yaml".into(),
            line: 12,
            column: 7,
        };
        Diagnostics(vec![
            Diagnostic::new(&at, "spec.rollout", "unknown field `batchSoke`")
                .with_hint("did you mean `batchSoak`?"),
        ])
    }

    #[test]
    fn human_names_file_line_column_path_and_hint() {
        let out = sample().render_human();
        assert!(out.starts_with("clusters/a.yaml:12:7: error: spec.rollout: unknown field"));
        assert!(out.contains("  hint: did you mean `batchSoak`?"));
        assert!(out.ends_with("1 error\n"));
    }

    #[test]
    fn github_annotations_are_escaped() {
        let mut d = sample();
        d.0[0].message = "50% bad,\nreally".into();
        let out = d.render_github();
        assert_eq!(
            out,
            "::error file=clusters/a.yaml,line=12,col=7,title=rota validate%3A spec.rollout::50%25 bad,%0Areally (hint: did you mean `batchSoak`?)\n"
        );
    }

    #[test]
    fn json_is_machine_readable() {
        let v: serde_json::Value = serde_json::from_str(&sample().render_json()).unwrap();
        assert_eq!(v["valid"], false);
        assert_eq!(v["errors"][0]["line"], 12);
        assert_eq!(v["errors"][0]["hint"], "did you mean `batchSoak`?");
    }

    #[test]
    fn warnings_render_as_warnings() {
        let w = sample();
        assert!(
            w.render_warnings(Format::Human)
                .starts_with("clusters/a.yaml:12:7: warning: spec.rollout: unknown field")
        );
        assert!(
            w.render_warnings(Format::Github)
                .starts_with("::warning file=clusters/a.yaml,line=12,")
        );
        let v: serde_json::Value =
            serde_json::from_str(&Diagnostics::render_json_valid_with(&w)).unwrap();
        assert_eq!(v["valid"], true);
        assert_eq!(v["warnings"][0]["line"], 12);
    }

    #[test]
    fn repo_wide_problems_have_no_file_position() {
        let d = Diagnostics(vec![Diagnostic::new(
            &Location::default(),
            "",
            "no Fleet document found",
        )]);
        assert!(
            d.render_human()
                .starts_with("fleet repo: error: no Fleet document found")
        );
        assert_eq!(
            d.render_github(),
            "::error title=rota validate::no Fleet document found\n"
        );
        assert_eq!(d.with_prefix("fleet").0[0].file, "fleet");
    }

    #[test]
    fn suggests_near_misses_only() {
        let fields = ["batch", "batchSoak", "poolSoak", "windows"];
        assert_eq!(did_you_mean("batchSoke", fields), Some("batchSoak"));
        assert_eq!(did_you_mean("window", fields), Some("windows"));
        assert_eq!(did_you_mean("zzz", fields), None);
    }

    #[test]
    fn huge_words_get_no_suggestion_and_are_not_echoed_whole() {
        let huge = "Europe/Berlin".repeat(80_000);
        assert_eq!(did_you_mean(&huge, ["Europe/Berlin"]), None);
        let d = Diagnostic::new(
            &Location::default(),
            format!("spec.{huge}"),
            format!("unknown time zone {huge:?}"),
        )
        .with_hint(huge.clone());
        assert!(
            d.path.len() <= MAX_PATH && d.path.ends_with('…'),
            "{}",
            d.path.len()
        );
        assert!(d.message.len() <= MAX_MESSAGE && d.message.ends_with('…'));
        assert!(d.hint.unwrap().len() <= MAX_MESSAGE);
        // Multi-byte characters are cut on a boundary.
        let d = Diagnostic::new(&Location::default(), "", "é".repeat(1000));
        assert!(d.message.len() <= MAX_MESSAGE);
    }
}
