//! Promotion evidence that a pusher cannot forge: each agent signs its pools' completion and
//! gate-failure records with its own SSH key (`ssh-keygen -Y sign`, namespace
//! `rota-records`), and readers accept a cluster's records only when they verify against an
//! allowed-signers file for agents under that cluster's name (`ssh-keygen -Y verify -I
//! <cluster>`), with key validity judged now.
//!
//! What is signed is an exact byte string kept in the note next to its signature, so a reader
//! verifies the bytes it was given and only then parses them (an agent of another version, with
//! more fields in its records, still verifies). The payload names the cluster and the fleet
//! commit it speaks for: a signed note copied onto another commit or another cluster's ref
//! holds nothing.
//!
//! ```json
//! "signed": {
//!   "payload": "{\"cluster\":\"canary-use1\",\"commit\":\"4be1c0a2...\",\"pools\":[...]}",
//!   "signature": "-----BEGIN SSH SIGNATURE-----\n..."
//! }
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::source::trust;
use rota_core::waves::PoolRecord;

/// The `ssh-keygen -Y` namespace of record signatures (never `git`: a commit signature can
/// never pass for a record signature, nor the other way round).
pub const NAMESPACE: &str = "rota-records";

/// How long a verification verdict is reused before ssh-keygen is asked again (key validity
/// changes with time; a pass of the agent reads every cluster's records every resync).
const VERDICT_TTL: Duration = Duration::from_secs(300);
/// Verdicts cached at most (one per cluster and note).
const VERDICT_CACHE: usize = 4096;

/// A note's signed records.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SignedRecords {
    /// The exact signed bytes: a JSON [`Payload`].
    pub payload: String,
    /// An armored SSH signature over `payload`.
    pub signature: String,
}

/// What an agent signs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    pub cluster: String,
    pub commit: String,
    pub pools: Vec<PoolRecord>,
}

/// The keys of records: this agent's signing key, and who may sign for which cluster.
#[derive(Debug, Clone, Default)]
pub struct EvidenceKeys {
    /// This agent's SSH private key: its records are signed with it.
    pub signing_key: Option<PathBuf>,
    /// An allowed-signers file whose principals are cluster names (`canary-use1
    /// namespaces="rota-records" ssh-ed25519 AAAA...`). Set: only records signed by their
    /// cluster's key count; unset: records count when they come from their cluster's ref.
    pub agent_signers: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    #[error("signing records with {key}: {message}")]
    Sign { key: PathBuf, message: String },
    #[error("verifying records: {0}")]
    Verifier(#[from] trust::TrustError),
}

impl EvidenceError {
    /// A stable, low-cardinality reason for logs and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            EvidenceError::Sign { .. } => "SigningFailed",
            EvidenceError::Verifier(_) => "VerifierFailed",
        }
    }
}

/// The payload text for `pools` of `cluster` on `commit`.
pub fn payload(cluster: &str, commit: &str, pools: &[PoolRecord]) -> String {
    serde_json::to_string(&Payload {
        cluster: cluster.into(),
        commit: commit.into(),
        pools: pools.to_vec(),
    })
    .expect("serialisable")
}

/// Signs `payload` with the SSH private key `key`.
pub fn sign(key: &Path, payload: &str) -> Result<SignedRecords, EvidenceError> {
    let err = |message: String| EvidenceError::Sign {
        key: key.to_path_buf(),
        message,
    };
    let mut cmd = Command::new("ssh-keygen");
    cmd.args(["-q", "-Y", "sign", "-n", NAMESPACE, "-f"])
        .arg(key);
    let (ok, out, stderr) = trust::run_with_input("ssh-keygen", cmd, payload.as_bytes())
        .map_err(|e| err(e.to_string()))?;
    if !ok || !out.starts_with("-----BEGIN SSH SIGNATURE-----") {
        return Err(err(trust::first_line(&stderr, &out).to_string()));
    }
    Ok(SignedRecords {
        payload: payload.to_string(),
        signature: out,
    })
}

/// Why records were not accepted (for the log; a rejected note holds nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    Unsigned,
    BadSignature(String),
    /// The payload speaks for another cluster or another commit than where it was found.
    Misplaced(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Unsigned => f.write_str("the records are not signed"),
            Refused::BadSignature(why) => {
                write!(f, "the records' signature does not verify: {why}")
            }
            Refused::Misplaced(why) => f.write_str(why),
        }
    }
}

/// A cached verdict per (cluster, signed records): when it was reached, and what.
type Verdicts = HashMap<(String, SignedRecords), (Instant, Result<(), String>)>;

/// Verifies notes' signed records against an agents' allowed-signers file, caching verdicts.
#[derive(Debug)]
pub struct RecordVerifier {
    signers: PathBuf,
    verdicts: Mutex<Verdicts>,
}

impl RecordVerifier {
    pub fn new(signers: &Path) -> Self {
        RecordVerifier {
            signers: signers.to_path_buf(),
            verdicts: Mutex::new(HashMap::new()),
        }
    }

    /// The records `signed` holds for `cluster` on `commit`, if they are signed by that
    /// cluster's key and name that cluster and commit. `Err(EvidenceError)`: ssh-keygen
    /// could not run (retry; nothing is accepted meanwhile).
    pub fn accept(
        &self,
        cluster: &str,
        commit: &str,
        signed: Option<&SignedRecords>,
    ) -> Result<Result<Vec<PoolRecord>, Refused>, EvidenceError> {
        let Some(signed) = signed else {
            return Ok(Err(Refused::Unsigned));
        };
        if let Err(why) = self.verify(cluster, signed)? {
            return Ok(Err(Refused::BadSignature(why)));
        }
        let p: Payload = match serde_json::from_str(&signed.payload) {
            Ok(p) => p,
            Err(e) => return Ok(Err(Refused::Misplaced(format!("unreadable payload: {e}")))),
        };
        if p.cluster != cluster || p.commit != commit {
            return Ok(Err(Refused::Misplaced(format!(
                "signed for cluster {} on commit {}, found for cluster {cluster} on {commit}",
                p.cluster, p.commit
            ))));
        }
        Ok(Ok(p.pools))
    }

    /// Whether `signed.signature` is the signature of `cluster`'s key over `signed.payload`
    /// (any payload: the ledger's appends are verified here too).
    pub(crate) fn verify(
        &self,
        cluster: &str,
        signed: &SignedRecords,
    ) -> Result<Result<(), String>, EvidenceError> {
        let key = (cluster.to_string(), signed.clone());
        if let Some((at, verdict)) = self.verdicts.lock().expect("not poisoned").get(&key)
            && at.elapsed() < VERDICT_TTL
        {
            return Ok(verdict.clone());
        }
        let sig = trust::temp_file(signed.signature.as_bytes())?;
        let mut cmd = Command::new("ssh-keygen");
        cmd.args(["-Y", "verify", "-n", NAMESPACE, "-f"])
            .arg(&self.signers)
            .args(["-I", cluster, "-s"])
            .arg(sig.path());
        let (ok, out, err) = trust::run_with_input("ssh-keygen", cmd, signed.payload.as_bytes())?;
        let verdict = if ok {
            Ok(())
        } else {
            Err(trust::first_line(&err, &out).to_string())
        };
        let mut cache = self.verdicts.lock().expect("not poisoned");
        if cache.len() >= VERDICT_CACHE {
            cache.clear();
        }
        cache.insert(key, (Instant::now(), verdict.clone()));
        Ok(verdict)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_names_cluster_and_commit() {
        let p = payload("canary-1", "abc", &[PoolRecord::new("canary-1", "general")]);
        let back: Payload = serde_json::from_str(&p).unwrap();
        assert_eq!(back.cluster, "canary-1");
        assert_eq!(back.commit, "abc");
        assert_eq!(back.pools.len(), 1);
    }
}
