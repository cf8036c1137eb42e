//! The fleet page's addresses that others link to: the page filtered to one wave, which the
//! wave's rollup commit status carries as its target URL (`report::rollup`), and the
//! escaping every link to the page uses (`ui::query` writes its own links with it and reads
//! them back). It sits below both, so that a commit status links to the page without the
//! report floor importing the page's (`ui` imports `report`, never the other way round).

/// What a link carries: everything but letters, digits and `-._~@` escaped.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~@".contains(&b) {
            out.push(b as char);
        } else {
            out += &format!("%{b:02X}");
        }
    }
    out
}

/// The page at `page` (its root address, with or without a trailing `/`) filtered to `wave`,
/// as `?wave=` reads it.
pub fn wave(page: &str, wave: &str) -> String {
    format!("{}/?wave={}", page.trim_end_matches('/'), encode(wave))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_escape_what_a_url_cannot_carry() {
        assert_eq!(encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
        assert_eq!(encode("general@2026.11.2"), "general@2026.11.2");
        assert_eq!(
            wave("https://rota.example.com/", "eu west"),
            "https://rota.example.com/?wave=eu%20west"
        );
    }
}
