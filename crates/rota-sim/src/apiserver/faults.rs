//! Faults of the simulated API server: what a loaded or flaky control plane answers.
//!
//! Drawn per request from a seeded generator: API Priority and Fairness throttling (429
//! `TooManyRequests` with no disruption-budget cause, unlike a PDB refusal), server errors
//! (500), and writes that take effect and still answer 504 (the response was lost; the
//! client cannot tell). Watches are never faulted: a real server's watch either streams or
//! ends, and the controller's watches only wake it.
//!
//! ```yaml
//! throttleRate: 0.02      # 429 from API Priority and Fairness
//! serverErrorRate: 0.01   # 500
//! lostResponseRate: 0.01  # a write that took effect answers 504
//! paths: [/eviction]      # only these requests (empty: all)
//! ```

use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::super::store::ApiError;

/// How often each fault happens, as shares (0..=1) of requests.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ApiFaultProfile {
    /// Requests answered 429 by API Priority and Fairness (nothing happens).
    pub throttle_rate: f64,
    /// Requests answered 500 (nothing happens).
    pub server_error_rate: f64,
    /// Writes that take effect and then answer 504.
    pub lost_response_rate: f64,
    /// Only requests whose path contains one of these are faulted (`/eviction`: evictions
    /// only); empty: every request.
    pub paths: Vec<String>,
}

/// A profile that cannot be used, naming the field.
#[derive(Debug, thiserror::Error)]
pub enum ApiFaultError {
    #[error("{field}: {value} is not a share between 0 and 1")]
    Rate { field: &'static str, value: f64 },
    #[error("throttleRate + serverErrorRate is more than 1")]
    Sum,
}

impl ApiFaultProfile {
    pub fn check(&self) -> Result<(), ApiFaultError> {
        for (field, value) in [
            ("throttleRate", self.throttle_rate),
            ("serverErrorRate", self.server_error_rate),
            ("lostResponseRate", self.lost_response_rate),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(ApiFaultError::Rate { field, value });
            }
        }
        if self.throttle_rate + self.server_error_rate > 1.0 {
            return Err(ApiFaultError::Sum);
        }
        Ok(())
    }
}

/// The faults of one API server: a profile and its seeded generator. Cheap to clone; clones
/// share the generator.
#[derive(Clone)]
pub struct ApiFaults {
    profile: ApiFaultProfile,
    rng: Arc<Mutex<ChaCha8Rng>>,
    /// While set, every resource request fails (this client is cut off from the control
    /// plane: its lease renewals fail, so the lease expires while it still runs).
    partitioned: Arc<std::sync::atomic::AtomicBool>,
}

impl ApiFaults {
    pub fn new(seed: u64, profile: ApiFaultProfile) -> Result<Self, ApiFaultError> {
        profile.check()?;
        Ok(ApiFaults {
            profile,
            rng: Arc::new(Mutex::new(ChaCha8Rng::seed_from_u64(seed))),
            partitioned: Arc::default(),
        })
    }

    /// Cut this client off from the control plane (`true`) or reconnect it.
    pub fn partition(&self, on: bool) {
        self.partitioned
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// The error a partitioned client gets for every request.
    pub fn cut_off(&self) -> Option<ApiError> {
        self.partitioned
            .load(std::sync::atomic::Ordering::Relaxed)
            .then(|| ApiError::new(503, "ServiceUnavailable", "network partition (injected)"))
    }

    /// Whether faults may hit a request for `path`.
    pub fn applies_to(&self, path: &str) -> bool {
        self.profile.paths.is_empty() || self.profile.paths.iter().any(|p| path.contains(p))
    }

    /// The error a request is answered with before it is handled, if any.
    pub fn before(&self) -> Option<ApiError> {
        let p = &self.profile;
        if p.throttle_rate + p.server_error_rate <= 0.0 {
            return None;
        }
        let x: f64 = self.rng.lock().unwrap().random();
        if x < p.throttle_rate {
            return Some(apf_throttled());
        }
        if x < p.throttle_rate + p.server_error_rate {
            return Some(ApiError::internal("etcdserver: request timed out"));
        }
        None
    }

    /// Whether a write that was handled loses its response.
    pub fn lose_response(&self) -> bool {
        let rate = self.profile.lost_response_rate;
        rate > 0.0 && self.rng.lock().unwrap().random::<f64>() < rate
    }
}

/// What API Priority and Fairness answers a request it rejects: 429 with a retry delay and
/// no `DisruptionBudget` cause.
pub fn apf_throttled() -> ApiError {
    let mut e = ApiError::new(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
    );
    e.details = Some(json!({"retryAfterSeconds": 1}));
    e
}

/// What a write whose response was lost answers.
pub fn lost_response() -> ApiError {
    ApiError::new(
        504,
        "Timeout",
        "The server was unable to return a response in the time allotted, but may still be processing the request",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_checked_and_draws_repeat_with_the_seed() {
        let bad = ApiFaultProfile {
            throttle_rate: 1.5,
            ..ApiFaultProfile::default()
        };
        assert_eq!(
            ApiFaults::new(1, bad).err().unwrap().to_string(),
            "throttleRate: 1.5 is not a share between 0 and 1"
        );
        let p = ApiFaultProfile {
            throttle_rate: 0.3,
            server_error_rate: 0.3,
            lost_response_rate: 0.5,
            paths: vec![],
        };
        let draw = |seed| {
            let f = ApiFaults::new(seed, p.clone()).unwrap();
            (0..200)
                .map(|_| (f.before().map(|e| e.code), f.lose_response()))
                .collect::<Vec<_>>()
        };
        let a = draw(7);
        assert_eq!(a, draw(7));
        assert!(a.iter().any(|(c, _)| *c == Some(429)));
        assert!(a.iter().any(|(c, _)| *c == Some(500)));
        assert!(a.iter().any(|(c, _)| c.is_none()));
        assert!(a.iter().any(|(_, l)| *l));
        // An APF 429 names no disruption budget.
        assert!(apf_throttled().details.unwrap().get("causes").is_none());
    }
}
