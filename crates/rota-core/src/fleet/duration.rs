//! Go-style durations (`90s`, `15m`, `1h30m`) as the fleet repo writes them.
//!
//! The fleet contract uses Go's duration syntax because platform teams already know it from
//! Kubernetes tooling. We keep the original spelling when we render and store a policy, so a
//! `kubectl get -o yaml` of a NodePoolRotation reads like the repo that produced it.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A non-negative duration written in Go syntax. Units: `ms`, `s`, `m`, `h`.
///
/// `d` (days) is deliberately not accepted: Go rejects it, and a fleet repo that is also read by
/// other tools must mean the same thing to all of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GoDuration(pub Duration);

/// Why a duration string was rejected; the message is shown to the author of the repo.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {why} (expected Go syntax such as 90s, 15m, 1h30m)")]
pub struct DurationError {
    pub input: String,
    pub why: &'static str,
}

impl GoDuration {
    pub const ZERO: GoDuration = GoDuration(Duration::ZERO);

    pub fn from_secs(secs: u64) -> Self {
        GoDuration(Duration::from_secs(secs))
    }

    pub fn as_duration(self) -> Duration {
        self.0
    }

    pub fn is_zero(&self) -> bool {
        self.0.is_zero()
    }
}

impl FromStr for GoDuration {
    type Err = DurationError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let err = |why| DurationError {
            input: input.to_string(),
            why,
        };
        if input.is_empty() {
            return Err(err("empty"));
        }
        if input == "0" {
            return Ok(GoDuration::ZERO);
        }
        let bytes = input.as_bytes();
        let mut i = 0;
        let mut total_ms: u128 = 0;
        while i < bytes.len() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if start == i {
                return Err(err("a number must come before each unit"));
            }
            let n: u128 = input[start..i]
                .parse()
                .map_err(|_| err("number too large"))?;
            let unit_start = i;
            while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
                i += 1;
            }
            let factor_ms: u128 = match &input[unit_start..i] {
                "ms" => 1,
                "s" => 1_000,
                "m" => 60_000,
                "h" => 3_600_000,
                "" => return Err(err("missing unit")),
                _ => return Err(err("unknown unit (use ms, s, m or h)")),
            };
            total_ms = total_ms
                .checked_add(n.checked_mul(factor_ms).ok_or_else(|| err("too large"))?)
                .ok_or_else(|| err("too large"))?;
        }
        // A year is far beyond any sane soak or timeout; a bigger number is a typo.
        if total_ms > 366 * 24 * 3_600_000 {
            return Err(err("longer than a year"));
        }
        Ok(GoDuration(Duration::from_millis(total_ms as u64)))
    }
}

impl fmt::Display for GoDuration {
    /// Canonical Go-like spelling: `1h30m`, `90s` becomes `1m30s`, zero is `0s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ms = self.0.as_millis();
        if ms == 0 {
            return f.write_str("0s");
        }
        let h = ms / 3_600_000;
        ms %= 3_600_000;
        let m = ms / 60_000;
        ms %= 60_000;
        let s = ms / 1_000;
        ms %= 1_000;
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if m > 0 {
            write!(f, "{m}m")?;
        }
        if s > 0 {
            write!(f, "{s}s")?;
        }
        if ms > 0 {
            write!(f, "{ms}ms")?;
        }
        Ok(())
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for GoDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "GoDuration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^([0-9]+(ms|s|m|h))+$|^0$",
            "description": "Go-style duration such as 90s, 15m, 1h30m"
        })
    }
}

/// An image's age as a channel's `minAge` (bake) and `maxAge` (patch deadline) write it: Go
/// syntax plus whole days in front (`72h`, `30d`, `1d12h`). Days are accepted here and only
/// here because patch deadlines are set in days (PCI DSS: a month) and no other tool reads
/// these two keys; a rollout timing still takes [`GoDuration`] alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ImageAge {
    pub duration: Duration,
    /// Whether it was written with days, so it renders back the way it was written.
    days: bool,
}

impl ImageAge {
    pub fn as_duration(self) -> Duration {
        self.duration
    }
}

impl FromStr for ImageAge {
    type Err = DurationError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let err = |why| DurationError {
            input: input.to_string(),
            why,
        };
        let Some((days, rest)) = input.split_once('d') else {
            return Ok(ImageAge {
                duration: input.parse::<GoDuration>()?.0,
                days: false,
            });
        };
        if days.is_empty() || !days.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err("days must be a whole number before `d` (e.g. 30d)"));
        }
        let days: u64 = days.parse().map_err(|_| err("number too large"))?;
        if days > 366 {
            return Err(err("longer than a year"));
        }
        let rest = if rest.is_empty() {
            Duration::ZERO
        } else {
            rest.parse::<GoDuration>()
                .map_err(|_| err("after the days, Go syntax such as 12h"))?
                .0
        };
        Ok(ImageAge {
            duration: Duration::from_secs(days * 86_400) + rest,
            days: true,
        })
    }
}

impl fmt::Display for ImageAge {
    /// Days first when it was written with days (`30d`, `1d12h`), else Go's spelling.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.days {
            return GoDuration(self.duration).fmt(f);
        }
        let secs = self.duration.as_secs();
        let (days, rest) = (
            secs / 86_400,
            self.duration - Duration::from_secs(secs / 86_400 * 86_400),
        );
        write!(f, "{days}d")?;
        if !rest.is_zero() {
            GoDuration(rest).fmt(f)?;
        }
        Ok(())
    }
}

impl Serialize for ImageAge {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ImageAge {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for ImageAge {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ImageAge".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^([0-9]+d)?([0-9]+(ms|s|m|h))*$",
            "description": "an image age: Go-style duration with optional leading days, such as 72h, 30d, 1d12h"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_go_durations() {
        for (input, secs, canonical) in [
            ("90s", 90, "1m30s"),
            ("15m", 900, "15m"),
            ("1h30m", 5400, "1h30m"),
            ("2h", 7200, "2h"),
            ("0s", 0, "0s"),
            ("0", 0, "0s"),
        ] {
            let d: GoDuration = input.parse().unwrap();
            assert_eq!(d.0.as_secs(), secs, "{input}");
            assert_eq!(d.to_string(), canonical, "{input}");
        }
        assert_eq!("250ms".parse::<GoDuration>().unwrap().0.as_millis(), 250);
    }

    #[test]
    fn image_ages_take_days_and_render_as_written() {
        for (input, secs, canonical) in [
            ("30d", 30 * 86_400, "30d"),
            ("1d12h", 36 * 3_600, "1d12h"),
            ("72h", 72 * 3_600, "72h"),
            ("0s", 0, "0s"),
        ] {
            let a: ImageAge = input.parse().unwrap();
            assert_eq!(a.duration.as_secs(), secs, "{input}");
            assert_eq!(a.to_string(), canonical, "{input}");
        }
        for bad in ["d", "1.5d", "-1d", "400d", "3dx", "30 d", "1h2d"] {
            assert!(bad.parse::<ImageAge>().is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        for bad in ["", "15", "m", "1d", "1.5h", "-1s", "1h 30m", "99999999h"] {
            assert!(
                bad.parse::<GoDuration>().is_err(),
                "{bad} should be rejected"
            );
        }
    }
}
