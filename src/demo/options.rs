//! How the demo runs ([`DemoOptions`]): its pace ([`Pace`]), where it keeps its folder,
//! whether it serves the fleet over HTTP and how long a step may take, and the fleet time
//! the story starts at ([`fleet_start`]). The story holds them; they live below it.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Datelike, Days, Utc};

/// How fleet time relates to wall time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// Paused tokio time that jumps ahead whenever the fleet is idle (the default): the
    /// runtime must be a current-thread runtime with time paused (see `cli::demo`).
    Jump,
    /// Real time, this many times faster.
    Speed(f64),
}

#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub pace: Pace,
    /// Keep the repo (and the kubeconfig) in this folder; otherwise a temporary one.
    pub keep: Option<PathBuf>,
    /// Serve the simulated clusters and cloud over loopback HTTP (a kubeconfig in the folder).
    pub http: bool,
    /// After the story, keep serving until Ctrl-C.
    pub serve: bool,
    /// Redraw a table in place (a terminal) instead of printing one line per change.
    pub tty: bool,
    /// Give up when one step takes longer than this in wall time.
    pub step_limit: Duration,
    /// With [`Pace::Jump`]: the speed factor of the simulation and the controllers' clock.
    pub jump_speed: f64,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            pace: Pace::Jump,
            keep: None,
            http: false,
            serve: false,
            tty: false,
            step_limit: Duration::from_secs(300),
            jump_speed: 600.0,
        }
    }
}

/// When the story's fleet time starts: the coming Monday at 06:00 UTC (`now` itself if it is
/// that instant), whatever day the demo runs. The story covers about six and a half hours of
/// fleet time, and the example's maintenance windows (prod-use1: Mon-Thu 14:00-20:00 New
/// York, 19:00 UTC at the earliest) would otherwise open during it on some runs and not on
/// others: the story, its statuses and the ledger would differ by the hour of the run.
pub fn fleet_start(now: DateTime<Utc>) -> DateTime<Utc> {
    let monday = now.date_naive() - Days::new(u64::from(now.weekday().num_days_from_monday()));
    let start = monday
        .and_hms_opt(6, 0, 0)
        .expect("06:00 is a time of day")
        .and_utc();
    if start >= now {
        start
    } else {
        start + Days::new(7)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn the_story_starts_on_the_coming_monday_at_six_utc() {
        for (now, start) in [
            // A Monday before six, at six, and after it.
            ("2026-11-30T05:30:00Z", "2026-11-30T06:00:00Z"),
            ("2026-11-30T06:00:00Z", "2026-11-30T06:00:00Z"),
            ("2026-11-30T06:00:01Z", "2026-12-07T06:00:00Z"),
            // Inside prod-use1's window (Thursday 20:00 UTC), and on a Sunday night.
            ("2026-12-03T20:00:00Z", "2026-12-07T06:00:00Z"),
            ("2026-12-06T23:59:59Z", "2026-12-07T06:00:00Z"),
            // Across a year's end.
            ("2026-12-29T12:00:00Z", "2027-01-04T06:00:00Z"),
        ] {
            assert_eq!(fleet_start(at(now)), at(start), "{now}");
        }
    }
}
