//! Commit signature verification: when configured, rota acts only on commits signed by a
//! trusted key. SSH signatures are checked against an allowed-signers file with
//! `ssh-keygen -Y`, OpenPGP signatures against a keyring with `gpg`; the same tools and the
//! same checks `git verify-commit` uses, so a commit `git log --show-signature` calls good is
//! good here. A commit that fails gets a [`Rejection`] whose text goes into its `error`
//! status; the caller keeps the last good commit in force.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use git2::{Oid, Repository};

/// Which signatures are trusted. Both may be set: a commit signed either way is accepted.
#[derive(Debug, Clone, Default)]
pub struct TrustPolicy {
    /// An OpenSSH allowed-signers file (`principal[,principal] [namespaces="git"] key`).
    pub ssh_allowed_signers: Option<PathBuf>,
    /// Public keys (armored or binary, as `gpg --export` writes them) of trusted signers.
    pub gpg_keyring: Option<PathBuf>,
}

impl TrustPolicy {
    pub fn is_enabled(&self) -> bool {
        self.ssh_allowed_signers.is_some() || self.gpg_keyring.is_some()
    }
}

/// Why a commit is not trusted: stable reason plus a sentence for the status description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: RejectReason,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectReason {
    Unsigned,
    UnknownKey,
    BadSignature,
    /// Signed in a format this policy does not trust (e.g. OpenPGP with only SSH configured).
    UntrustedFormat,
    /// Revoked or expired key, or expired signature.
    KeyNotValid,
}

impl RejectReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::Unsigned => "Unsigned",
            RejectReason::UnknownKey => "UnknownKey",
            RejectReason::BadSignature => "BadSignature",
            RejectReason::UntrustedFormat => "UntrustedFormat",
            RejectReason::KeyNotValid => "KeyNotValid",
        }
    }
}

/// A commit signed by a trusted key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trusted {
    /// `ssh:<principal> <key fingerprint>` or `openpgp:<fingerprint> <user id>`.
    pub signer: String,
}

/// Failures of the verification machinery itself (not of the commit): retry, or fix setup.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("running {tool}: {message} (is it installed?)")]
    Tool { tool: &'static str, message: String },
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("reading commit {commit}: {message}")]
    Commit { commit: String, message: String },
}

/// Verifies commits against a [`TrustPolicy`]. Holds a private GnuPG home with only the
/// trusted keys imported, so the user's or system's keys never count.
#[derive(Debug)]
pub struct Verifier {
    allowed_signers: Option<PathBuf>,
    gpg_home: Option<tempfile::TempDir>,
}

impl Verifier {
    pub fn new(policy: &TrustPolicy) -> Result<Self, TrustError> {
        if let Some(p) = &policy.ssh_allowed_signers {
            std::fs::metadata(p).map_err(|e| TrustError::File {
                path: p.clone(),
                message: e.to_string(),
            })?;
        }
        let gpg_home = match &policy.gpg_keyring {
            None => None,
            Some(keyring) => {
                let home = tempfile::Builder::new()
                    .prefix("rota-gnupg-")
                    .tempdir()
                    .map_err(|e| TrustError::File {
                        path: std::env::temp_dir(),
                        message: e.to_string(),
                    })?;
                let out = gpg(home.path())
                    .arg("--import")
                    .arg(keyring)
                    .output()
                    .map_err(|e| TrustError::Tool {
                        tool: "gpg",
                        message: e.to_string(),
                    })?;
                let status = String::from_utf8_lossy(&out.stdout);
                if !out.status.success() || !status.contains("IMPORT_OK") {
                    return Err(TrustError::File {
                        path: keyring.clone(),
                        message: format!(
                            "no OpenPGP public key could be imported: {}",
                            String::from_utf8_lossy(&out.stderr).trim()
                        ),
                    });
                }
                Some(home)
            }
        };
        Ok(Verifier {
            allowed_signers: policy.ssh_allowed_signers.clone(),
            gpg_home,
        })
    }

    /// Checks one commit of `repo`, judging key validity now.
    pub fn verify(
        &self,
        repo: &Repository,
        commit: Oid,
    ) -> Result<Result<Trusted, Rejection>, TrustError> {
        self.verify_at(repo, commit, chrono::Utc::now())
    }

    /// Checks one commit of `repo`, judging the validity of SSH keys (`valid-after`,
    /// `valid-before` in allowed signers) at `now`, the time of verification. Never at the
    /// commit's own date: the committer sets that date, so a key retired yesterday would
    /// otherwise keep signing commits that claim to be from last year.
    pub fn verify_at(
        &self,
        repo: &Repository,
        commit: Oid,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Result<Trusted, Rejection>, TrustError> {
        let short = &commit.to_string()[..12];
        let (signature, data) = match repo.extract_signature(&commit, None) {
            Ok((s, d)) => (s.to_vec(), d.to_vec()),
            Err(e) if e.code() == git2::ErrorCode::NotFound => {
                return Ok(Err(Rejection {
                    reason: RejectReason::Unsigned,
                    message: format!(
                        "commit {short} is not signed; this fleet requires signed commits"
                    ),
                }));
            }
            Err(e) => {
                return Err(TrustError::Commit {
                    commit: commit.to_string(),
                    message: e.message().to_string(),
                });
            }
        };
        let committed_at = repo
            .find_commit(commit)
            .map(|c| c.committer().when().seconds())
            .map_err(|e| TrustError::Commit {
                commit: commit.to_string(),
                message: e.message().to_string(),
            })?;
        let armor = String::from_utf8_lossy(&signature);
        if armor.starts_with("-----BEGIN SSH SIGNATURE-----") {
            match &self.allowed_signers {
                Some(allowed) => verify_ssh(allowed, &signature, &data, now, committed_at, short),
                None => Ok(Err(untrusted_format(short, "SSH", "OpenPGP"))),
            }
        } else if armor.starts_with("-----BEGIN PGP SIGNATURE-----") {
            match &self.gpg_home {
                Some(home) => verify_gpg(home.path(), &signature, &data, short),
                None => Ok(Err(untrusted_format(short, "OpenPGP", "SSH"))),
            }
        } else {
            Ok(Err(Rejection {
                reason: RejectReason::UntrustedFormat,
                message: format!(
                    "commit {short} has a signature rota cannot verify (not SSH or OpenPGP)"
                ),
            }))
        }
    }
}

impl Drop for Verifier {
    fn drop(&mut self) {
        // gpg may have started an agent for the private home; do not leave it running.
        if let Some(home) = &self.gpg_home {
            let _ = Command::new("gpgconf")
                .arg("--homedir")
                .arg(home.path())
                .args(["--kill", "all"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn untrusted_format(short: &str, got: &str, trusted: &str) -> Rejection {
    Rejection {
        reason: RejectReason::UntrustedFormat,
        message: format!(
            "commit {short} is signed with {got}, but only {trusted} signers are trusted"
        ),
    }
}

fn gpg(home: &Path) -> Command {
    let mut c = Command::new("gpg");
    c.arg("--homedir")
        .arg(home)
        .args(["--batch", "--no-tty", "--status-fd", "1"])
        // Trust is "the key is in the keyring rota was given": no web of trust to consult.
        .args(["--trust-model", "always"])
        .stdin(Stdio::null());
    c
}

pub(crate) fn temp_file(contents: &[u8]) -> Result<tempfile::NamedTempFile, TrustError> {
    let mut f = tempfile::NamedTempFile::new().map_err(|e| TrustError::File {
        path: std::env::temp_dir(),
        message: e.to_string(),
    })?;
    f.write_all(contents)
        .and_then(|_| f.flush())
        .map_err(|e| TrustError::File {
            path: f.path().to_path_buf(),
            message: e.to_string(),
        })?;
    Ok(f)
}

/// Runs `cmd` with `stdin` as input; returns (success, stdout, stderr).
pub(crate) fn run_with_input(
    tool: &'static str,
    mut cmd: Command,
    stdin: &[u8],
) -> Result<(bool, String, String), TrustError> {
    let tool_err = |e: std::io::Error| TrustError::Tool {
        tool,
        message: e.to_string(),
    };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(tool_err)?;
    // The signed payload is small (one commit header); write it whole, then close stdin.
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(stdin)
        .map_err(tool_err)?;
    let out = child.wait_with_output().map_err(tool_err)?;
    // Killed (out of memory, a signal): the tool said nothing about the input. A transient
    // failure to retry, never a verdict on the commit.
    if out.status.code().is_none() {
        return Err(TrustError::Tool {
            tool,
            message: format!("terminated by a signal ({})", out.status),
        });
    }
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// `-Overify-time=` for ssh-keygen (local time, as ssh-keygen reads it, in UTC here).
fn verify_time_arg(at: chrono::DateTime<chrono::Utc>) -> String {
    format!("-Overify-time={}", at.format("%Y%m%d%H%M%SZ"))
}

fn verify_ssh(
    allowed: &Path,
    signature: &[u8],
    data: &[u8],
    now: chrono::DateTime<chrono::Utc>,
    committed_at: i64,
    short: &str,
) -> Result<Result<Trusted, Rejection>, TrustError> {
    let sig = temp_file(signature)?;
    // Which key signed, for messages (no trust decision: check-novalidate only parses).
    let mut check = Command::new("ssh-keygen");
    check
        .args(["-Y", "check-novalidate", "-n", "git", "-s"])
        .arg(sig.path());
    let (parsed, out, err) = run_with_input("ssh-keygen", check, data)?;
    if !parsed {
        return Ok(Err(Rejection {
            reason: RejectReason::BadSignature,
            message: format!(
                "commit {short} has a bad SSH signature: {}",
                first_line(&err, &out)
            ),
        }));
    }
    let fingerprint = out
        .split_whitespace()
        .find(|w| w.starts_with("SHA256:"))
        .unwrap_or("(unknown key)")
        .to_string();

    // Key validity (valid-after / valid-before) is judged now, at verification: the commit
    // date is whatever the committer wrote, so judging at it (as `git verify-commit` does)
    // lets a retired key sign "old" commits for ever.
    let find = |at: chrono::DateTime<chrono::Utc>| {
        let mut find = Command::new("ssh-keygen");
        find.args(["-Y", "find-principals", "-f"])
            .arg(allowed)
            .arg(verify_time_arg(at))
            .arg("-s")
            .arg(sig.path());
        run_with_input("ssh-keygen", find, b"")
    };
    let (found, principals, _) = find(now)?;
    let Some(principal) = principals.lines().next().filter(|p| found && !p.is_empty()) else {
        // Listed, but not valid now? Say so rather than "not in the file".
        let listed_then = chrono::DateTime::from_timestamp(committed_at, 0)
            .map(find)
            .transpose()?
            .filter(|(ok, p, _)| *ok && !p.trim().is_empty());
        if let Some((_, p, _)) = listed_then {
            return Ok(Err(Rejection {
                reason: RejectReason::KeyNotValid,
                message: format!(
                    "commit {short} is signed by SSH key {fingerprint} ({}), which is not valid now (valid-after/valid-before in {})",
                    p.lines().next().unwrap_or("").trim(),
                    allowed.display()
                ),
            }));
        }
        return Ok(Err(Rejection {
            reason: RejectReason::UnknownKey,
            message: format!(
                "commit {short} is signed by SSH key {fingerprint}, which is not in {}",
                allowed.display()
            ),
        }));
    };
    let mut verify = Command::new("ssh-keygen");
    verify
        .args(["-Y", "verify", "-n", "git", "-f"])
        .arg(allowed)
        .args(["-I", principal])
        .arg(verify_time_arg(now))
        .arg("-s")
        .arg(sig.path());
    let (good, out, err) = run_with_input("ssh-keygen", verify, data)?;
    if good {
        Ok(Ok(Trusted {
            signer: format!("ssh:{principal} {fingerprint}"),
        }))
    } else {
        Ok(Err(Rejection {
            reason: RejectReason::BadSignature,
            message: format!(
                "commit {short}: SSH signature by {principal} does not verify: {}",
                first_line(&err, &out)
            ),
        }))
    }
}

pub(crate) fn first_line<'a>(a: &'a str, b: &'a str) -> &'a str {
    a.lines()
        .chain(b.lines())
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no details")
}

fn verify_gpg(
    home: &Path,
    signature: &[u8],
    data: &[u8],
    short: &str,
) -> Result<Result<Trusted, Rejection>, TrustError> {
    let sig = temp_file(signature)?;
    let mut cmd = gpg(home);
    cmd.arg("--verify").arg(sig.path()).arg("-");
    let (_, status, _) = run_with_input("gpg", cmd, data)?;
    Ok(judge_gpg_status(&status, short))
}

/// Reads gpg's machine-readable `--status-fd` lines (doc/DETAILS in GnuPG). Exit codes are
/// not enough: gpg exits 0 for a good signature by an expired key.
fn judge_gpg_status(status: &str, short: &str) -> Result<Trusted, Rejection> {
    let mut good_uid = None;
    let mut valid_fpr = None;
    let mut errsig = None;
    for line in status.lines() {
        let Some(rest) = line.strip_prefix("[GNUPG:] ") else {
            continue;
        };
        let mut words = rest.splitn(3, ' ');
        let keyword = words.next().unwrap_or("");
        let arg1 = words.next().unwrap_or("");
        let tail = words.next().unwrap_or("");
        let reject = |reason, message: String| Err(Rejection { reason, message });
        match keyword {
            "GOODSIG" => good_uid = Some(tail.to_string()),
            "VALIDSIG" => valid_fpr = Some(arg1.to_string()),
            "BADSIG" => {
                return reject(
                    RejectReason::BadSignature,
                    format!("commit {short}: OpenPGP signature by key {arg1} does not verify"),
                );
            }
            "EXPKEYSIG" | "REVKEYSIG" | "EXPSIG" => {
                let what = match keyword {
                    "EXPKEYSIG" => "an expired key",
                    "REVKEYSIG" => "a revoked key",
                    _ => "an expired signature",
                };
                return reject(
                    RejectReason::KeyNotValid,
                    format!("commit {short} is signed with {what} ({arg1})"),
                );
            }
            "NO_PUBKEY" => {
                return reject(
                    RejectReason::UnknownKey,
                    format!(
                        "commit {short} is signed by OpenPGP key {arg1}, which is not in the trusted keyring"
                    ),
                );
            }
            // Followed by NO_PUBKEY when the key is missing, which says it better.
            "ERRSIG" => errsig = Some(arg1.to_string()),
            _ => {}
        }
    }
    if let Some(key) = errsig {
        return Err(Rejection {
            reason: RejectReason::BadSignature,
            message: format!("commit {short}: OpenPGP signature by key {key} cannot be checked"),
        });
    }
    match (valid_fpr, good_uid) {
        (Some(fpr), Some(uid)) => Ok(Trusted {
            signer: format!("openpgp:{fpr} {uid}"),
        }),
        _ => Err(Rejection {
            reason: RejectReason::BadSignature,
            message: format!("commit {short}: gpg did not report a good signature"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpg_status_lines() {
        let good = "[GNUPG:] NEWSIG\n[GNUPG:] KEY_CONSIDERED ABCD 0\n[GNUPG:] SIG_ID x 2026-11-22 1\n\
                    [GNUPG:] GOODSIG 1122334455667788 Fleet Admin <admin@acme.test>\n\
                    [GNUPG:] VALIDSIG ABCDEF0123456789ABCDEF0123456789ABCDEF01 2026-11-22 1 0 4 0 22 10 00 ABCDEF\n\
                    [GNUPG:] TRUST_UNDEFINED 0 pgp\n";
        assert_eq!(
            judge_gpg_status(good, "0123456789ab"),
            Ok(Trusted {
                signer:
                    "openpgp:ABCDEF0123456789ABCDEF0123456789ABCDEF01 Fleet Admin <admin@acme.test>"
                        .into()
            })
        );
        let expired =
            "[GNUPG:] EXPKEYSIG 1122334455667788 Old <old@acme.test>\n[GNUPG:] VALIDSIG AB 1\n";
        assert_eq!(
            judge_gpg_status(expired, "0123456789ab")
                .unwrap_err()
                .reason,
            RejectReason::KeyNotValid
        );
        let unknown = "[GNUPG:] ERRSIG 99AABB 1 10 00 1 9\n[GNUPG:] NO_PUBKEY 99AABB\n";
        assert_eq!(
            judge_gpg_status(unknown, "0123456789ab")
                .unwrap_err()
                .reason,
            RejectReason::UnknownKey
        );
        assert_eq!(
            judge_gpg_status("", "0123456789ab").unwrap_err().reason,
            RejectReason::BadSignature
        );
    }
}

/// What to do with a newly fetched commit once its signature was checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Act on this commit: it is the new last good one.
    Act { commit: Oid },
    /// Do not act: keep `last_good` in force (nothing, if no commit was ever good) and give
    /// `rejected` an `error` status with `reason`.
    Keep {
        last_good: Option<Oid>,
        rejected: Oid,
        reason: Rejection,
    },
}

/// The last commit that passed the trust check: a commit that fails never replaces it
/// (safety invariant 5). Pure bookkeeping; the caller verifies and reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LastGood {
    commit: Option<Oid>,
}

impl LastGood {
    pub fn new(commit: Option<Oid>) -> Self {
        LastGood { commit }
    }

    pub fn commit(&self) -> Option<Oid> {
        self.commit
    }

    /// Records the outcome of verifying `commit`.
    pub fn admit(&mut self, commit: Oid, verdict: Result<Trusted, Rejection>) -> Admission {
        match verdict {
            Ok(_) => {
                self.commit = Some(commit);
                Admission::Act { commit }
            }
            Err(reason) => Admission::Keep {
                last_good: self.commit,
                rejected: commit,
                reason,
            },
        }
    }
}
