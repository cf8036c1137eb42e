//! Text that came from git or a forge (note descriptions, commit subjects and authors, file
//! names in a tree, forge error bodies, `rota ctl --by`) made safe to show: in a terminal, a
//! log line or a page. Anyone with push access writes such text, and a terminal obeys escape
//! sequences in what it prints: an ESC in a status description could write the operator's
//! clipboard (OSC 52), erase lines, retitle the window or fake a prompt. The page escapes HTML
//! but a bidirectional override still reorders what a reader sees.
//!
//! One rule everywhere: every control character (C0, DEL, C1) and every Unicode format
//! character that reorders or hides text (bidi embeddings, overrides and isolates,
//! zero-width characters, line and paragraph separators) is replaced by its visible escape,
//! `\u{1b}`. Nothing is dropped, so a reader still sees that something was there.

use std::borrow::Cow;

/// Characters that are never shown as they are.
fn hidden(c: char, keep_newlines: bool) -> bool {
    if keep_newlines && (c == '\n' || c == '\t') {
        return false;
    }
    c.is_control()
        || matches!(
            c,
            '\u{061c}'               // Arabic letter mark
            | '\u{200b}'..='\u{200f}' // zero-width space/joiners, LRM, RLM
            | '\u{2028}'..='\u{202e}' // line/paragraph separators, bidi embeddings/overrides
            | '\u{2060}'..='\u{2069}' // word joiner, invisible operators, bidi isolates
            | '\u{feff}'              // zero-width no-break space (BOM)
        )
}

fn escape(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    if !s.chars().any(|c| hidden(c, keep_newlines)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if hidden(c, keep_newlines) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One line of untrusted text (a status description, a name): every control and hiding
/// character escaped, newlines included.
pub fn line(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// Untrusted text of several lines (a commit message, an error body): as [`line`], but
/// newlines and tabs are kept.
pub fn text(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

/// Untrusted text as a markdown code span for a pull request body or a comment: one line
/// ([`line`]), its backticks replaced (a code span ends at the first one). A forge renders
/// nothing inside one: no link, no mention, no HTML.
pub fn code_span(s: &str) -> String {
    format!("`{}`", line(s).replace('`', "'"))
}

/// [`line`] in place, for fields of documents read from git.
pub fn line_in_place(s: &mut String) {
    if let Cow::Owned(clean) = line(s) {
        *s = clean;
    }
}

/// True when `s` holds nothing [`line`] would escape.
pub fn is_clean_line(s: &str) -> bool {
    !s.chars().any(|c| hidden(c, false))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_code_span_cannot_be_closed_early_nor_span_lines() {
        assert_eq!(super::code_span("a`@x\n[y](z)"), "`a'@x\\u{a}[y](z)`");
    }

    use super::*;

    #[test]
    fn escapes_terminal_controls_and_bidi_keeps_the_rest() {
        // OSC 52 (clipboard write), a line erase, a window title.
        assert_eq!(
            line("ok\x1b]52;c;ZWNobyBwd25lZA==\x07done"),
            "ok\\u{1b}]52;c;ZWNobyBwd25lZA==\\u{7}done"
        );
        assert_eq!(line("a\x1b[2Kb"), "a\\u{1b}[2Kb");
        assert_eq!(line("\u{9b}31m"), "\\u{9b}31m", "C1 CSI");
        assert_eq!(line("x\u{202e}gpj.exe"), "x\\u{202e}gpj.exe");
        assert_eq!(line("two\nlines"), "two\\u{a}lines");
        assert_eq!(text("two\nlines\tand\x1b"), "two\nlines\tand\\u{1b}");
        assert!(matches!(
            line("4/4 nodes on general@2026.11.2 · soaking ✓"),
            Cow::Borrowed(_)
        ));
        assert!(is_clean_line("héllo wörld"));
        assert!(!is_clean_line("bell\x07"));
    }
}
