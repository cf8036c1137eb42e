//! Each forge's push webhook deliveries, as the receiver (`crate::source::webhook`) reads
//! them: which headers say the forge sent one, its event and its id, and how it is signed.
//!
//! - GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`, delivery id in
//!   `X-GitHub-Delivery`, event in `X-GitHub-Event`.
//! - GitLab: `X-Gitlab-Token: <the secret>`, delivery id in `Idempotency-Key` (or
//!   `X-Gitlab-Event-UUID`), event in `X-Gitlab-Event`.
//! - Gitea (and Forgejo): `X-Gitea-Signature: <hex HMAC-SHA256 of the body>`, delivery id in
//!   `X-Gitea-Delivery`, event in `X-Gitea-Event`.
//!
//! The receiver is handed [`FORGES`]; the HMAC and the constant-time comparisons are its own
//! (`hex_framed`, `verify_hex_hmac`, `verify_token`), shared by every forge.

use http::{HeaderMap, StatusCode};

use super::Forge;
use crate::source::Secret;
use crate::source::webhook::{
    Sender, Senders, Verdict, header, hex_framed, verify_hex_hmac, verify_token,
};

/// Every forge rota takes push webhooks from.
pub static FORGES: Senders = Senders {
    all: &[&Forge::GitHub, &Forge::GitLab, &Forge::Gitea],
    unknown: "not a GitHub, GitLab or Gitea webhook (no X-GitHub-Event, X-Gitlab-Event or X-Gitea-Event header)",
};

impl Forge {
    /// The forge that sent a delivery, by the headers it has (`has`: whether a header, by
    /// its lowercase name, is there). Gitea first: for compatibility it also sends
    /// X-GitHub-Event and X-GitHub-Delivery (and, on older versions, no
    /// X-Hub-Signature-256), never the other way round.
    pub fn of_webhook(has: impl Fn(&str) -> bool) -> Option<Forge> {
        if has("x-gitea-event") || has("x-gitea-signature") {
            Some(Forge::Gitea)
        } else if has("x-github-event") || has("x-hub-signature-256") {
            Some(Forge::GitHub)
        } else if has("x-gitlab-event") || has("x-gitlab-token") {
            Some(Forge::GitLab)
        } else {
            None
        }
    }

    /// The header a forge signs its deliveries in: (lowercase name, name as documented,
    /// the prefix before the hex digits). `None`: GitLab, which sends a token instead.
    fn signature_header(self) -> Option<(&'static str, &'static str, &'static str)> {
        match self {
            Forge::GitHub => Some(("x-hub-signature-256", "X-Hub-Signature-256", "sha256=")),
            Forge::Gitea => Some(("x-gitea-signature", "X-Gitea-Signature", "")),
            Forge::GitLab => None,
        }
    }

    /// The hex digits of a delivery's signature, from the header `(key, name, prefix)`.
    fn signature<'h>(
        headers: &'h HeaderMap,
        (key, name, prefix): (&str, &str, &str),
    ) -> Result<&'h str, Verdict> {
        let sig = header(headers, key).ok_or_else(|| {
            Verdict::reject(StatusCode::UNAUTHORIZED, format!("missing {name} header"))
        })?;
        sig.strip_prefix(prefix).ok_or_else(|| {
            Verdict::reject(
                StatusCode::BAD_REQUEST,
                format!("{name} must be {prefix}<hex>"),
            )
        })
    }

    /// GitLab's token: the secret itself, checked in full.
    fn token(secret: &Secret, headers: &HeaderMap) -> Result<(), Verdict> {
        let token = header(headers, "x-gitlab-token").ok_or_else(|| {
            Verdict::reject(StatusCode::UNAUTHORIZED, "missing X-Gitlab-Token header")
        })?;
        verify_token(secret, token, "X-Gitlab-Token")
    }
}

impl Sender for Forge {
    fn name(&self) -> &'static str {
        Forge::name(*self)
    }

    fn claims(&self, has: &dyn Fn(&str) -> bool) -> bool {
        Forge::of_webhook(has) == Some(*self)
    }

    fn event_header(&self) -> &'static str {
        match self {
            Forge::GitHub => "x-github-event",
            Forge::GitLab => "x-gitlab-event",
            Forge::Gitea => "x-gitea-event",
        }
    }

    /// GitLab's Idempotency-Key (GitLab 17+) stays the same across retries of a delivery,
    /// which is exactly what deduplication needs; older GitLab: the event UUID.
    fn delivery_headers(&self) -> &'static [&'static str] {
        match self {
            Forge::GitHub => &["x-github-delivery"],
            Forge::GitLab => &["idempotency-key", "x-gitlab-event-uuid"],
            Forge::Gitea => &["x-gitea-delivery"],
        }
    }

    fn push_event(&self) -> &'static str {
        match self {
            Forge::GitLab => "Push Hook",
            Forge::GitHub | Forge::Gitea => "push",
        }
    }

    fn authenticate_headers(&self, secret: &Secret, headers: &HeaderMap) -> Result<(), Verdict> {
        match self.signature_header() {
            // The token is the whole authentication: checked in full.
            None => Forge::token(secret, headers),
            Some(h) => hex_framed(Forge::signature(headers, h)?, h.1),
        }
    }

    fn authenticate(
        &self,
        secret: &Secret,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<(), Verdict> {
        match self.signature_header() {
            None => Forge::token(secret, headers),
            Some(h) => verify_hex_hmac(secret, body, Forge::signature(headers, h)?, h.1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_s_forge_is_read_from_its_headers_gitea_first() {
        let with = |names: &'static [&'static str]| move |h: &str| names.contains(&h);
        // Gitea sends GitHub's headers too: it is Gitea all the same.
        assert_eq!(
            Forge::of_webhook(with(&["x-github-event", "x-gitea-event"])),
            Some(Forge::Gitea)
        );
        assert_eq!(
            Forge::of_webhook(with(&["x-hub-signature-256"])),
            Some(Forge::GitHub)
        );
        assert_eq!(
            Forge::of_webhook(with(&["x-gitlab-token"])),
            Some(Forge::GitLab)
        );
        assert_eq!(Forge::of_webhook(with(&["x-other-event"])), None);
        assert_eq!(Forge::GitLab.push_event(), "Push Hook");
        assert_eq!(
            Forge::GitLab.delivery_headers(),
            ["idempotency-key", "x-gitlab-event-uuid"]
        );
    }

    /// Whatever the order of [`FORGES`], one forge claims a delivery: Gitea's, which also
    /// carries GitHub's headers, is Gitea's alone.
    #[test]
    fn exactly_one_forge_claims_a_gitea_delivery() {
        let has = |h: &str| ["x-github-event", "x-gitea-event"].contains(&h);
        let claimed: Vec<&str> = FORGES
            .all
            .iter()
            .filter(|s| s.claims(&has))
            .map(|s| s.name())
            .collect();
        assert_eq!(claimed, ["gitea"]);
    }
}
