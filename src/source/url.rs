//! The fleet repo's URL as rota handles it: a local path made a `file://` URL, scp-like ssh
//! told from a path, and every credential a URL may carry redacted before it is printed or
//! logged ([`redact_url`], [`redact_urls_in`]). The credentials and the mirror both use
//! them; they live below both.

use std::path::Path;

/// A plain local path becomes a file:// URL; everything else is passed to git as is.
pub fn normalise_url(url: &str) -> String {
    if url.contains("://") || is_scp_like(url) {
        url.to_string()
    } else {
        let p = Path::new(url);
        let abs = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        format!("file://{}", abs.display())
    }
}

/// `git@host:path` (scp-like ssh syntax), as opposed to a local path such as `./a:b`.
pub(crate) fn is_scp_like(url: &str) -> bool {
    match url.split_once(':') {
        Some((host, _)) => !host.is_empty() && !host.contains('/') && host != ".",
        None => false,
    }
}

/// A URL fit to be printed or logged: every credential it may carry is replaced by `***`.
///
/// - `user:password@`: the password (`https://x-access-token:***@github.com/...`);
/// - a user name alone, on anything but ssh: forges take a token as the user name
///   (`https://TOKEN@github.com/...`, `https://oauth2:TOKEN@...` alike), so it is `***@host`;
///   an ssh user name (`ssh://git@host`, `git@host:path`) is an account, not a secret;
/// - the query and the fragment (`?private_token=...`, `#access_token=...`): `?***`.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        // scp-like `user@host:path` (ssh) and local paths carry no secret.
        return url.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let ssh =
        scheme.eq_ignore_ascii_case("ssh") || scheme.to_ascii_lowercase().starts_with("git+ssh");
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _))
                if ssh || !user.is_empty() && user.len() < 40 && !looks_like_token(user) =>
            {
                format!("{user}:***@{host}")
            }
            Some(_) => format!("***:***@{host}"),
            None if ssh => format!("{userinfo}@{host}"),
            None => format!("***@{host}"),
        },
        None => authority.to_string(),
    };
    let (path, secret) = match tail.find(['?', '#']) {
        Some(i) => (&tail[..i], true),
        None => (tail, false),
    };
    format!(
        "{scheme}://{authority}{path}{}",
        if secret { "?***" } else { "" }
    )
}

/// A user name that is itself a token (GitHub's `ghp_...`, GitLab's `glpat-...`, long hex
/// or base64): redacted even before a `:`.
fn looks_like_token(user: &str) -> bool {
    [
        "ghp_",
        "gho_",
        "ghs_",
        "ghu_",
        "github_pat_",
        "glpat-",
        "glptt-",
    ]
    .iter()
    .any(|p| user.starts_with(p))
}

/// Every URL inside free text (an error message from libgit2 or a forge) passed through
/// [`redact_url`].
pub fn redact_urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        // The scheme: the letters (and + - .) just before `://`.
        let start = rest[..i]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))
            .map_or(0, |j| j + 1);
        let end = rest[i..]
            .find(|c: char| c.is_whitespace() || "\"'<>`)]".contains(c))
            .map_or(rest.len(), |j| i + j);
        out.push_str(&rest[..start]);
        if start == i {
            out.push_str("://");
            rest = &rest[i + 3..];
            continue;
        }
        out.push_str(&redact_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_credentials_in_urls_in_every_form() {
        assert_eq!(
            redact_url("https://x-access-token:ghp_secret@github.com/acme/fleet.git"),
            "https://x-access-token:***@github.com/acme/fleet.git"
        );
        // A token as the user name (what GitHub and GitLab accept).
        assert_eq!(
            redact_url("https://ghp_0123456789abcdef@github.com/acme/fleet.git"),
            "https://***@github.com/acme/fleet.git"
        );
        assert_eq!(
            redact_url("https://ghp_0123456789abcdef:x-oauth-basic@github.com/acme/fleet.git"),
            "https://***:***@github.com/acme/fleet.git"
        );
        assert_eq!(
            redact_url("HTTP://tok@host:8080"),
            "HTTP://***@host:8080",
            "no path, any case"
        );
        assert_eq!(
            redact_url("https://gitlab.example/acme/fleet.git?private_token=glpat-x#frag"),
            "https://gitlab.example/acme/fleet.git?***"
        );
        assert_eq!(redact_url("https://host?token=x"), "https://host?***");
        assert_eq!(
            redact_url("https://u:p@a@host/x"),
            "https://u:***@host/x",
            "the last @ ends the user info"
        );
        assert_eq!(
            redact_url("ssh://git@host/fleet.git"),
            "ssh://git@host/fleet.git"
        );
        assert_eq!(
            redact_url("git@github.com:acme/fleet.git"),
            "git@github.com:acme/fleet.git"
        );
        assert_eq!(redact_url("/srv/fleet"), "/srv/fleet");
        assert_eq!(
            redact_urls_in(
                "fetching https://TOKEN@host/f.git (branch main): 'https://TOKEN@host/' refused"
            ),
            "fetching https://***@host/f.git (branch main): 'https://***@host/' refused"
        );
        assert_eq!(redact_urls_in("no url :// here"), "no url :// here");
    }

    #[test]
    fn scp_like_urls_are_not_paths() {
        assert!(is_scp_like("git@github.com:acme/fleet.git"));
        assert!(!is_scp_like("/srv/fleet.git"));
        assert!(!is_scp_like("./a:b"));
    }
}
