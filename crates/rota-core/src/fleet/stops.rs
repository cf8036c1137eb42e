//! The fleet-wide stop (`rota stop`): orders written to the fleet repo without a review, on a
//! ref of their own ([`STOP_REF`], one commit per order, the order in [`ORDER_FILE`]), and the
//! fold that says which stops are in force for which pool. Pure: the agent reads the ref's
//! commits and checks their signatures at the edge (`rota::agent::stops`), then hands them in
//! oldest first as [`Written`] orders.
//!
//! Trust: an order signed by a key the fleet's commit signers trust is [`Trust::Signed`],
//! any other (unsigned, unknown key, no signers configured) [`Trust::Unverified`]. Every stop
//! holds whatever its trust (a stop only ever holds a rotation where it is, the safe side),
//! but a clear lifts only the stops it names that are no more trusted than itself: an
//! unverified clear pushed by someone who only has push rights cannot lift a signed stop.
//! And since a stop in force is carried in each pool's NodePoolRotation spec, only a clear
//! naming it lifts it: deleting or rewriting the ref lifts nothing ([`Stops::for_pool`]).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The ref the orders are written on, in the fleet repo.
pub const STOP_REF: &str = "refs/rota/stop";
/// The file of an order commit's tree that holds the order.
pub const ORDER_FILE: &str = "order.json";
/// Longest reason kept (characters); the rest is cut.
pub const MAX_REASON_CHARS: usize = 200;
/// Largest order file read (bytes): an order is a few lines.
pub const MAX_ORDER_BYTES: usize = 16 * 1024;
/// Most orders read from the ref, newest first (years of incidents are a few hundred).
pub const MAX_ORDERS: usize = 10_000;

/// How far an order's author is vouched for.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum Trust {
    /// Not signed by a trusted key (or no signers configured): who pushed it is all we know.
    #[default]
    Unverified,
    /// Signed by a key the fleet's commit signers trust.
    Signed,
}

impl Trust {
    pub fn as_str(self) -> &'static str {
        match self {
            Trust::Unverified => "unverified",
            Trust::Signed => "signed",
        }
    }
}

/// What an order asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    Stop,
    Clear,
}

/// One order, as `rota stop` writes it in [`ORDER_FILE`].
///
/// ```json
/// {"action": "stop", "wave": "main", "reason": "INC-4711: elevated 5xx in eu-west"}
/// {"action": "clear", "wave": "main", "clears": ["<the stop's commit id>"]}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Order {
    pub action: Action,
    /// The wave it stops (absent: every wave).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave: Option<String>,
    /// The cluster it stops (absent: every cluster of the scope).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Why (a stop's is required).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// A clear: the commit ids of the stops it lifts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clears: Vec<String>,
}

impl Order {
    /// Reads an order file. The error names the file, and the line, column and field where
    /// JSON says so.
    pub fn parse(bytes: &[u8]) -> Result<Order, String> {
        if bytes.len() > MAX_ORDER_BYTES {
            return Err(format!(
                "{ORDER_FILE}: {} bytes, more than the {MAX_ORDER_BYTES} an order may have",
                bytes.len()
            ));
        }
        let order: Order = serde_json::from_slice(bytes).map_err(|e| {
            format!(
                "{ORDER_FILE}:{}:{}: {}",
                e.line(),
                e.column(),
                crate::sanitize::line(&e.to_string())
            )
        })?;
        order.check().map_err(|e| format!("{ORDER_FILE}: {e}"))?;
        Ok(order)
    }

    /// The semantic checks: names are DNS labels, a stop has a reason, a clear names stops.
    pub fn check(&self) -> Result<(), String> {
        for (field, name) in [("wave", &self.wave), ("cluster", &self.cluster)] {
            if let Some(n) = name
                && !is_label(n)
            {
                return Err(format!(
                    "field {field}: {:?} is not a DNS-1123 label",
                    crate::sanitize::line(n)
                ));
            }
        }
        match self.action {
            Action::Stop if self.reason.trim().is_empty() => {
                Err("field reason: a stop says why (rota stop --reason TEXT)".into())
            }
            Action::Stop if !self.clears.is_empty() => {
                Err("field clears: only a clear names stops to lift".into())
            }
            Action::Clear if self.clears.is_empty() => {
                Err("field clears: a clear names the stops it lifts".into())
            }
            _ => match self.clears.iter().find(|id| !is_commit_id(id)) {
                Some(bad) => Err(format!(
                    "field clears: {:?} is not a commit id (40 hex digits)",
                    crate::sanitize::line(bad)
                )),
                None => Ok(()),
            },
        }
    }

    /// The file's text, as `rota stop` writes it.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("serialisable") + "\n"
    }
}

/// One order as read from the ref: its commit, who wrote it, when, and how trusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// The order's commit id (40 hex digits): a stop's identity.
    pub id: String,
    pub order: Order,
    /// The verified signer when signed, else the commit's author as git records it.
    pub by: String,
    /// The commit's date (as its author set it: shown, never compared).
    pub at: DateTime<Utc>,
    pub trust: Trust,
}

/// A stop in force, as each pool's NodePoolRotation spec carries it (so that a restart, or a
/// ref that moved back, keeps it held).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetStop {
    /// The stop's commit id on the stop ref.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    pub reason: String,
    /// Who stopped it (the verified signer, or the commit's author).
    pub by: String,
    #[schemars(with = "String")]
    pub at: DateTime<Utc>,
    #[serde(default)]
    pub trust: Trust,
}

impl FleetStop {
    fn of(w: &Written) -> FleetStop {
        let mut reason = crate::sanitize::line(w.order.reason.trim()).into_owned();
        if let Some((cut, _)) = reason.char_indices().nth(MAX_REASON_CHARS) {
            reason.truncate(cut);
            reason.push('…');
        }
        FleetStop {
            id: w.id.clone(),
            wave: w.order.wave.clone(),
            cluster: w.order.cluster.clone(),
            reason,
            by: crate::sanitize::line(&w.by).into_owned(),
            at: w.at,
            trust: w.trust,
        }
    }

    /// Whether it holds the pools of `cluster` (in `wave`).
    pub fn applies(&self, cluster: &str, wave: &str) -> bool {
        self.wave.as_deref().is_none_or(|w| w == wave)
            && self.cluster.as_deref().is_none_or(|c| c == cluster)
    }

    /// `the whole fleet`, `wave main`, `cluster prod-use1`, `cluster prod-use1 of wave main`.
    pub fn scope(&self) -> String {
        scope(self.wave.as_deref(), self.cluster.as_deref())
    }

    /// The id as shown: its first 12 digits.
    pub fn short_id(&self) -> &str {
        &self.id[..self.id.len().min(12)]
    }

    /// `fleet stop 1a2b3c4d5e6f (wave main) by alice, signed, at <time>: <reason>`.
    pub fn describe(&self) -> String {
        format!(
            "fleet stop {} ({}) by {}, {}, at {}: {}",
            self.short_id(),
            self.scope(),
            self.by,
            self.trust.as_str(),
            self.at.to_rfc3339(),
            self.reason
        )
    }

    /// The command that lifts it.
    pub fn clear_command(&self) -> String {
        let mut s = "rota stop --clear".to_string();
        if let Some(w) = &self.wave {
            s.push_str(&format!(" --wave {w}"));
        }
        if let Some(c) = &self.cluster {
            s.push_str(&format!(" --cluster {c}"));
        }
        s
    }
}

/// A scope in words.
pub fn scope(wave: Option<&str>, cluster: Option<&str>) -> String {
    match (wave, cluster) {
        (None, None) => "the whole fleet".into(),
        (Some(w), None) => format!("wave {w}"),
        (None, Some(c)) => format!("cluster {c}"),
        (Some(w), Some(c)) => format!("cluster {c} of wave {w}"),
    }
}

/// What the ref says: the stops in force, the stops cleared (with the clear's trust), and the
/// clears refused (for the log and `rota stop --list`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stops {
    /// Oldest first.
    pub in_force: Vec<FleetStop>,
    /// Stop id → the trust of the clear that lifted it.
    pub cleared: BTreeMap<String, Trust>,
    /// Why each refused clear (or unreadable order) did nothing.
    pub refused: Vec<String>,
}

/// Applies `orders`, oldest first. A clear lifts each stop it names that is in force and no
/// more trusted than itself; a stop it names that is more trusted stays, and the refusal is
/// recorded. An order repeated (the same commit twice) counts once.
pub fn fold(orders: &[Written]) -> Stops {
    let mut out = Stops::default();
    for w in orders {
        match w.order.action {
            Action::Stop => {
                if !out.in_force.iter().any(|s| s.id == w.id) && !out.cleared.contains_key(&w.id) {
                    out.in_force.push(FleetStop::of(w));
                }
            }
            Action::Clear => {
                for id in &w.order.clears {
                    let Some(at) = out.in_force.iter().position(|s| &s.id == id) else {
                        continue;
                    };
                    let stop = &out.in_force[at];
                    if w.trust >= stop.trust {
                        out.cleared.insert(id.clone(), w.trust);
                        out.in_force.remove(at);
                    } else {
                        out.refused.push(format!(
                            "clear {} by {} ({}) cannot lift {}: a clear must be at least as trusted as the stop",
                            &w.id[..w.id.len().min(12)],
                            crate::sanitize::line(&w.by),
                            w.trust.as_str(),
                            stop.describe()
                        ));
                    }
                }
            }
        }
    }
    out
}

impl Stops {
    /// The stop that holds a pool of `cluster` in `wave`, given the stop its spec carries
    /// now (`held`). The held stop stays until a clear at least as trusted lifts it (a ref
    /// deleted or moved back to before the stop lifts nothing); otherwise the oldest stop in
    /// force whose scope takes the pool.
    pub fn for_pool(
        &self,
        cluster: &str,
        wave: &str,
        held: Option<&FleetStop>,
    ) -> Option<FleetStop> {
        if let Some(h) = held {
            let lifted = self.cleared.get(&h.id).is_some_and(|t| *t >= h.trust);
            if !lifted {
                // The ref's own copy, when it still has it (the same order; kept as held).
                return Some(h.clone());
            }
        }
        self.in_force
            .iter()
            .find(|s| s.applies(cluster, wave))
            .cloned()
    }

    /// The stops in force with exactly this scope (what `rota stop --clear` with these flags
    /// lifts).
    pub fn with_scope(&self, wave: Option<&str>, cluster: Option<&str>) -> Vec<&FleetStop> {
        self.in_force
            .iter()
            .filter(|s| s.wave.as_deref() == wave && s.cluster.as_deref() == cluster)
            .collect()
    }
}

fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_commit_id(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(h: u32) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(&format!("2026-11-29T{h:02}:00:00Z"))
            .unwrap()
            .with_timezone(&Utc)
    }

    fn id(n: u8) -> String {
        format!("{n:02x}").repeat(20)
    }

    fn stop(n: u8, wave: Option<&str>, cluster: Option<&str>, trust: Trust) -> Written {
        Written {
            id: id(n),
            order: Order {
                action: Action::Stop,
                wave: wave.map(Into::into),
                cluster: cluster.map(Into::into),
                reason: format!("incident {n}"),
                clears: vec![],
            },
            by: "ana".into(),
            at: at(n.into()),
            trust,
        }
    }

    fn clear(n: u8, clears: &[u8], trust: Trust) -> Written {
        Written {
            id: id(n),
            order: Order {
                action: Action::Clear,
                wave: None,
                cluster: None,
                reason: String::new(),
                clears: clears.iter().map(|c| id(*c)).collect(),
            },
            by: "mallory".into(),
            at: at(n.into()),
            trust,
        }
    }

    #[test]
    fn a_stop_holds_its_scope_only() {
        let s = fold(&[stop(1, Some("main"), None, Trust::Signed)]);
        assert!(s.for_pool("prod-use1", "main", None).is_some());
        assert!(s.for_pool("canary", "canary", None).is_none());
        let s = fold(&[stop(1, None, Some("prod-use1"), Trust::Signed)]);
        assert!(s.for_pool("prod-use1", "main", None).is_some());
        assert!(s.for_pool("prod-euw1", "main", None).is_none());
        let s = fold(&[stop(1, None, None, Trust::Unverified)]);
        assert!(s.for_pool("anything", "any", None).is_some());
        let s = fold(&[stop(1, Some("main"), Some("prod-use1"), Trust::Signed)]);
        assert!(s.for_pool("prod-use1", "main", None).is_some());
        assert!(s.for_pool("prod-use1", "canary", None).is_none());
    }

    #[test]
    fn a_clear_at_least_as_trusted_lifts_the_stop() {
        for (stop_trust, clear_trust) in [
            (Trust::Signed, Trust::Signed),
            (Trust::Unverified, Trust::Signed),
            (Trust::Unverified, Trust::Unverified),
        ] {
            let s = fold(&[stop(1, None, None, stop_trust), clear(2, &[1], clear_trust)]);
            assert!(s.in_force.is_empty(), "{stop_trust:?} by {clear_trust:?}");
            assert!(s.refused.is_empty());
            let held = FleetStop::of(&stop(1, None, None, stop_trust));
            assert_eq!(s.for_pool("c", "w", Some(&held)), None);
        }
    }

    #[test]
    fn a_forged_clear_cannot_lift_a_signed_stop() {
        let s = fold(&[
            stop(1, Some("main"), None, Trust::Signed),
            clear(2, &[1], Trust::Unverified),
        ]);
        assert_eq!(s.in_force.len(), 1);
        assert_eq!(s.refused.len(), 1);
        assert!(
            s.refused[0].contains("cannot lift fleet stop 010101010101 (wave main) by ana, signed"),
            "{}",
            s.refused[0]
        );
        assert!(s.for_pool("c", "main", None).is_some());
        // A signed clear after it does.
        let mut orders = vec![
            stop(1, Some("main"), None, Trust::Signed),
            clear(2, &[1], Trust::Unverified),
        ];
        orders.push(clear(3, &[1], Trust::Signed));
        assert!(fold(&orders).for_pool("c", "main", None).is_none());
    }

    #[test]
    fn a_ref_rewritten_to_before_the_stop_lifts_nothing() {
        let held = FleetStop::of(&stop(1, None, None, Trust::Signed));
        // The ref now holds no order at all, or other orders only.
        for orders in [
            vec![],
            vec![stop(5, Some("other"), None, Trust::Unverified)],
        ] {
            let s = fold(&orders);
            assert_eq!(s.for_pool("c", "w", Some(&held)), Some(held.clone()));
        }
        // An unverified clear of it, alone on a rewritten ref, does not either.
        let s = fold(&[clear(2, &[1], Trust::Unverified)]);
        assert_eq!(s.for_pool("c", "w", Some(&held)), Some(held.clone()));
    }

    #[test]
    fn orders_are_checked_and_errors_name_file_line_and_field() {
        let ok = Order::parse(br#"{"action":"stop","wave":"main","reason":"INC-1"}"#).unwrap();
        assert_eq!(ok.wave.as_deref(), Some("main"));
        assert_eq!(Order::parse(ok.to_json().as_bytes()).unwrap(), ok);
        let e = Order::parse(b"{\n\"action\": \"stop\",\n\"reasn\": \"x\"}").unwrap_err();
        assert!(e.starts_with("order.json:3:"), "{e}");
        assert!(e.contains("reasn"), "{e}");
        let e = Order::parse(br#"{"action":"stop"}"#).unwrap_err();
        assert!(e.contains("field reason"), "{e}");
        let e = Order::parse(br#"{"action":"stop","wave":"Main!","reason":"x"}"#).unwrap_err();
        assert!(e.contains("field wave"), "{e}");
        let e = Order::parse(br#"{"action":"clear","clears":["HEAD"]}"#).unwrap_err();
        assert!(e.contains("field clears"), "{e}");
        let e = Order::parse(br#"{"action":"clear"}"#).unwrap_err();
        assert!(e.contains("field clears"), "{e}");
        let big = vec![b' '; MAX_ORDER_BYTES + 1];
        assert!(Order::parse(&big).unwrap_err().contains("more than"));
    }

    #[test]
    fn a_reason_is_one_clean_line_of_bounded_length() {
        let mut w = stop(1, None, None, Trust::Unverified);
        w.order.reason = format!("line\x1b[31m one\n{}", "x".repeat(500));
        let s = FleetStop::of(&w);
        assert!(!s.reason.contains('\n') && !s.reason.contains('\x1b'));
        assert!(s.reason.chars().count() <= MAX_REASON_CHARS + 1);
    }

    #[test]
    fn with_scope_is_exact() {
        let s = fold(&[
            stop(1, Some("main"), None, Trust::Signed),
            stop(2, None, None, Trust::Signed),
            stop(3, Some("main"), Some("c"), Trust::Signed),
        ]);
        let ids = |v: Vec<&FleetStop>| v.iter().map(|s| s.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(s.with_scope(Some("main"), None)), vec![id(1)]);
        assert_eq!(ids(s.with_scope(None, None)), vec![id(2)]);
        assert_eq!(ids(s.with_scope(Some("main"), Some("c"))), vec![id(3)]);
    }
}
