//! Maintenance windows and blackouts: whether a batch may start at a given instant, and
//! until when it is deferred when not.
//!
//! A batch starts only inside a window, only when its expected duration fits before the
//! window closes (the runway: no disruption started that cannot finish inside the window),
//! and never inside a blackout (`{from, to, reason}`, a freeze on dates). A started batch
//! always finishes. See [`may_start`].
//!
//! A window is `{days, start, end, timeZone}` in local time. An end before the start spans
//! midnight: `{days: [Fri], start: "22:00", end: "02:00"}` is open Friday 22:00 to Saturday
//! 02:00 (the day names the day the window *opens*). An end equal to the start is a whole day.

use chrono::{DateTime, Datelike, Duration, NaiveTime, TimeZone, Utc, Weekday};
use chrono_tz::Tz;

use crate::fleet::resolved::{Blackout, Window};

/// Why a window could not be evaluated (the fleet validation should have caught it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid window: {0}")]
pub struct WindowError(pub String);

/// True when `now` is inside one of `windows`; an empty list is always open.
pub fn is_open(windows: &[Window], now: DateTime<Utc>) -> Result<bool, WindowError> {
    if windows.is_empty() {
        return Ok(true);
    }
    for w in windows {
        if window_open(w, now)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// When the next batch may start: `now` if a window is open, else the earliest opening of
/// any window within the next eight days (every window recurs within a week); `None` without
/// windows that ever open, or when one cannot be evaluated. Candidates are each window's local
/// start on each day, so a daylight-saving jump that skips a start is skipped too.
pub fn next_open(windows: &[Window], now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if is_open(windows, now).ok()? {
        return Some(now);
    }
    let mut best: Option<DateTime<Utc>> = None;
    for w in windows {
        let tz: Tz = if w.time_zone.is_empty() {
            chrono_tz::UTC
        } else {
            w.time_zone.parse().ok()?
        };
        let start = parse_hhmm(&w.start).ok()?;
        let today = tz.from_utc_datetime(&now.naive_utc()).date_naive();
        for day in 0..=8 {
            let date = today + Duration::days(day);
            let Some(at) = tz
                .from_local_datetime(&date.and_time(start))
                .earliest()
                .map(|t| t.with_timezone(&Utc))
            else {
                continue;
            };
            if at > now && window_open(w, at).ok()? && best.is_none_or(|b| at < b) {
                best = Some(at);
            }
        }
    }
    best
}

/// Why a batch may not start now, and until when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deferral {
    /// No window is open; `until` is the next opening (`None`: none within a week).
    Outside { until: Option<DateTime<Utc>> },
    /// A window is open but closes at `closes`, before a batch of the expected duration
    /// would finish; `until` is the next opening after it.
    Runway {
        closes: DateTime<Utc>,
        until: Option<DateTime<Utc>>,
    },
    /// A blackout holds; `until` is when it ends and a window is open (`None`: no window
    /// opens within a week of its end).
    Blackout {
        reason: String,
        ends: DateTime<Utc>,
        until: Option<DateTime<Utc>>,
    },
}

impl Deferral {
    /// When the next batch may start, if known.
    pub fn until(&self) -> Option<DateTime<Utc>> {
        match self {
            Deferral::Outside { until }
            | Deferral::Runway { until, .. }
            | Deferral::Blackout { until, .. } => *until,
        }
    }

    /// `deferred until <time>: <why>`, the words of the status, the commit status and the page.
    pub fn describe(&self, expected: Duration) -> String {
        let until = match self.until() {
            Some(t) => format!("deferred until {}", t.to_rfc3339()),
            None => "deferred: no window opens within a week".to_string(),
        };
        let why = match self {
            Deferral::Outside { .. } => "outside every maintenance window".to_string(),
            Deferral::Runway { closes, .. } => format!(
                "a batch takes about {}, the window closes at {}",
                minutes(expected),
                closes.to_rfc3339()
            ),
            Deferral::Blackout { reason, ends, .. } if reason.is_empty() => {
                format!("blackout until {}", ends.to_rfc3339())
            }
            Deferral::Blackout { reason, ends, .. } => {
                format!("blackout until {} ({reason})", ends.to_rfc3339())
            }
        };
        format!("{until}: {why}")
    }
}

/// `45m`, `1h30m`: a duration as a person reads it.
fn minutes(d: Duration) -> String {
    let m = d.num_minutes().max(1);
    match (m / 60, m % 60) {
        (0, m) => format!("{m}m"),
        (h, 0) => format!("{h}h"),
        (h, m) => format!("{h}h{m}m"),
    }
}

/// Whether a batch expected to take `expected` may start at `now` under `windows` and
/// `blackouts`: `Ok(None)` when it may, else why not and until when.
///
/// Worked example: a window Mon 09:00-17:00 UTC and batches that took 50 minutes (boot plus
/// drain) so far. At 16:00 a batch starts (it ends about 16:50); at 16:20 it is deferred
/// until Tuesday 09:00 if Tuesday is listed, else the next listed day.
pub fn may_start(
    windows: &[Window],
    blackouts: &[Blackout],
    now: DateTime<Utc>,
    expected: Duration,
) -> Result<Option<Deferral>, WindowError> {
    if let Some(b) = blackout_at(blackouts, now) {
        let ends = blackout_end(blackouts, b.to);
        return Ok(Some(Deferral::Blackout {
            reason: b.reason.clone(),
            ends,
            until: next_open(windows, ends),
        }));
    }
    if !is_open(windows, now)? {
        return Ok(Some(Deferral::Outside {
            until: next_open(windows, now),
        }));
    }
    let Some(closes) = closes_at(windows, now)? else {
        return Ok(None);
    };
    if now
        .checked_add_signed(expected)
        .is_some_and(|end| end <= closes)
    {
        return Ok(None);
    }
    Ok(Some(Deferral::Runway {
        closes,
        until: next_open(windows, closes),
    }))
}

/// The blackout in force at `now`, if any.
pub fn blackout_at(blackouts: &[Blackout], now: DateTime<Utc>) -> Option<&Blackout> {
    blackouts.iter().find(|b| b.from <= now && now < b.to)
}

/// When a freeze that lasts until `to` really ends: blackouts that overlap or touch it
/// extend it (a freeze followed by another starts no batch in between).
fn blackout_end(blackouts: &[Blackout], mut to: DateTime<Utc>) -> DateTime<Utc> {
    while let Some(b) = blackouts.iter().find(|b| b.from <= to && b.to > to) {
        to = b.to;
    }
    to
}

/// When the open period holding `now` closes: the end of the open window, extended by any
/// window open at that instant (touching or overlapping windows make one period). `None`
/// without windows (always open) or when `now` is outside every window.
pub fn closes_at(
    windows: &[Window],
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, WindowError> {
    if windows.is_empty() || !is_open(windows, now)? {
        return Ok(None);
    }
    let mut close = now;
    // Every window recurs within a week: eight days of extensions means always open.
    let horizon = now + Duration::days(8);
    loop {
        let mut latest: Option<DateTime<Utc>> = None;
        for w in windows {
            if let Some(end) = open_until(w, close)? {
                latest = Some(latest.map_or(end, |l: DateTime<Utc>| l.max(end)));
            }
        }
        match latest {
            Some(end) if end > close && end < horizon => close = end,
            Some(end) if end > close => return Ok(Some(horizon.max(end))),
            _ => return Ok(Some(close)),
        }
    }
}

/// When `w`, open at `now`, closes; `None` when it is not open at `now`.
fn open_until(w: &Window, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, WindowError> {
    if !window_open(w, now)? {
        return Ok(None);
    }
    let tz = zone(w)?;
    let (start, end) = (parse_hhmm(&w.start)?, parse_hhmm(&w.end)?);
    let local = tz.from_utc_datetime(&now.naive_utc());
    // The end is today, unless the window spans midnight and opened today.
    let day = if start >= end && local.time() >= start {
        local.date_naive() + Duration::days(1)
    } else {
        local.date_naive()
    };
    // A local end a daylight-saving jump skips: the first instant after it.
    let at = tz
        .from_local_datetime(&day.and_time(end))
        .earliest()
        .or_else(|| {
            tz.from_local_datetime(&(day.and_time(end) + Duration::hours(1)))
                .earliest()
        })
        .map(|t| t.with_timezone(&Utc));
    Ok(at)
}

fn zone(w: &Window) -> Result<Tz, WindowError> {
    if w.time_zone.is_empty() {
        return Ok(chrono_tz::UTC);
    }
    w.time_zone
        .parse()
        .map_err(|_| WindowError(format!("unknown time zone {:?}", w.time_zone)))
}

fn window_open(w: &Window, now: DateTime<Utc>) -> Result<bool, WindowError> {
    let tz: Tz = if w.time_zone.is_empty() {
        chrono_tz::UTC
    } else {
        w.time_zone
            .parse()
            .map_err(|_| WindowError(format!("unknown time zone {:?}", w.time_zone)))?
    };
    let start = parse_hhmm(&w.start)?;
    let end = parse_hhmm(&w.end)?;
    let days = w
        .days
        .iter()
        .map(|d| parse_day(d))
        .collect::<Result<Vec<_>, _>>()?;
    let local = tz.from_utc_datetime(&now.naive_utc());
    let t = local.time();
    let today = local.weekday();
    let yesterday = (local - Duration::days(1)).weekday();
    let day_ok = |d: Weekday| days.is_empty() || days.contains(&d);
    Ok(if start < end {
        day_ok(today) && t >= start && t < end
    } else {
        // Spans midnight (or a whole day when start == end): open from `start` on an allowed
        // day until `end` on the next day.
        (day_ok(today) && t >= start) || (day_ok(yesterday) && t < end)
    })
}

fn parse_hhmm(s: &str) -> Result<NaiveTime, WindowError> {
    NaiveTime::parse_from_str(s, "%H:%M")
        .map_err(|_| WindowError(format!("time {s:?} is not HH:MM")))
}

fn parse_day(s: &str) -> Result<Weekday, WindowError> {
    Ok(match s {
        "Mon" => Weekday::Mon,
        "Tue" => Weekday::Tue,
        "Wed" => Weekday::Wed,
        "Thu" => Weekday::Thu,
        "Fri" => Weekday::Fri,
        "Sat" => Weekday::Sat,
        "Sun" => Weekday::Sun,
        _ => return Err(WindowError(format!("day {s:?} is not one of Mon..Sun"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(days: &[&str], start: &str, end: &str, tz: &str) -> Window {
        Window {
            days: days.iter().map(|d| d.to_string()).collect(),
            start: start.into(),
            end: end.into(),
            time_zone: tz.into(),
        }
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn empty_list_is_always_open() {
        assert!(is_open(&[], at("2026-11-22T03:00:00Z")).unwrap());
    }

    #[test]
    fn windows_are_local_to_their_time_zone() {
        // 2026-11-23 is a Monday; Berlin is UTC+1 in November.
        let berlin = [w(&["Mon"], "09:00", "17:00", "Europe/Berlin")];
        assert!(!is_open(&berlin, at("2026-11-23T07:59:00Z")).unwrap());
        assert!(is_open(&berlin, at("2026-11-23T08:00:00Z")).unwrap());
        assert!(is_open(&berlin, at("2026-11-23T15:59:00Z")).unwrap());
        assert!(!is_open(&berlin, at("2026-11-23T16:00:00Z")).unwrap());
        // Tuesday is not listed.
        assert!(!is_open(&berlin, at("2026-11-24T10:00:00Z")).unwrap());
    }

    #[test]
    fn a_window_spanning_midnight_belongs_to_the_day_it_opens() {
        // Friday 2026-11-27 22:00 to Saturday 02:00, UTC.
        let fri = [w(&["Fri"], "22:00", "02:00", "UTC")];
        assert!(is_open(&fri, at("2026-11-27T23:00:00Z")).unwrap());
        assert!(is_open(&fri, at("2026-11-28T01:59:00Z")).unwrap());
        assert!(!is_open(&fri, at("2026-11-28T02:00:00Z")).unwrap());
        // Friday 01:00 belongs to Thursday's window, which does not exist.
        assert!(!is_open(&fri, at("2026-11-27T01:00:00Z")).unwrap());
    }

    #[test]
    fn the_next_opening_is_the_earliest_start_of_an_allowed_day() {
        // Friday 2026-11-27 22:00 UTC is the only window: from Monday, it is four days off.
        let fri = [w(&["Fri"], "22:00", "02:00", "UTC")];
        assert_eq!(
            next_open(&fri, at("2026-11-23T10:00:00Z")),
            Some(at("2026-11-27T22:00:00Z"))
        );
        // Inside it: now.
        let inside = at("2026-11-28T01:00:00Z");
        assert_eq!(next_open(&fri, inside), Some(inside));
        // Two windows: the earlier wins; Berlin's 09:00 is 08:00 UTC in November.
        let two = [
            w(&["Sat"], "03:00", "05:00", "UTC"),
            w(&["Tue"], "09:00", "10:00", "Europe/Berlin"),
        ];
        assert_eq!(
            next_open(&two, at("2026-11-23T10:00:00Z")),
            Some(at("2026-11-24T08:00:00Z"))
        );
        assert_eq!(
            next_open(&[w(&[], "09:00", "10:00", "Mars/Olympus")], inside),
            None
        );
    }

    fn freeze(from: &str, to: &str, reason: &str) -> Blackout {
        Blackout {
            from: at(from),
            to: at(to),
            reason: reason.into(),
        }
    }

    #[test]
    fn a_batch_starts_only_when_it_fits_before_the_window_closes() {
        // Monday 2026-11-23 and Tuesday, 09:00-17:00 UTC; batches take 50 minutes.
        let days = [w(&["Mon", "Tue"], "09:00", "17:00", "UTC")];
        let fifty = Duration::minutes(50);
        assert_eq!(
            may_start(&days, &[], at("2026-11-23T16:00:00Z"), fifty),
            Ok(None)
        );
        assert_eq!(
            may_start(&days, &[], at("2026-11-23T16:10:00Z"), fifty),
            Ok(None)
        );
        let late = may_start(&days, &[], at("2026-11-23T16:11:00Z"), fifty)
            .unwrap()
            .unwrap();
        assert_eq!(
            late,
            Deferral::Runway {
                closes: at("2026-11-23T17:00:00Z"),
                until: Some(at("2026-11-24T09:00:00Z"))
            }
        );
        assert_eq!(
            late.describe(fifty),
            "deferred until 2026-11-24T09:00:00+00:00: a batch takes about 50m, the window closes at 2026-11-23T17:00:00+00:00"
        );
        // Outside: deferred until the next opening (Tuesday's is the same after Monday's).
        let out = may_start(&days, &[], at("2026-11-23T18:00:00Z"), fifty)
            .unwrap()
            .unwrap();
        assert_eq!(out.until(), Some(at("2026-11-24T09:00:00Z")));
        assert!(
            out.describe(fifty)
                .ends_with("outside every maintenance window")
        );
        // No windows: always open, any duration fits.
        assert_eq!(
            may_start(&[], &[], at("2026-11-23T16:59:00Z"), Duration::days(3)),
            Ok(None)
        );
    }

    #[test]
    fn touching_windows_make_one_period_and_a_midnight_window_closes_the_next_day() {
        let evening = [
            w(&["Mon"], "18:00", "22:00", "UTC"),
            w(&["Mon"], "22:00", "02:00", "UTC"),
        ];
        assert_eq!(
            closes_at(&evening, at("2026-11-23T19:00:00Z")),
            Ok(Some(at("2026-11-24T02:00:00Z")))
        );
        // Berlin is UTC+1 in November: 17:00 local is 16:00 UTC.
        let berlin = [w(&["Mon"], "09:00", "17:00", "Europe/Berlin")];
        assert_eq!(
            closes_at(&berlin, at("2026-11-23T10:00:00Z")),
            Ok(Some(at("2026-11-23T16:00:00Z")))
        );
        assert_eq!(closes_at(&berlin, at("2026-11-23T20:00:00Z")), Ok(None));
        assert_eq!(closes_at(&[], at("2026-11-23T20:00:00Z")), Ok(None));
    }

    #[test]
    fn no_batch_starts_in_a_blackout_and_it_is_deferred_to_its_end_inside_a_window() {
        let freezes = [
            freeze("2026-12-20T00:00:00Z", "2026-12-27T00:00:00Z", "holidays"),
            // Touching the first: one freeze until January.
            freeze("2026-12-27T00:00:00Z", "2027-01-04T06:00:00Z", ""),
        ];
        let hour = Duration::hours(1);
        assert_eq!(
            may_start(&[], &freezes, at("2026-12-19T23:59:00Z"), hour),
            Ok(None)
        );
        let d = may_start(&[], &freezes, at("2026-12-21T12:00:00Z"), hour)
            .unwrap()
            .unwrap();
        assert_eq!(d.until(), Some(at("2027-01-04T06:00:00Z")));
        assert_eq!(
            d.describe(hour),
            "deferred until 2027-01-04T06:00:00+00:00: blackout until 2027-01-04T06:00:00+00:00 (holidays)"
        );
        assert_eq!(
            may_start(&[], &freezes, at("2027-01-04T06:00:00Z"), hour),
            Ok(None)
        );
        // With a weekday window, until the first opening after the freeze: Monday
        // 2027-01-04 09:00.
        let days = [w(&["Mon"], "09:00", "17:00", "UTC")];
        let d = may_start(&days, &freezes, at("2026-12-28T10:00:00Z"), hour)
            .unwrap()
            .unwrap();
        assert_eq!(d.until(), Some(at("2027-01-04T09:00:00Z")));
    }

    #[test]
    fn bad_time_zones_and_days_are_errors() {
        let e = is_open(&[w(&[], "09:00", "10:00", "Mars/Olympus")], Utc::now()).unwrap_err();
        assert!(e.0.contains("Mars/Olympus"));
        let e = is_open(&[w(&["Monday"], "09:00", "10:00", "UTC")], Utc::now()).unwrap_err();
        assert!(e.0.contains("Monday"));
    }
}
