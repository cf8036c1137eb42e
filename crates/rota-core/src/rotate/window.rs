//! Maintenance windows: whether a batch may start at a given instant.
//!
//! A window is `{days, start, end, timeZone}` in local time. An end before the start spans
//! midnight: `{days: [Fri], start: "22:00", end: "02:00"}` is open Friday 22:00 to Saturday
//! 02:00 (the day names the day the window *opens*). An end equal to the start is a whole day.

use chrono::{DateTime, Datelike, Duration, NaiveTime, TimeZone, Utc, Weekday};
use chrono_tz::Tz;

use crate::fleet::resolved::Window;

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

    #[test]
    fn bad_time_zones_and_days_are_errors() {
        let e = is_open(&[w(&[], "09:00", "10:00", "Mars/Olympus")], Utc::now()).unwrap_err();
        assert!(e.0.contains("Mars/Olympus"));
        let e = is_open(&[w(&["Monday"], "09:00", "10:00", "UTC")], Utc::now()).unwrap_err();
        assert!(e.0.contains("Monday"));
    }
}
