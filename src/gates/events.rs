//! The events gate: too many events with the given reasons within a window fail the sample.

use async_trait::async_trait;
use chrono::Duration;

use super::gate::{Gate, GateError, GateInputs, Sample};
use crate::kube::summary::EventRecord;
use rota_core::fleet::resolved::{GateCheck, ResolvedGate};

pub struct EventsGate {
    name: String,
    reasons: Vec<String>,
    max: u32,
    window: Duration,
}

impl EventsGate {
    pub fn new(spec: &ResolvedGate) -> Result<EventsGate, GateError> {
        let GateCheck::Events {
            reasons,
            max,
            window,
        } = &spec.check
        else {
            unreachable!("EventsGate::new is only called for events gates")
        };
        if reasons.is_empty() {
            return Err(GateError::Invalid {
                gate: spec.name.clone(),
                why: "events gate lists no reasons".into(),
            });
        }
        Ok(EventsGate {
            name: spec.name.clone(),
            reasons: reasons.clone(),
            max: *max,
            window: Duration::from_std(window.0).unwrap_or(Duration::MAX),
        })
    }

    /// The sample for a set of events at `now` (pure). An event's `count` counts, so that a
    /// repeated event aggregated by the API server weighs as much as separate ones.
    pub fn judge(&self, events: &[EventRecord], now: chrono::DateTime<chrono::Utc>) -> Sample {
        let since = now - self.window;
        let mut seen = 0u32;
        for e in events {
            if e.last_seen > since && e.last_seen <= now && self.reasons.contains(&e.reason) {
                seen = seen.saturating_add(e.count.max(1));
            }
        }
        let what = format!(
            "{seen} event(s) {} in the last {}",
            self.reasons.join("/"),
            humantime(self.window)
        );
        if seen > self.max {
            Sample::Fail(format!("{what} (max {})", self.max))
        } else {
            Sample::Pass(what)
        }
    }
}

fn humantime(d: Duration) -> String {
    let s = d.num_seconds();
    if s % 3600 == 0 {
        format!("{}h", s / 3600)
    } else if s % 60 == 0 {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

#[async_trait]
impl Gate for EventsGate {
    fn name(&self) -> &str {
        &self.name
    }

    async fn sample(&self, inputs: &GateInputs<'_>) -> Sample {
        self.judge(inputs.events, inputs.now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Utc};
    use rota_core::fleet::duration::GoDuration;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-23T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
            + Duration::seconds(s)
    }

    #[test]
    fn counts_matching_events_inside_the_window() {
        let g = EventsGate::new(&ResolvedGate {
            name: "node-events".into(),
            interval: GoDuration::from_secs(30),
            samples: 1,
            failure_limit: 0,
            check: GateCheck::Events {
                reasons: vec!["NodeNotReady".into(), "FailedCreatePodSandBox".into()],
                max: 2,
                window: GoDuration::from_secs(600),
            },
        })
        .unwrap();
        let ev = |reason: &str, s: i64, count: u32| EventRecord {
            reason: reason.into(),
            last_seen: at(s),
            count,
        };
        let events = vec![
            ev("NodeNotReady", -60, 1),
            ev("FailedCreatePodSandBox", -30, 1),
            ev("NodeNotReady", -700, 5), // outside the window
            ev("Scheduled", -10, 9),     // another reason
        ];
        assert!(matches!(g.judge(&events, at(0)), Sample::Pass(_)));
        let mut more = events.clone();
        more.push(ev("NodeNotReady", -5, 2));
        match g.judge(&more, at(0)) {
            Sample::Fail(why) => assert_eq!(
                why,
                "4 event(s) NodeNotReady/FailedCreatePodSandBox in the last 10m (max 2)"
            ),
            s => panic!("{s:?}"),
        }
    }
}
