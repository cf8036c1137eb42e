//! Leader election on a `coordination.k8s.io/v1` Lease.
//!
//! One Lease per rota version (`kube::ownership::lease_name`), so that two versions running
//! side by side each have one leader, and within a version only the leader acts. The
//! protocol is the usual one: the holder renews `renewTime` well within
//! `leaseDurationSeconds`; a candidate takes the Lease over only when it has expired. Every
//! write carries the `resourceVersion` it read, so of two candidates racing for an expired
//! Lease exactly one wins (the other gets 409 Conflict and stays a follower).

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};

/// A candidate for the leadership of one Lease.
pub struct Elector {
    api: Api<Lease>,
    pub name: String,
    pub identity: String,
    pub duration: Duration,
}

fn micro(t: DateTime<Utc>) -> MicroTime {
    MicroTime(
        k8s_openapi::jiff::Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}

fn chrono_of(t: &MicroTime) -> DateTime<Utc> {
    DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().max(0) as u32)
        .unwrap_or_default()
}

/// Whether a Lease held by someone else may be taken over at `now` (pure).
pub fn expired(spec: &LeaseSpec, now: DateTime<Utc>) -> bool {
    let Some(holder) = spec.holder_identity.as_deref() else {
        return true;
    };
    if holder.is_empty() {
        return true;
    }
    let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else {
        return true;
    };
    let secs = i64::from(spec.lease_duration_seconds.unwrap_or(15));
    chrono_of(renewed) + chrono::Duration::seconds(secs) < now
}

impl Elector {
    pub fn new(client: kube::Client, namespace: &str, name: String, identity: String) -> Self {
        Elector {
            api: Api::namespaced(client, namespace),
            name,
            identity,
            duration: Duration::from_secs(15),
        }
    }

    /// Try to become (or stay) the leader at `now`. `Ok(true)` when this candidate holds the
    /// Lease after the call.
    pub async fn try_acquire(&self, now: DateTime<Utc>) -> Result<bool, kube::Error> {
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
                    Ok(_) => Ok(true),
                    // Someone else created it first: they lead.
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                };
            }
        };
        let spec = current.spec.clone().unwrap_or_default();
        let held_by_me = spec.holder_identity.as_deref() == Some(self.identity.as_str());
        if !held_by_me && !expired(&spec, now) {
            return Ok(false);
        }
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!held_by_me);
        let acquired = if held_by_me {
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
            Ok(_) => Ok(true),
            // Another candidate wrote first (renewed or took over): not ours.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
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

    #[test]
    fn a_lease_expires_a_duration_after_its_last_renewal() {
        let at = |s| DateTime::from_timestamp(s, 0).unwrap();
        assert!(!expired(&spec(Some("a"), Some(100)), at(110)));
        assert!(!expired(&spec(Some("a"), Some(100)), at(115)));
        assert!(expired(&spec(Some("a"), Some(100)), at(116)));
        assert!(expired(&spec(None, Some(100)), at(100)));
        assert!(expired(&spec(Some("a"), None), at(0)));
    }
}
