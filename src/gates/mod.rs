//! Health gates: checks that must pass before a batch disrupts anything and hold throughout
//! each soak.
//!
//! Two layers. A [`Gate`] takes one sample (pass or fail, with a detail) when asked; it may do
//! I/O (a Prometheus query) or look at the observed cluster ([`GateInputs`]: pods, events).
//! A [`Tracker`] is pure: it decides when the next sample is due (`interval`) and turns the
//! samples into a verdict (`samples` consecutive passes needed, more than `failureLimit`
//! failures fail the gate). The edge (the controller) samples due gates and hands the
//! combined [`GateVerdict`] to `rotate::plan`; the planner never runs a gate itself.
//!
//! The gates: [`pods`] and [`events`] look at the observed cluster, [`prometheus`] sends an
//! instant query to the Prometheus the gate names. Each is one `Gate` implementation in its
//! own file and one arm in [`build`]; the tracker and the planner know none of them. The
//! trait they implement, with its inputs and samples, is in [`gate`].

pub mod events;
pub mod gate;
pub mod pods;
pub mod prometheus;

use chrono::{DateTime, Duration, Utc};

/// The pods and events the gates judge, as the cluster index keeps them.
pub use crate::kube::summary::{EventRecord, PodCounts, PodTally};
pub use gate::{Gate, GateError, GateInputs, Sample};
use rota_core::fleet::resolved::{GateCheck, ResolvedGate};
pub use rota_core::rotate::GateVerdict;

/// The gate for a resolved HealthGate spec.
pub fn build(spec: &ResolvedGate) -> Result<Box<dyn Gate>, GateError> {
    match &spec.check {
        GateCheck::Pods { .. } => Ok(Box::new(pods::PodsGate::new(spec)?)),
        GateCheck::Events { .. } => Ok(Box::new(events::EventsGate::new(spec)?)),
        GateCheck::Prometheus { .. } => Ok(Box::new(prometheus::PrometheusGate::new(spec)?)),
    }
}

/// The verdict state of one gate over one evaluation (a batch's pre-check or soak).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tracker {
    pub gate: String,
    interval: Duration,
    samples: u32,
    failure_limit: u32,
    consecutive_passes: u32,
    failures: u32,
    last_sample: Option<DateTime<Utc>>,
    last_detail: String,
}

impl Tracker {
    pub fn new(spec: &ResolvedGate) -> Tracker {
        Tracker {
            gate: spec.name.clone(),
            interval: Duration::from_std(spec.interval.0).unwrap_or(Duration::MAX),
            samples: spec.samples.max(1),
            failure_limit: spec.failure_limit,
            consecutive_passes: 0,
            failures: 0,
            last_sample: None,
            last_detail: String::new(),
        }
    }

    /// Start a new evaluation (a new batch): earlier samples do not count.
    pub fn reset(&mut self) {
        self.consecutive_passes = 0;
        self.failures = 0;
        self.last_sample = None;
        self.last_detail.clear();
    }

    /// Whether a sample should be taken at `now` (`interval` after the last one).
    pub fn due(&self, now: DateTime<Utc>) -> bool {
        self.last_sample.is_none_or(|t| now >= t + self.interval)
    }

    /// Count one sample.
    ///
    /// Worked example, `samples: 3, failureLimit: 1`: pass, fail, pass, pass, pass → the fail
    /// is tolerated (1 ≤ 1) but resets the run of passes, so the gate passes at the fifth
    /// sample; one more fail before that would fail the gate (2 > 1).
    pub fn record(&mut self, sample: Sample, now: DateTime<Utc>) {
        self.last_sample = Some(now);
        match sample {
            Sample::Pass(d) => {
                self.consecutive_passes += 1;
                self.last_detail = d;
            }
            Sample::Fail(d) => {
                self.consecutive_passes = 0;
                self.failures += 1;
                self.last_detail = d;
            }
        }
    }

    pub fn verdict(&self) -> GateVerdict {
        if self.failures > self.failure_limit {
            GateVerdict::Failed {
                gate: self.gate.clone(),
                reason: format!(
                    "{} ({} failing sample(s), failureLimit {})",
                    self.last_detail, self.failures, self.failure_limit
                ),
            }
        } else if self.consecutive_passes >= self.samples {
            GateVerdict::Passing
        } else {
            GateVerdict::Pending(format!(
                "{} ({}/{} passing samples)",
                self.gate, self.consecutive_passes, self.samples
            ))
        }
    }
}

/// The verdict of several gates: the first failure, else the first pending, else passing.
pub fn combine<'a>(trackers: impl IntoIterator<Item = &'a Tracker>) -> GateVerdict {
    let mut pending = None;
    for t in trackers {
        match t.verdict() {
            f @ GateVerdict::Failed { .. } => return f,
            p @ GateVerdict::Pending(_) if pending.is_none() => pending = Some(p),
            _ => {}
        }
    }
    pending.unwrap_or(GateVerdict::Passing)
}

/// What the edge could not read for this round of samples: why the pods list, the events
/// list failed. A gate that looks at an input it could not read cannot see, and a gate that
/// cannot see must not pass ("0 of 0 pods not Ready" is not health).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unseen {
    pub pods: Option<String>,
    pub events: Option<String>,
}

/// Why the gate of `spec` cannot see, given what could not be read (pure); `None` when it
/// can (Prometheus gates read their own source).
pub fn blind(spec: &ResolvedGate, unseen: &Unseen) -> Option<String> {
    let (what, err) = match &spec.check {
        GateCheck::Pods { .. } => ("pods", unseen.pods.as_ref()?),
        GateCheck::Events { .. } => ("events", unseen.events.as_ref()?),
        GateCheck::Prometheus { .. } => return None,
    };
    Some(format!("cannot see: listing {what} failed: {err}"))
}

/// Record a failed sample for every due gate that cannot see (pure); the caller samples the
/// others with [`sample_due`] (the blind ones are no longer due). Returns the samples taken
/// as (gate, passed).
pub fn record_blind(
    specs: &[ResolvedGate],
    trackers: &mut [Tracker],
    unseen: &Unseen,
    now: DateTime<Utc>,
) -> Vec<(String, bool)> {
    let mut taken = Vec::new();
    for (spec, t) in specs.iter().zip(trackers.iter_mut()) {
        if t.due(now)
            && let Some(why) = blind(spec, unseen)
        {
            t.record(Sample::Fail(why), now);
            taken.push((t.gate.clone(), false));
        }
    }
    taken
}

/// Sample every due gate once (the edge calls this on each reconcile). Returns each sample
/// taken as (gate, passed), for `rota_gate_evaluations_total`.
pub async fn sample_due(
    gates: &[Box<dyn Gate>],
    trackers: &mut [Tracker],
    inputs: &GateInputs<'_>,
) -> Vec<(String, bool)> {
    let mut taken = Vec::new();
    for (g, t) in gates.iter().zip(trackers.iter_mut()) {
        if t.due(inputs.now) {
            let s = g.sample(inputs).await;
            taken.push((t.gate.clone(), matches!(s, Sample::Pass(_))));
            t.record(s, inputs.now);
        }
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;
    use rota_core::fleet::duration::GoDuration;

    #[test]
    fn a_gate_that_cannot_see_fails_its_sample_and_never_passes() {
        let pods_gate = ResolvedGate {
            name: "pods".into(),
            interval: GoDuration::from_secs(30),
            samples: 1,
            failure_limit: 0,
            check: GateCheck::Pods {
                namespaces: vec![],
                max_not_ready: None,
                max_pending: None,
            },
        };
        let events_gate = ResolvedGate {
            name: "events".into(),
            check: GateCheck::Events {
                reasons: vec!["BackOff".into()],
                max: 0,
                window: GoDuration::from_secs(600),
            },
            ..pods_gate.clone()
        };
        let specs = vec![pods_gate.clone(), events_gate.clone()];
        let mut trackers: Vec<Tracker> = specs.iter().map(Tracker::new).collect();
        let now = DateTime::from_timestamp(1_790_000_000, 0).unwrap();
        let unseen = Unseen {
            pods: Some("500 Internal Server Error".into()),
            events: None,
        };
        let taken = record_blind(&specs, &mut trackers, &unseen, now);
        assert_eq!(taken, vec![("pods".to_string(), false)]);
        // The events gate could see: still due, for `sample_due` to take.
        assert!(trackers[1].due(now) && !trackers[0].due(now));
        match combine(&trackers) {
            GateVerdict::Failed { gate, reason } => {
                assert_eq!(gate, "pods");
                assert!(
                    reason.contains("cannot see: listing pods failed"),
                    "{reason}"
                );
            }
            v => panic!("{v:?}"),
        }
        assert_eq!(blind(&events_gate, &Unseen::default()), None);
    }

    fn spec(samples: u32, failure_limit: u32) -> ResolvedGate {
        ResolvedGate {
            name: "g".into(),
            interval: GoDuration::from_secs(30),
            samples,
            failure_limit,
            check: GateCheck::Events {
                reasons: vec!["NodeNotReady".into()],
                max: 0,
                window: GoDuration::from_secs(600),
            },
        }
    }

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-23T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
            + Duration::seconds(s)
    }

    #[test]
    fn consecutive_passes_and_the_failure_limit() {
        let mut tr = Tracker::new(&spec(3, 1));
        let seq = [true, false, true, true];
        for (i, pass) in seq.iter().enumerate() {
            let s = if *pass {
                Sample::Pass("ok".into())
            } else {
                Sample::Fail("3 NodeNotReady events".into())
            };
            tr.record(s, t(30 * i as i64));
        }
        assert!(matches!(tr.verdict(), GateVerdict::Pending(p) if p.contains("2/3")));
        tr.record(Sample::Pass("ok".into()), t(120));
        assert_eq!(tr.verdict(), GateVerdict::Passing);
        tr.record(Sample::Fail("4 NodeNotReady events".into()), t(150));
        match tr.verdict() {
            GateVerdict::Failed { gate, reason } => {
                assert_eq!(gate, "g");
                assert!(reason.contains("4 NodeNotReady events"));
                assert!(reason.contains("2 failing sample(s), failureLimit 1"));
            }
            v => panic!("{v:?}"),
        }
        tr.reset();
        assert!(matches!(tr.verdict(), GateVerdict::Pending(_)));
    }

    #[test]
    fn samples_are_due_every_interval() {
        let mut tr = Tracker::new(&spec(1, 0));
        assert!(tr.due(t(0)));
        tr.record(Sample::Pass("ok".into()), t(0));
        assert!(!tr.due(t(29)));
        assert!(tr.due(t(30)));
    }

    #[test]
    fn combine_reports_the_first_failure_then_pending() {
        let mut a = Tracker::new(&spec(1, 0));
        let mut b = Tracker::new(&spec(1, 0));
        assert!(matches!(combine([&a, &b]), GateVerdict::Pending(_)));
        a.record(Sample::Pass("ok".into()), t(0));
        b.record(Sample::Pass("ok".into()), t(0));
        assert_eq!(combine([&a, &b]), GateVerdict::Passing);
        b.record(Sample::Fail("bad".into()), t(30));
        assert!(matches!(combine([&a, &b]), GateVerdict::Failed { .. }));
    }

    #[test]
    fn prometheus_gates_are_built_and_invalid_ones_rejected() {
        let mut s = spec(1, 0);
        s.check = GateCheck::Prometheus {
            address: "http://prom:9090".into(),
            query: "up".into(),
            min: Some(1.0),
            max: None,
            on_no_data: Default::default(),
        };
        let g = build(&s).unwrap();
        assert_eq!(g.name(), "g");
        // A bad address is an invalid gate (which fails the pool's gate check), not a pass.
        if let GateCheck::Prometheus { address, .. } = &mut s.check {
            *address = "prom:9090".into();
        }
        let e = build(&s).err().unwrap();
        assert!(matches!(e, GateError::Invalid { .. }), "{e}");
        assert!(e.to_string().contains("health gate g"), "{e}");
    }

    #[tokio::test]
    async fn sample_due_feeds_the_trackers() {
        let specs = [spec(1, 0)];
        let gates: Vec<Box<dyn Gate>> = specs.iter().map(|s| build(s).unwrap()).collect();
        let mut trackers: Vec<Tracker> = specs.iter().map(Tracker::new).collect();
        let events = [EventRecord {
            reason: "NodeNotReady".into(),
            last_seen: t(-10),
            count: 1,
        }];
        let inputs = GateInputs {
            pods: &PodTally::default(),
            events: &events,
            now: t(0),
        };
        let taken = sample_due(&gates, &mut trackers, &inputs).await;
        assert_eq!(taken, [("g".to_string(), false)]);
        assert!(matches!(combine(&trackers), GateVerdict::Failed { .. }));
    }
}
