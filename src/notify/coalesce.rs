//! Coalescing and rate limiting of notices into messages (pure: the caller passes `now`).
//!
//! A rotation of 40 pools emits 40 "started" and 40 "completed" notices, and a bad image can
//! fail batches in many pools at once. People want a handful of messages, so notices wait in a
//! buffer: a message goes out once the oldest waiting notice has waited `window` (a burst
//! gathers) and at least `min_interval` after the previous message (a rate limit). A message
//! lists failures first, at most `max_lines` pools per kind, then "and N more".

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::time::Instant;

use rota_core::fleet::model::NoticeKindName;
use rota_core::rotate::aftermath::notice::{Notice, NoticeKind};

/// One message to post.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub text: String,
    /// The notices it carries (put back with [`Coalescer::restore`] if sending fails).
    pub notices: Vec<Notice>,
}

#[derive(Clone, Debug)]
pub struct Coalescer {
    pub window: Duration,
    pub min_interval: Duration,
    pub max_lines: usize,
    events: BTreeSet<NoticeKindName>,
    pending: Vec<Notice>,
    first_pending: Option<Instant>,
    last_sent: Option<Instant>,
}

impl Coalescer {
    /// `events`: the kinds this webhook wants (empty set = none).
    pub fn new(window: Duration, min_interval: Duration, events: BTreeSet<NoticeKindName>) -> Self {
        Coalescer {
            window,
            min_interval,
            max_lines: 10,
            events,
            pending: Vec::new(),
            first_pending: None,
            last_sent: None,
        }
    }

    /// Queue a notice. A newer notice of the same kind for the same pool replaces the older
    /// one (a pool that pauses twice in a burst is reported once, with the latest reason).
    pub fn push(&mut self, notice: Notice, now: Instant) {
        if !self.events.contains(&notice.kind.name()) {
            return;
        }
        self.pending.retain(|n| {
            !(n.cluster == notice.cluster
                && n.pool == notice.pool
                && n.kind.name() == notice.kind.name())
        });
        self.pending.push(notice);
        self.first_pending.get_or_insert(now);
    }

    /// When the next message may go out, if anything waits.
    pub fn next_due(&self) -> Option<Instant> {
        let first = self.first_pending?;
        let gathered = first + self.window;
        Some(match self.last_sent {
            Some(last) => gathered.max(last + self.min_interval),
            None => gathered,
        })
    }

    /// The message due at `now`, if any; counts as sent.
    pub fn take_due(&mut self, now: Instant) -> Option<Message> {
        if self.next_due()? > now {
            return None;
        }
        let notices = std::mem::take(&mut self.pending);
        self.first_pending = None;
        self.last_sent = Some(now);
        Some(Message {
            text: render(&notices, self.max_lines),
            notices,
        })
    }

    /// Sending failed: the notices wait for the next slot (after `min_interval`), merged with
    /// whatever arrived meanwhile.
    pub fn restore(&mut self, message: Message, now: Instant) {
        let newer = std::mem::take(&mut self.pending);
        self.pending = message.notices;
        self.first_pending = Some(now);
        for n in newer {
            self.push(n, now);
        }
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

/// The message text, Slack mrkdwn (`*bold*`), most urgent kind first.
pub fn render(notices: &[Notice], max_lines: usize) -> String {
    let order = [
        (NoticeKindName::BatchFailed, "Batch failed"),
        (NoticeKindName::Paused, "Paused"),
        (NoticeKindName::RolloutStarted, "Rollout started"),
        (NoticeKindName::Completed, "Completed"),
    ];
    let mut parts = Vec::new();
    let mut sections = Vec::new();
    for (kind, title) in order {
        let mut of_kind: Vec<&Notice> = notices.iter().filter(|n| n.kind.name() == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        of_kind.sort_by(|a, b| (&a.cluster, &a.pool).cmp(&(&b.cluster, &b.pool)));
        parts.push(format!("{} {}", of_kind.len(), title.to_lowercase()));
        let mut section = format!("*{title}* ({})", of_kind.len());
        for n in of_kind.iter().take(max_lines) {
            section.push_str(&format!("\n• {}/{}{}", n.cluster, n.pool, detail(&n.kind)));
        }
        if of_kind.len() > max_lines {
            section.push_str(&format!("\n• and {} more", of_kind.len() - max_lines));
        }
        sections.push(section);
    }
    format!("rota: {}\n{}", parts.join(", "), sections.join("\n"))
}

fn detail(kind: &NoticeKind) -> String {
    match kind {
        NoticeKind::RolloutStarted { version } => format!(" → {version}"),
        NoticeKind::Completed { version } => format!(" on {version}"),
        NoticeKind::BatchFailed { batch, reason } => format!(" batch {batch}: {reason}"),
        NoticeKind::Paused { reason } => format!(": {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> BTreeSet<NoticeKindName> {
        [
            NoticeKindName::RolloutStarted,
            NoticeKindName::BatchFailed,
            NoticeKindName::Paused,
            NoticeKindName::Completed,
        ]
        .into()
    }

    fn started(pool: usize) -> Notice {
        Notice {
            cluster: "prod-use1".into(),
            pool: format!("pool-{pool:02}"),
            kind: NoticeKind::RolloutStarted {
                version: "2026.11.2".into(),
            },
        }
    }

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_burst_becomes_one_message_after_the_window() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(30 * S, 60 * S, all());
        for i in 0..40 {
            c.push(started(i), t0 + Duration::from_millis(i as u64 * 100));
        }
        assert_eq!(c.next_due(), Some(t0 + 30 * S));
        assert_eq!(c.take_due(t0 + 29 * S), None);
        let m = c.take_due(t0 + 30 * S).unwrap();
        assert_eq!(m.notices.len(), 40);
        assert!(
            m.text.starts_with(
                "rota: 40 rollout started\n*Rollout started* (40)\n• prod-use1/pool-00 → 2026.11.2"
            ),
            "{}",
            m.text
        );
        assert!(m.text.ends_with("• and 30 more"), "{}", m.text);
        assert_eq!(m.text.lines().count(), 13);
        assert_eq!(c.next_due(), None);
    }

    #[test]
    fn messages_are_rate_limited_and_failures_come_first() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(10 * S, 60 * S, all());
        c.push(started(1), t0);
        let _ = c.take_due(t0 + 10 * S).unwrap();
        c.push(
            Notice {
                cluster: "prod-use1".into(),
                pool: "pool-01".into(),
                kind: NoticeKind::BatchFailed {
                    batch: 2,
                    reason: "gate error-rate failed".into(),
                },
            },
            t0 + 11 * S,
        );
        c.push(
            Notice {
                cluster: "prod-use1".into(),
                pool: "pool-01".into(),
                kind: NoticeKind::Paused {
                    reason: "rolled back".into(),
                },
            },
            t0 + 12 * S,
        );
        // Gathered at 21s, but the previous message went at 10s: not before 70s.
        assert_eq!(c.next_due(), Some(t0 + 70 * S));
        let m = c.take_due(t0 + 70 * S).unwrap();
        assert_eq!(
            m.text,
            "rota: 1 batch failed, 1 paused\n*Batch failed* (1)\n• prod-use1/pool-01 batch 2: gate error-rate failed\n*Paused* (1)\n• prod-use1/pool-01: rolled back"
        );
    }

    #[test]
    fn repeats_collapse_unsubscribed_kinds_drop_and_failures_retry() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(S, S, [NoticeKindName::Paused].into());
        c.push(started(1), t0);
        assert_eq!(c.pending(), 0);
        for reason in ["drain blocked", "drain still blocked"] {
            c.push(
                Notice {
                    cluster: "c".into(),
                    pool: "p".into(),
                    kind: NoticeKind::Paused {
                        reason: reason.into(),
                    },
                },
                t0,
            );
        }
        assert_eq!(c.pending(), 1);
        let m = c.take_due(t0 + S).unwrap();
        assert!(m.text.ends_with("• c/p: drain still blocked"));
        c.restore(m, t0 + S);
        assert_eq!(c.next_due(), Some(t0 + 2 * S));
        assert_eq!(c.take_due(t0 + 2 * S).unwrap().notices.len(), 1);
    }
}
