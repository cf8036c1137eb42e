//! The pods gate: too many pods not Ready, or too many Pending, fail the sample.

use async_trait::async_trait;

use super::gate::{Gate, GateError, GateInputs, Sample};
use crate::kube::summary::PodTally;
use rota_core::fleet::resolved::{GateCheck, ResolvedGate, parse_percent};

/// A limit on not-Ready pods: a count or a share of the pods considered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Count(u32),
    Percent(u8),
}

impl Limit {
    /// The allowed number out of `total`. A percent rounds down (`"2%"` of 120 is 2), so that
    /// a small namespace does not get a free pass: `"2%"` of 10 pods allows none.
    pub fn of(self, total: u32) -> u32 {
        match self {
            Limit::Count(n) => n,
            Limit::Percent(p) => total * u32::from(p) / 100,
        }
    }
}

pub struct PodsGate {
    name: String,
    namespaces: Vec<String>,
    max_not_ready: Option<Limit>,
    max_pending: Option<u32>,
}

impl PodsGate {
    pub fn new(spec: &ResolvedGate) -> Result<PodsGate, GateError> {
        let GateCheck::Pods {
            namespaces,
            max_not_ready,
            max_pending,
        } = &spec.check
        else {
            unreachable!("PodsGate::new is only called for pods gates")
        };
        let max_not_ready = match max_not_ready {
            None => None,
            Some(serde_json::Value::Number(n)) => Some(Limit::Count(
                n.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| invalid(spec, format!("maxNotReady {n} is not a count")))?,
            )),
            Some(serde_json::Value::String(s)) => {
                Some(Limit::Percent(parse_percent(s).ok_or_else(|| {
                    invalid(spec, format!("maxNotReady {s:?} is not \"N%\""))
                })?))
            }
            Some(v) => {
                return Err(invalid(
                    spec,
                    format!("maxNotReady {v} is not a count or \"N%\""),
                ));
            }
        };
        Ok(PodsGate {
            name: spec.name.clone(),
            namespaces: namespaces.clone(),
            max_not_ready,
            max_pending: *max_pending,
        })
    }

    /// The sample for the pods' health (pure).
    pub fn judge(&self, pods: &PodTally) -> Sample {
        let counts = pods.over(&self.namespaces);
        let (total, not_ready, pending) = (counts.total, counts.not_ready, counts.pending);
        let mut fails = Vec::new();
        if let Some(l) = self.max_not_ready
            && not_ready > l.of(total)
        {
            fails.push(format!(
                "{not_ready} of {total} pods not Ready (max {})",
                l.of(total)
            ));
        }
        if let Some(m) = self.max_pending
            && pending > m
        {
            fails.push(format!("{pending} pods Pending (max {m})"));
        }
        if fails.is_empty() {
            Sample::Pass(format!(
                "{not_ready} of {total} pods not Ready, {pending} Pending"
            ))
        } else {
            Sample::Fail(fails.join("; "))
        }
    }
}

fn invalid(spec: &ResolvedGate, why: String) -> GateError {
    GateError::Invalid {
        gate: spec.name.clone(),
        why,
    }
}

#[async_trait]
impl Gate for PodsGate {
    fn name(&self) -> &str {
        &self.name
    }

    async fn sample(&self, inputs: &GateInputs<'_>) -> Sample {
        self.judge(inputs.pods)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rota_core::fleet::duration::GoDuration;

    fn gate(
        max_not_ready: serde_json::Value,
        max_pending: Option<u32>,
    ) -> Result<PodsGate, GateError> {
        PodsGate::new(&ResolvedGate {
            name: "pods-healthy".into(),
            interval: GoDuration::from_secs(30),
            samples: 3,
            failure_limit: 0,
            check: GateCheck::Pods {
                namespaces: vec!["app".into()],
                max_not_ready: Some(max_not_ready),
                max_pending,
            },
        })
    }

    fn pods(ready: u32, not_ready: u32, pending: u32) -> PodTally {
        let mut t = PodTally::default();
        let app: std::sync::Arc<str> = "app".into();
        for i in 0..ready + not_ready + pending {
            t.add(&app, i < ready, i >= ready + not_ready);
        }
        // Another namespace is not considered.
        t.add(&"kube-system".into(), false, true);
        t
    }

    #[test]
    fn percent_and_count_limits() {
        let g = gate(serde_json::json!("10%"), Some(1)).unwrap();
        assert!(matches!(g.judge(&pods(20, 2, 0)), Sample::Pass(_)));
        match g.judge(&pods(19, 3, 0)) {
            Sample::Fail(why) => assert_eq!(why, "3 of 22 pods not Ready (max 2)"),
            s => panic!("{s:?}"),
        }
        // Pending pods are not Ready either: 2 pending of 22 → 2 not Ready, 2 Pending.
        match g.judge(&pods(20, 0, 2)) {
            Sample::Fail(why) => assert_eq!(why, "2 pods Pending (max 1)"),
            s => panic!("{s:?}"),
        }
        let g = gate(serde_json::json!(0), None).unwrap();
        assert!(matches!(g.judge(&pods(3, 1, 0)), Sample::Fail(_)));
    }

    #[test]
    fn a_gate_without_namespaces_counts_every_namespace() {
        let mut g = gate(serde_json::json!(1), None).unwrap();
        g.namespaces.clear();
        // 22 pods of `app`, 1 not Ready, plus kube-system's one not Ready and Pending.
        match g.judge(&pods(21, 1, 0)) {
            Sample::Fail(why) => assert_eq!(why, "2 of 23 pods not Ready (max 1)"),
            s => panic!("{s:?}"),
        }
        let mut t = PodTally::default();
        assert_eq!(t.over(&[]), crate::gates::PodCounts::default());
        t.add(&"a".into(), true, false);
        t.add(&"a".into(), false, true);
        t.add(&"b".into(), false, false);
        let c = t.over(&["a".to_string()]);
        assert_eq!((c.total, c.not_ready, c.pending), (2, 1, 1));
    }

    #[test]
    fn bad_limits_are_errors_naming_the_gate() {
        let e = gate(serde_json::json!("ten"), None).err().unwrap();
        assert!(e.to_string().contains("pods-healthy"));
        assert!(e.to_string().contains("\"ten\""));
    }
}
