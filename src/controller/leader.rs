//! Leader election on a `coordination.k8s.io/v1` Lease, and the leadership every side effect
//! checks first.
//!
//! One Lease per rota version (`kube::ownership::lease_name`), so that two versions running
//! side by side each have one leader, and within a version only the leader acts (invariant
//! 7). The protocol is client-go's:
//!
//! - The holder renews in a task of its own ([`Elector::spawn`]), every
//!   [`Elector::retry_period`], whatever the controller is doing: a long pass can no longer
//!   outlive the lease.
//! - The holder counts its lease from the moment it *sent* the renewal that succeeded, on its
//!   own monotonic clock (tokio's `Instant`), and acts only while at least
//!   [`Elector::margin`] of it is left ([`Leadership::check`]). Example with the defaults
//!   (15 s lease, 3 s retry, 5 s margin): a renewal sent at t=0 that succeeds lets the holder
//!   act until t=10; if every renewal after it fails, it stops acting at t=10, five seconds
//!   before anyone else may take the lease.
//! - A candidate never compares the holder's `renewTime` with its own wall clock (the two
//!   machines' clocks may disagree by more than the lease). It notes when the Lease record
//!   it observes last *changed*, on its local monotonic clock, and takes over only when the
//!   record stayed the same for a whole `leaseDurationSeconds` ([`Observed::expired`]).
//! - Every write carries the `resourceVersion` it read, so of two candidates racing for an
//!   expired Lease exactly one wins (the other gets 409 Conflict and stays a standby).
//!
//! The [`Fence`] (holder identity and `leaseTransitions`) goes into every status the leader
//! writes: a controller whose leadership ended finds a newer fence in the status and refuses
//! to write over it (see `controller::apply`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use rota_core::rotate::resource::Fence;

/// Why this process may not act now.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// Another replica holds the Lease, or the election has not answered yet.
    #[error("not the leader: this replica is a standby")]
    NotHeld,
    /// This replica held the Lease but could not renew it in time; it stops acting before
    /// the Lease can expire for the others.
    #[error(
        "lease {lease} not renewed in time ({left_ms} ms left, margin {margin_ms} ms): not acting"
    )]
    Expiring {
        lease: String,
        left_ms: u64,
        margin_ms: u64,
    },
}

#[derive(Debug, Default)]
struct Held {
    /// `Some` once an election attempt answered (either way): `/readyz` knows the state.
    decided: bool,
    /// The lease is ours until then (local monotonic clock), with this fence.
    until: Option<(Instant, Fence)>,
    lease: String,
    margin: Duration,
}

/// Whether this process leads now: shared by the renewal task (which writes it) and every
/// part of the process that acts (which checks it right before each side effect).
#[derive(Clone, Debug, Default)]
pub struct Leadership(Arc<Mutex<Held>>);

impl Leadership {
    /// A leadership nobody granted yet: not leading until an election wins.
    pub fn new() -> Leadership {
        Leadership::default()
    }

    /// `Ok(fence)` when the Lease is ours with at least the margin left, on the local
    /// monotonic clock.
    pub fn check(&self) -> Result<Fence, LeaseError> {
        let h = self.0.lock().expect("leadership lock");
        let Some((until, fence)) = &h.until else {
            return Err(LeaseError::NotHeld);
        };
        let left = until.saturating_duration_since(Instant::now());
        if left <= h.margin {
            return Err(LeaseError::Expiring {
                lease: h.lease.clone(),
                left_ms: left.as_millis() as u64,
                margin_ms: h.margin.as_millis() as u64,
            });
        }
        Ok(fence.clone())
    }

    /// Whether [`check`](Self::check) passes now.
    pub fn leading(&self) -> bool {
        self.check().is_ok()
    }

    /// `None` until the first election attempt answered; then whether this process leads.
    pub fn state(&self) -> Option<bool> {
        let decided = self.0.lock().expect("leadership lock").decided;
        decided.then(|| self.leading())
    }

    /// The fence of the lease held now, if any (whatever the margin).
    pub fn fence(&self) -> Option<Fence> {
        let h = self.0.lock().expect("leadership lock");
        h.until.as_ref().map(|(_, f)| f.clone())
    }

    /// What the renewal task writes on winning (or renewing) the Lease; the tests of the
    /// parts that check leadership grant it themselves.
    pub(super) fn grant(&self, lease: &str, until: Instant, margin: Duration, fence: Fence) {
        let mut h = self.0.lock().expect("leadership lock");
        h.decided = true;
        h.lease = lease.to_string();
        h.margin = margin;
        h.until = Some((until, fence));
    }

    /// What the renewal task writes on losing the Lease (or a test of a part that checks it).
    pub(super) fn lose(&self) {
        let mut h = self.0.lock().expect("leadership lock");
        h.decided = true;
        h.until = None;
    }
}

/// What identifies one version of a Lease record: a renewal or a takeover changes it.
#[derive(Clone, Debug, PartialEq)]
struct Record {
    holder: Option<String>,
    renew: Option<MicroTime>,
    acquire: Option<MicroTime>,
    transitions: Option<i32>,
    duration_secs: i32,
}

impl Record {
    fn of(spec: &LeaseSpec) -> Record {
        Record {
            holder: spec.holder_identity.clone().filter(|h| !h.is_empty()),
            renew: spec.renew_time.clone(),
            acquire: spec.acquire_time.clone(),
            transitions: spec.lease_transitions,
            duration_secs: spec.lease_duration_seconds.unwrap_or(15),
        }
    }
}

/// The Lease record as a candidate observed it, and when it last changed (local clock).
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    record: Record,
    changed_at: Instant,
}

impl Observed {
    /// Note `spec` as observed at `now`: the timer restarts only when the record changed.
    pub fn note(previous: Option<Observed>, spec: &LeaseSpec, now: Instant) -> Observed {
        let record = Record::of(spec);
        match previous {
            Some(p) if p.record == record => p,
            _ => Observed {
                record,
                changed_at: now,
            },
        }
    }

    /// Whether the lease may be taken over at `now` (pure): nobody holds it, or its record
    /// stayed unchanged for a whole lease duration on this process's clock. The holder's own
    /// timestamps are never compared with our clock.
    pub fn expired(&self, now: Instant) -> bool {
        if self.record.holder.is_none() {
            return true;
        }
        let secs = u64::try_from(self.record.duration_secs.max(1)).unwrap_or(15);
        let duration = Duration::from_secs(secs);
        now.saturating_duration_since(self.changed_at) >= duration
    }
}

/// A candidate for the leadership of one Lease.
pub struct Elector {
    api: Api<Lease>,
    pub name: String,
    pub identity: String,
    pub duration: Duration,
    observed: Option<Observed>,
    leadership: Leadership,
}

fn micro(t: DateTime<Utc>) -> MicroTime {
    MicroTime(
        k8s_openapi::jiff::Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}

/// Renews the lease in its own task until [`Renewal::release`] (or drop, which aborts it
/// without releasing, as a killed process would).
pub struct Renewal {
    task: Option<tokio::task::JoinHandle<()>>,
    stop: CancellationToken,
}

impl Renewal {
    /// Stop renewing and give the lease up so that a successor does not wait for expiry.
    pub async fn release(mut self) {
        self.stop.cancel();
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

#[cfg(test)]
impl Renewal {
    /// A renewal without a task, for tests of the parts that check leadership: the test
    /// grants the lease and takes it away itself (`Leadership::grant`, `Leadership::lose`).
    pub(super) fn by_the_test() -> Renewal {
        Renewal {
            task: None,
            stop: CancellationToken::new(),
        }
    }
}

impl Drop for Renewal {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

impl Elector {
    pub fn new(client: kube::Client, namespace: &str, name: String, identity: String) -> Self {
        Elector {
            api: Api::namespaced(client, namespace),
            name,
            identity,
            duration: Duration::from_secs(15),
            observed: None,
            leadership: Leadership::new(),
        }
    }

    /// Report into `leadership` (shared with the rest of the process) instead of a new one.
    pub fn with_leadership(mut self, leadership: Leadership) -> Self {
        self.leadership = leadership;
        self
    }

    pub fn leadership(&self) -> Leadership {
        self.leadership.clone()
    }

    /// How often the holder renews and a standby looks (client-go: 2 s of 15 s).
    pub fn retry_period(&self) -> Duration {
        self.duration / 5
    }

    /// The holder acts only while more than this is left of its lease (client-go's renew
    /// deadline is 10 s of 15 s: the same 5 s).
    pub fn margin(&self) -> Duration {
        self.duration / 3
    }

    /// Try to become (or stay) the leader; `now` is only written into the Lease for people
    /// to read. `Ok(true)` when this candidate holds the Lease after the call. Errors leave
    /// a held lease counting down: the holder stops acting once the margin is reached.
    pub async fn try_acquire(&mut self, now: DateTime<Utc>) -> Result<bool, kube::Error> {
        // The lease counts from before the request: the server may take its time to answer.
        let sent = Instant::now();
        let result = self.attempt(now, sent).await;
        match &result {
            Ok(Some(transitions)) => self.leadership.grant(
                &self.name,
                sent + self.duration,
                self.margin(),
                Fence {
                    holder: self.identity.clone(),
                    transitions: *transitions,
                },
            ),
            Ok(None) => self.leadership.lose(),
            Err(_) => {}
        }
        result.map(|r| r.is_some())
    }

    /// `Ok(Some(leaseTransitions))` when the Lease is ours after the call.
    async fn attempt(
        &mut self,
        now: DateTime<Utc>,
        sent: Instant,
    ) -> Result<Option<i32>, kube::Error> {
        let mine = |transitions: i32, acquired: Option<MicroTime>| LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.duration.as_secs() as i32),
            acquire_time: Some(acquired.unwrap_or_else(|| micro(now))),
            renew_time: Some(micro(now)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        };
        let current = match self.api.get_opt(&self.name).await? {
            Some(l) => l,
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(mine(0, None)),
                };
                return match self.api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(Some(0)),
                    // Someone else created it first: they lead.
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
                    Err(e) => Err(e),
                };
            }
        };
        let spec = current.spec.clone().unwrap_or_default();
        let held_by_me = spec.holder_identity.as_deref() == Some(self.identity.as_str());
        let observed = Observed::note(self.observed.take(), &spec, sent);
        let expired = observed.expired(sent);
        self.observed = Some(observed);
        if !held_by_me && !expired {
            return Ok(None);
        }
        // Renewing our own term keeps its transitions and acquire time; anything else (a
        // takeover, or a restarted process that finds its own name on the Lease) is a new
        // term, so that the fence moves on.
        let renewing = held_by_me && self.leadership.fence().is_some();
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!renewing);
        let acquired = if renewing {
            spec.acquire_time.clone()
        } else {
            None
        };
        let mut next = current.clone();
        next.spec = Some(mine(transitions, acquired));
        match self
            .api
            .replace(&self.name, &PostParams::default(), &next)
            .await
        {
            Ok(_) => Ok(Some(transitions)),
            // Another candidate wrote first (renewed or took over): not ours.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Run the election in a task of its own: renew every [`retry_period`](Self::retry_period)
    /// while leading, try again as often while standing by. `now` gives the wall time
    /// written into the Lease.
    pub fn spawn(mut self, now: impl Fn() -> DateTime<Utc> + Send + 'static) -> Renewal {
        let stop = CancellationToken::new();
        let token = stop.clone();
        let task = tokio::spawn(async move {
            loop {
                match self.try_acquire(now()).await {
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(lease = %self.name, error = %e, "leader election failed")
                    }
                }
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = tokio::time::sleep(self.retry_period()) => {}
                }
            }
            if self.leadership.fence().is_some() {
                self.leadership.lose();
                if let Err(e) = self.release().await {
                    tracing::warn!(error = %e, "releasing the lease failed");
                }
            }
        });
        Renewal {
            task: Some(task),
            stop,
        }
    }

    /// Give the Lease up (on a clean shutdown) so that a successor does not wait for expiry.
    pub async fn release(&self) -> Result<(), kube::Error> {
        if let Some(mut l) = self.api.get_opt(&self.name).await?
            && l.spec.as_ref().and_then(|s| s.holder_identity.as_deref())
                == Some(self.identity.as_str())
        {
            if let Some(s) = l.spec.as_mut() {
                s.holder_identity = None;
            }
            self.api
                .replace(&self.name, &PostParams::default(), &l)
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: Option<&str>, renewed: Option<i64>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(String::from),
            renew_time: renewed.map(|s| micro(DateTime::from_timestamp(s, 0).unwrap())),
            lease_duration_seconds: Some(15),
            ..LeaseSpec::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn another_holders_lease_expires_a_duration_after_its_record_last_changed_locally() {
        let t0 = Instant::now();
        let secs = |s| t0 + Duration::from_secs(s);
        let o = Observed::note(None, &spec(Some("a"), Some(100)), t0);
        assert!(!o.expired(secs(14)));
        assert!(o.expired(secs(15)));
        // A renewal seen at t=10 restarts the timer, whatever the holder's timestamps say.
        let o = Observed::note(Some(o), &spec(Some("a"), Some(50)), secs(10));
        assert!(!o.expired(secs(24)));
        assert!(o.expired(secs(25)));
        // The same record seen again does not restart it.
        let o = Observed::note(Some(o), &spec(Some("a"), Some(50)), secs(20));
        assert!(o.expired(secs(25)));
        // A holder whose clock is an hour ahead or behind makes no difference.
        let far = Observed::note(None, &spec(Some("a"), Some(100 + 3600)), t0);
        assert!(!far.expired(secs(14)));
        // Nobody holds it: free at once.
        assert!(Observed::note(None, &spec(None, Some(100)), t0).expired(t0));
        assert!(Observed::note(None, &spec(Some(""), None), t0).expired(t0));
    }

    #[tokio::test(start_paused = true)]
    async fn the_holder_acts_only_while_more_than_the_margin_is_left() {
        let l = Leadership::new();
        assert_eq!(l.state(), None);
        assert_eq!(l.check(), Err(LeaseError::NotHeld));
        let fence = Fence {
            holder: "a".into(),
            transitions: 3,
        };
        l.grant(
            "rota",
            Instant::now() + Duration::from_secs(15),
            Duration::from_secs(5),
            fence.clone(),
        );
        assert_eq!(l.check(), Ok(fence));
        assert_eq!(l.state(), Some(true));
        tokio::time::sleep(Duration::from_secs(9)).await;
        assert!(l.leading());
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(matches!(l.check(), Err(LeaseError::Expiring { .. })));
        l.lose();
        assert_eq!(l.state(), Some(false));
    }
}
