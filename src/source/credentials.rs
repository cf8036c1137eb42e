//! Credentials for fetching the fleet repo: an SSH key from a file with the server's host key
//! checked against a known_hosts file, or an HTTPS token from a file or the environment.
//! Secrets live in [`Secret`], whose `Debug` and `Display` print `***`, so they never reach a
//! log line. The choice of credential for each request of libgit2 is a pure function
//! ([`plan_credential`]), tested without a server.

use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use git2::{CertificateCheckStatus, Cred, CredentialType, RemoteCallbacks};
use hmac::{Hmac, Mac};

/// A secret string (token, passphrase, webhook secret). Never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// Reads a secret from a file (a mounted Kubernetes Secret, typically), trimming the
    /// trailing newline editors and `echo` add.
    pub fn from_file(path: &Path) -> Result<Self, CredentialError> {
        let raw = std::fs::read_to_string(path).map_err(|e| CredentialError::File {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let value = raw.trim_end_matches(['\n', '\r']).to_string();
        if value.is_empty() {
            return Err(CredentialError::Empty {
                what: format!("file {}", path.display()),
            });
        }
        Ok(Secret(value))
    }

    /// Reads a secret from an environment variable.
    pub fn from_env(var: &str) -> Result<Self, CredentialError> {
        match std::env::var(var) {
            Ok(v) if !v.is_empty() => Ok(Secret(v)),
            Ok(_) => Err(CredentialError::Empty {
                what: format!("environment variable {var}"),
            }),
            Err(_) => Err(CredentialError::MissingEnv {
                var: var.to_string(),
            }),
        }
    }

    /// The secret itself: call only where it is sent, never where it could be logged.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// How to authenticate to the fleet repo's remote.
#[derive(Debug, Clone)]
pub enum Auth {
    /// file://, git://, or a public https repo.
    None,
    SshKey {
        /// The SSH user when the URL names none (`git` by default).
        user: Option<String>,
        private_key: PathBuf,
        /// Optional: libssh2 derives it from the private key when absent.
        public_key: Option<PathBuf>,
        passphrase: Option<Secret>,
        /// The server's host key must be listed here; there is no trust on first use.
        known_hosts: PathBuf,
    },
    HttpsToken {
        /// `x-access-token` for GitHub app tokens, `oauth2` for GitLab; Gitea accepts any.
        username: String,
        token: Secret,
    },
}

impl Auth {
    /// Checks that the files this auth needs are readable, so mistakes show at start.
    pub fn validate(&self) -> Result<(), CredentialError> {
        if let Auth::SshKey {
            private_key,
            public_key,
            ..
        } = self
        {
            for p in std::iter::once(private_key).chain(public_key.iter()) {
                std::fs::metadata(p).map_err(|e| CredentialError::File {
                    path: p.clone(),
                    message: e.to_string(),
                })?;
            }
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("reading {path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("{what} is empty")]
    Empty { what: String },
    #[error("environment variable {var} is not set")]
    MissingEnv { var: String },
    #[error("{path}:{line}: {message}")]
    KnownHostsSyntax {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// What to answer libgit2 when it asks for credentials. Data, so it can be tested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialPlan {
    /// libgit2 first asks which user to log in as over ssh.
    Username(String),
    SshKey {
        user: String,
        private_key: PathBuf,
        public_key: Option<PathBuf>,
    },
    UserPassword {
        username: String,
    },
}

/// Chooses the credential for one request of libgit2. `attempt` counts the requests of this
/// kind in one fetch: libgit2 asks again after a rejection and would loop forever, so a
/// second request for the same kind is a failure with a clear message.
pub fn plan_credential(
    auth: &Auth,
    username_from_url: Option<&str>,
    allowed: CredentialType,
    attempt: u32,
) -> Result<CredentialPlan, String> {
    match auth {
        Auth::None => Err(
            "the remote asks for credentials but none are configured (set an SSH key or a token)"
                .to_string(),
        ),
        Auth::SshKey {
            user,
            private_key,
            public_key,
            ..
        } => {
            let user = username_from_url
                .map(str::to_string)
                .or_else(|| user.clone())
                .unwrap_or_else(|| "git".to_string());
            if allowed.contains(CredentialType::USERNAME) {
                return Ok(CredentialPlan::Username(user));
            }
            if !allowed.contains(CredentialType::SSH_KEY) {
                return Err(format!(
                    "an SSH key is configured but the remote accepts only {allowed:?}"
                ));
            }
            if attempt > 1 {
                return Err(format!(
                    "the server rejected SSH key {} for user {user}",
                    private_key.display()
                ));
            }
            Ok(CredentialPlan::SshKey {
                user,
                private_key: private_key.clone(),
                public_key: public_key.clone(),
            })
        }
        Auth::HttpsToken { username, .. } => {
            if !allowed.contains(CredentialType::USER_PASS_PLAINTEXT) {
                return Err(format!(
                    "a token is configured but the remote accepts only {allowed:?}"
                ));
            }
            if attempt > 1 {
                return Err("the server rejected the token (expired, revoked, or without read access to the repo)".to_string());
            }
            Ok(CredentialPlan::UserPassword {
                username: username.clone(),
            })
        }
    }
}

/// Why our callbacks refused a connection. libgit2 replaces the callbacks' error text with
/// its own generic one ("invalid or unknown remote ssh hostkey"), so the callbacks also
/// leave their reason here for the caller to report.
pub type Refusal = std::cell::RefCell<Option<String>>;

/// The error to show for a failed libgit2 network operation: our callbacks' reason if they
/// refused, libgit2's message otherwise.
pub fn explain(e: &git2::Error, refusal: &Refusal) -> String {
    refusal
        .borrow_mut()
        .take()
        .unwrap_or_else(|| e.message().to_string())
}

/// libgit2 callbacks: credentials per [`plan_credential`], and SSH host keys checked against
/// `known_hosts` (TLS certificates are left to libgit2's own verification).
pub fn callbacks<'a>(
    auth: &'a Auth,
    url: &'a str,
    known_hosts: Option<&'a KnownHosts>,
    refusal: &'a Refusal,
) -> RemoteCallbacks<'a> {
    let mut cb = RemoteCallbacks::new();
    let mut attempts = 0u32;
    let refuse = move |m: String| {
        *refusal.borrow_mut() = Some(m.clone());
        git2::Error::from_str(&m)
    };
    cb.credentials(move |asking, username_from_url, allowed| {
        // libgit2 follows the first request's redirect to any host and then asks for
        // credentials for wherever it landed: the token goes only where it was configured for.
        same_origin(url, asking).map_err(refuse)?;
        if !allowed.contains(CredentialType::USERNAME) {
            attempts += 1;
        }
        let plan = plan_credential(auth, username_from_url, allowed, attempts).map_err(refuse)?;
        match plan {
            CredentialPlan::Username(u) => Cred::username(&u),
            CredentialPlan::SshKey {
                user,
                private_key,
                public_key,
            } => {
                let passphrase = match auth {
                    Auth::SshKey { passphrase, .. } => passphrase.as_ref().map(Secret::expose),
                    _ => None,
                };
                Cred::ssh_key(&user, public_key.as_deref(), &private_key, passphrase)
            }
            CredentialPlan::UserPassword { username } => match auth {
                Auth::HttpsToken { token, .. } => {
                    Cred::userpass_plaintext(&username, token.expose())
                }
                _ => Err(git2::Error::from_str("no token configured")),
            },
        }
    });
    cb.certificate_check(move |cert, host| {
        let Some(hostkey) = cert.as_hostkey() else {
            // X.509: libgit2 has already verified it against the system roots.
            return Ok(CertificateCheckStatus::CertificatePassthrough);
        };
        let Some(known) = known_hosts else {
            return Err(refuse(
                "ssh remote but no known_hosts file configured: refusing an unverified host key"
                    .to_string(),
            ));
        };
        let (Some(key), Some(kind)) = (hostkey.hostkey(), hostkey.hostkey_type()) else {
            return Err(refuse("the ssh server sent no host key".to_string()));
        };
        let (h, port) = ssh_host_port(url).unwrap_or((host.to_string(), 22));
        match known.check(&h, port, kind.name(), key) {
            HostKeyVerdict::Trusted => Ok(CertificateCheckStatus::CertificateOk),
            verdict => Err(refuse(verdict.explain(&h, port, known))),
        }
    });
    cb
}

/// Whether credentials configured for `configured` may be handed to a server asking for them
/// at `asking` (the URL libgit2 reached, after any redirect). An http(s) server must be the
/// configured one: the same host and port, or the same host upgraded from `http` to `https`.
/// A redirect elsewhere (a compromised or hostile host, an open redirect on a forge) would
/// otherwise receive the fleet repo's token. ssh and local transports do not redirect.
pub fn same_origin(configured: &str, asking: &str) -> Result<(), String> {
    let Some(there) = http_origin(asking) else {
        return Ok(());
    };
    let here = http_origin(configured);
    let allowed = here.as_ref().is_some_and(|here| {
        here.host == there.host
            && (here.port == there.port
                || (here.scheme == "http"
                    && here.port == 80
                    && there.scheme == "https"
                    && there.port == 443))
    });
    if allowed {
        return Ok(());
    }
    Err(format!(
        "refusing to send the credentials configured for {} to {}://{}:{}: the server \
         redirected to another host, and credentials go only to the configured one (point \
         the repo URL at where the repo is served)",
        here.map_or_else(
            || super::url::redact_url(configured),
            |h| format!("{}://{}:{}", h.scheme, h.host, h.port)
        ),
        there.scheme,
        rota_core::sanitize::line(&there.host),
        there.port
    ))
}

/// The scheme, host (lower case) and port (the scheme's default when absent) of an http(s)
/// URL; `None` for anything else.
#[derive(Debug, PartialEq, Eq)]
struct HttpOrigin {
    scheme: &'static str,
    host: String,
    port: u16,
}

fn http_origin(url: &str) -> Option<HttpOrigin> {
    let (scheme, rest) = url.split_once("://")?;
    let (scheme, default) = match scheme.to_ascii_lowercase().as_str() {
        "http" => ("http", 80),
        "https" => ("https", 443),
        _ => return None,
    };
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = match hostport.strip_prefix('[') {
        Some(v6) => {
            let (h, tail) = v6.split_once(']')?;
            (h, tail.strip_prefix(':'))
        }
        None => match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        },
    };
    let port = match port {
        Some("") | None => default,
        Some(p) => p.parse().ok()?,
    };
    Some(HttpOrigin {
        scheme,
        host: host.trim_end_matches('.').to_ascii_lowercase(),
        port,
    })
}

/// Host and port of an ssh URL (`ssh://user@host:2222/path` or `user@host:path`).
pub fn ssh_host_port(url: &str) -> Option<(String, u16)> {
    if let Some(rest) = url.strip_prefix("ssh://") {
        let authority = rest.split('/').next()?;
        let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        if let Some(stripped) = hostport.strip_prefix('[') {
            let (h, rest) = stripped.split_once(']')?;
            let port = rest
                .strip_prefix(':')
                .and_then(|p| p.parse().ok())
                .unwrap_or(22);
            return Some((h.to_string(), port));
        }
        return Some(match hostport.split_once(':') {
            Some((h, p)) => (h.to_string(), p.parse().ok()?),
            None => (hostport.to_string(), 22),
        });
    }
    if url.contains("://") || !super::url::is_scp_like(url) {
        return None;
    }
    let (authority, _) = url.split_once(':')?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    Some((host.to_string(), 22))
}

/// The decision on a server's host key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKeyVerdict {
    Trusted,
    /// The host is listed, but not with this key: possibly a man in the middle.
    Mismatch,
    /// The host is not listed at all.
    Unknown,
    /// The key is marked `@revoked`.
    Revoked,
}

impl HostKeyVerdict {
    fn explain(&self, host: &str, port: u16, known: &KnownHosts) -> String {
        let name = host_pattern_name(host, port);
        let file = known.path.display();
        match self {
            HostKeyVerdict::Trusted => format!("host key of {name} trusted"),
            HostKeyVerdict::Mismatch => format!(
                "host key of {name} does not match {file}: refusing to connect (the key changed, or someone is in the middle)"
            ),
            HostKeyVerdict::Unknown => format!(
                "{name} is not in {file}: add its key (ssh-keyscan -p {port} {host}, checked out of band)"
            ),
            HostKeyVerdict::Revoked => format!("host key of {name} is @revoked in {file}"),
        }
    }
}

/// How known_hosts names a host: `host` on port 22, `[host]:port` otherwise.
fn host_pattern_name(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    }
}

#[derive(Debug, Clone)]
struct KnownHostLine {
    revoked: bool,
    hosts: HostMatcher,
    key_type: String,
    key: Vec<u8>,
}

#[derive(Debug, Clone)]
enum HostMatcher {
    /// `|1|salt|hash`: HMAC-SHA1 of the host name keyed with the salt.
    Hashed { salt: Vec<u8>, hash: Vec<u8> },
    /// Comma-separated patterns with `*`, `?` and `!` negation.
    Patterns(Vec<String>),
}

impl HostMatcher {
    fn matches(&self, name: &str) -> bool {
        match self {
            HostMatcher::Hashed { salt, hash } => {
                let mut mac = <Hmac<sha1::Sha1> as Mac>::new_from_slice(salt)
                    .expect("HMAC accepts any key length");
                mac.update(name.as_bytes());
                mac.verify_slice(hash).is_ok()
            }
            HostMatcher::Patterns(patterns) => {
                let mut matched = false;
                for p in patterns {
                    if let Some(neg) = p.strip_prefix('!') {
                        if wildcard(neg, name) {
                            return false;
                        }
                    } else if wildcard(p, name) {
                        matched = true;
                    }
                }
                matched
            }
        }
    }
}

/// OpenSSH-style wildcard match (`*` any run, `?` one character), case-insensitive.
fn wildcard(pattern: &str, name: &str) -> bool {
    fn go(p: &[u8], n: &[u8]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], n) || (!n.is_empty() && go(p, &n[1..])),
            (Some(b'?'), Some(_)) => go(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a.eq_ignore_ascii_case(b) => go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    go(pattern.as_bytes(), name.as_bytes())
}

/// A parsed OpenSSH known_hosts file (plain and hashed host names, `[host]:port`, wildcards,
/// negations, `@revoked`; `@cert-authority` lines are ignored: host certificates are not
/// supported).
#[derive(Debug, Clone)]
pub struct KnownHosts {
    path: PathBuf,
    lines: Vec<KnownHostLine>,
}

impl KnownHosts {
    pub fn load(path: &Path) -> Result<Self, CredentialError> {
        let text = std::fs::read_to_string(path).map_err(|e| CredentialError::File {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Self, CredentialError> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut lines = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let err = |message: String| CredentialError::KnownHostsSyntax {
                path: path.to_path_buf(),
                line: i + 1,
                message,
            };
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut fields = line.split_whitespace().peekable();
            let mut revoked = false;
            if let Some(marker) = fields.peek().filter(|f| f.starts_with('@')) {
                match *marker {
                    "@revoked" => revoked = true,
                    "@cert-authority" => continue,
                    other => return Err(err(format!("unknown marker {other}"))),
                }
                fields.next();
            }
            let (Some(hosts), Some(key_type), Some(key)) =
                (fields.next(), fields.next(), fields.next())
            else {
                return Err(err(
                    "expected `hosts key-type base64-key [comment]`".to_string()
                ));
            };
            let hosts = if let Some(hashed) = hosts.strip_prefix("|1|") {
                let (salt, hash) = hashed
                    .split_once('|')
                    .ok_or_else(|| err("hashed host name without `|salt|hash`".to_string()))?;
                HostMatcher::Hashed {
                    salt: b64
                        .decode(salt)
                        .map_err(|e| err(format!("hashed host salt: {e}")))?,
                    hash: b64
                        .decode(hash)
                        .map_err(|e| err(format!("hashed host hash: {e}")))?,
                }
            } else {
                HostMatcher::Patterns(hosts.split(',').map(str::to_string).collect())
            };
            let key = b64
                .decode(key)
                .map_err(|e| err(format!("key is not base64: {e}")))?;
            lines.push(KnownHostLine {
                revoked,
                hosts,
                key_type: key_type.to_string(),
                key,
            });
        }
        Ok(KnownHosts {
            path: path.to_path_buf(),
            lines,
        })
    }

    /// Checks the key a server presented. A `@revoked` match wins over everything; a listed
    /// host whose key differs is a mismatch even if it has other keys of other types.
    pub fn check(&self, host: &str, port: u16, key_type: &str, key: &[u8]) -> HostKeyVerdict {
        let name = host_pattern_name(host, port);
        let mut known_host = false;
        let mut trusted = false;
        for line in self.lines.iter().filter(|l| l.hosts.matches(&name)) {
            let same_key = line.key == key;
            if line.revoked {
                if same_key {
                    return HostKeyVerdict::Revoked;
                }
                continue;
            }
            known_host = true;
            if same_key && line.key_type == key_type {
                trusted = true;
            }
        }
        match (trusted, known_host) {
            (true, _) => HostKeyVerdict::Trusted,
            (false, true) => HostKeyVerdict::Mismatch,
            (false, false) => HostKeyVerdict::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn ssh_key() -> Auth {
        Auth::SshKey {
            user: None,
            private_key: "/keys/id_ed25519".into(),
            public_key: None,
            passphrase: None,
            known_hosts: "/keys/known_hosts".into(),
        }
    }

    #[test]
    fn ssh_answers_the_username_question_then_the_key() {
        let auth = ssh_key();
        assert_eq!(
            plan_credential(&auth, None, CredentialType::USERNAME, 0),
            Ok(CredentialPlan::Username("git".into()))
        );
        assert_eq!(
            plan_credential(&auth, Some("deploy"), CredentialType::SSH_KEY, 1),
            Ok(CredentialPlan::SshKey {
                user: "deploy".into(),
                private_key: "/keys/id_ed25519".into(),
                public_key: None
            })
        );
    }

    #[test]
    fn a_rejected_key_fails_instead_of_looping() {
        let err = plan_credential(&ssh_key(), Some("git"), CredentialType::SSH_KEY, 2).unwrap_err();
        assert!(err.contains("rejected SSH key /keys/id_ed25519"), "{err}");
    }

    #[test]
    fn token_goes_as_basic_auth_password_once() {
        let auth = Auth::HttpsToken {
            username: "x-access-token".into(),
            token: Secret::new("ghp_s3cret"),
        };
        assert_eq!(
            plan_credential(&auth, None, CredentialType::USER_PASS_PLAINTEXT, 1),
            Ok(CredentialPlan::UserPassword {
                username: "x-access-token".into()
            })
        );
        let again = plan_credential(&auth, None, CredentialType::USER_PASS_PLAINTEXT, 2);
        assert!(again.unwrap_err().contains("rejected the token"));
        // The wrong kind of credential for the remote is a clear error, not a guess.
        let ssh_only = plan_credential(&auth, None, CredentialType::SSH_KEY, 1).unwrap_err();
        assert!(ssh_only.contains("accepts only"), "{ssh_only}");
        assert!(plan_credential(&Auth::None, None, CredentialType::SSH_KEY, 1).is_err());
    }

    #[test]
    fn credentials_go_only_to_the_configured_host() {
        let repo = "https://git.example.com/acme/fleet.git";
        for same in [
            "https://git.example.com/acme/fleet.git/info/refs",
            "https://GIT.example.com:443/other/path",
            "https://x-access-token@git.example.com./acme/fleet.git",
        ] {
            assert_eq!(same_origin(repo, same), Ok(()), "{same}");
        }
        // An http repo redirected to https on the same host keeps its credentials.
        assert_eq!(
            same_origin("http://git.example.com/f", "https://git.example.com/f"),
            Ok(())
        );
        for elsewhere in [
            "https://attacker.example/acme/fleet.git",
            "https://git.example.com.attacker.example/x",
            "https://git.example.com:8443/acme/fleet.git",
            "http://git.example.com/acme/fleet.git",
            "https://[::1]/acme",
        ] {
            let e = same_origin(repo, elsewhere).unwrap_err();
            assert!(e.contains("redirected to another host"), "{elsewhere}: {e}");
        }
        // Over loopback, libgit2 itself tells hosts apart by name only, not by port.
        assert!(same_origin("http://127.0.0.1:8080/f", "http://127.0.0.1:9090/f").is_err());
        assert!(same_origin("http://127.0.0.1:8080/f", "http://127.0.0.2:8080/f").is_err());
        // ssh and local transports never redirect.
        assert_eq!(same_origin("git@host:f", "ssh://git@host/f"), Ok(()));
        assert_eq!(same_origin("/srv/fleet", "file:///srv/fleet"), Ok(()));
        // Escapes in a hostile Location's host never reach the message raw.
        let e = same_origin(repo, "https://ev\x1b[2Jil/").unwrap_err();
        assert!(!e.contains('\x1b'), "{e:?}");
    }

    #[test]
    fn secrets_never_print() {
        let auth = Auth::HttpsToken {
            username: "oauth2".into(),
            token: Secret::new("glpat-very-secret"),
        };
        let shown = format!("{auth:?} {}", Secret::new("x"));
        assert!(!shown.contains("very-secret"), "{shown}");
        assert!(shown.contains("***"));
    }

    #[test]
    fn secrets_from_files_and_environment() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        std::fs::write(&f, "tok-123\n").unwrap();
        assert_eq!(Secret::from_file(&f).unwrap().expose(), "tok-123");
        std::fs::write(&f, "\n").unwrap();
        assert!(matches!(
            Secret::from_file(&f),
            Err(CredentialError::Empty { .. })
        ));
        let missing = Secret::from_env("ROTA_TEST_SURELY_UNSET_TOKEN").unwrap_err();
        assert_eq!(
            missing.to_string(),
            "environment variable ROTA_TEST_SURELY_UNSET_TOKEN is not set"
        );
    }

    #[test]
    fn ssh_urls_give_host_and_port() {
        assert_eq!(
            ssh_host_port("ssh://git@example.com:2222/acme/fleet.git"),
            Some(("example.com".into(), 2222))
        );
        assert_eq!(
            ssh_host_port("ssh://example.com/fleet.git"),
            Some(("example.com".into(), 22))
        );
        assert_eq!(
            ssh_host_port("git@github.com:acme/fleet.git"),
            Some(("github.com".into(), 22))
        );
        assert_eq!(ssh_host_port("https://github.com/acme/fleet.git"), None);
    }

    /// A real host key pair generated by ssh-keygen: (known_hosts key type, wire blob).
    fn generated_key(dir: &Path, name: &str) -> (String, Vec<u8>, String) {
        let path = dir.join(name);
        let out = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "", "-f"])
            .arg(&path)
            .output()
            .expect("ssh-keygen must be installed (openssh-client)");
        assert!(out.status.success(), "{out:?}");
        let public = std::fs::read_to_string(path.with_extension("pub")).unwrap();
        let mut parts = public.split_whitespace();
        let kind = parts.next().unwrap().to_string();
        let b64 = parts.next().unwrap().to_string();
        let blob = base64::engine::general_purpose::STANDARD
            .decode(&b64)
            .unwrap();
        (kind, blob, b64)
    }

    #[test]
    fn known_hosts_trusts_listed_keys_only() {
        let dir = tempfile::tempdir().unwrap();
        let (kind, good, good_b64) = generated_key(dir.path(), "good");
        let (_, evil, _) = generated_key(dir.path(), "evil");
        let (_, old, old_b64) = generated_key(dir.path(), "old");
        let text = format!(
            "# fleet git servers\n\
             git.acme.internal,10.0.0.5 {kind} {good_b64}\n\
             [git.acme.internal]:2222 {kind} {good_b64}\n\
             *.mirror.acme.internal,!bad.mirror.acme.internal {kind} {good_b64}\n\
             @revoked * {kind} {old_b64}\n\
             @cert-authority *.acme.internal {kind} {good_b64}\n"
        );
        let kh = KnownHosts::parse(Path::new("known_hosts"), &text).unwrap();
        assert_eq!(
            kh.check("git.acme.internal", 22, &kind, &good),
            HostKeyVerdict::Trusted
        );
        assert_eq!(
            kh.check("10.0.0.5", 22, &kind, &good),
            HostKeyVerdict::Trusted
        );
        assert_eq!(
            kh.check("git.acme.internal", 2222, &kind, &good),
            HostKeyVerdict::Trusted
        );
        assert_eq!(
            kh.check("git.acme.internal", 22, &kind, &evil),
            HostKeyVerdict::Mismatch
        );
        assert_eq!(
            kh.check("git.acme.internal", 2200, &kind, &good),
            HostKeyVerdict::Unknown
        );
        assert_eq!(
            kh.check("eu.mirror.acme.internal", 22, &kind, &good),
            HostKeyVerdict::Trusted
        );
        assert_eq!(
            kh.check("bad.mirror.acme.internal", 22, &kind, &good),
            HostKeyVerdict::Unknown
        );
        assert_eq!(
            kh.check("git.acme.internal", 22, &kind, &old),
            HostKeyVerdict::Revoked
        );
        assert_eq!(
            kh.check("git.acme.internal", 22, "ssh-rsa", &good),
            HostKeyVerdict::Mismatch
        );
    }

    #[test]
    fn hashed_known_hosts_written_by_ssh_keygen() {
        let dir = tempfile::tempdir().unwrap();
        let (kind, good, good_b64) = generated_key(dir.path(), "host");
        let file = dir.path().join("known_hosts");
        std::fs::write(
            &file,
            format!(
                "git.acme.internal {kind} {good_b64}\n[git.acme.internal]:2222 {kind} {good_b64}\n"
            ),
        )
        .unwrap();
        // `ssh-keygen -H` hashes every host name in place, as HashKnownHosts does.
        let out = Command::new("ssh-keygen")
            .arg("-H")
            .arg("-f")
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with("|1|"), "{text}");
        let kh = KnownHosts::load(&file).unwrap();
        assert_eq!(
            kh.check("git.acme.internal", 22, &kind, &good),
            HostKeyVerdict::Trusted
        );
        assert_eq!(
            kh.check("git.acme.internal", 2222, &kind, &good),
            HostKeyVerdict::Trusted
        );
        assert_eq!(
            kh.check("other.acme.internal", 22, &kind, &good),
            HostKeyVerdict::Unknown
        );
    }

    proptest::proptest! {
        /// known_hosts files are user input: any text parses or fails with a line number.
        #[test]
        fn known_hosts_parsing_never_panics(text in "(@?[a-z|,*!\\[\\]:0-9.=+/ ]{0,60}\n){0,6}") {
            match KnownHosts::parse(Path::new("kh"), &text) {
                Ok(kh) => { kh.check("host", 22, "ssh-ed25519", b"key"); }
                Err(e) => proptest::prop_assert!(e.to_string().starts_with("kh:")),
            }
        }
    }

    #[test]
    fn known_hosts_syntax_errors_name_the_line() {
        let err = KnownHosts::parse(
            Path::new("/etc/rota/known_hosts"),
            "# ok\nhost ssh-ed25519\n",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "/etc/rota/known_hosts:2: expected `hosts key-type base64-key [comment]`"
        );
        let err =
            KnownHosts::parse(Path::new("kh"), "host ssh-ed25519 !!!notbase64\n").unwrap_err();
        assert!(
            err.to_string().starts_with("kh:1: key is not base64"),
            "{err}"
        );
    }
}
