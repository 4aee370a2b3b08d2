//! Durations as users write them: `"90s"`, `"5m"`, `"1h30m"`, `"250ms"` or a number of seconds.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A non-negative duration with millisecond precision, in the API's wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Dur(pub std::time::Duration);

impl Dur {
    /// A duration of `s` seconds.
    pub const fn secs(s: u64) -> Self {
        Dur(std::time::Duration::from_secs(s))
    }
    /// A duration of `ms` milliseconds.
    pub const fn millis(ms: u64) -> Self {
        Dur(std::time::Duration::from_millis(ms))
    }
    /// Whole milliseconds.
    pub fn as_millis(&self) -> i64 {
        self.0.as_millis() as i64
    }
    /// As a chrono duration, for instant arithmetic.
    pub fn to_chrono(self) -> chrono::Duration {
        chrono::Duration::milliseconds(self.as_millis())
    }
    /// Zero.
    pub const ZERO: Dur = Dur(std::time::Duration::ZERO);

    /// Whether this is zero.
    pub fn is_zero(&self) -> bool {
        self.0.is_zero()
    }
}

/// Why a duration string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: use forms like \"90s\", \"5m\", \"1h30m\", \"250ms\" or a number of seconds")]
pub struct DurationParseError {
    /// The text that failed to parse.
    pub input: String,
}

impl FromStr for Dur {
    type Err = DurationParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || DurationParseError { input: s.to_string() };
        let t = s.trim();
        if t.is_empty() {
            return Err(err());
        }
        if let Ok(n) = t.parse::<f64>() {
            if !n.is_finite() || n < 0.0 {
                return Err(err());
            }
            return Ok(Dur::millis((n * 1000.0).round() as u64));
        }
        let mut total_ms: u128 = 0;
        let mut rest = t;
        while !rest.is_empty() {
            let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(err)?;
            if digits == 0 {
                return Err(err());
            }
            let n: u128 = rest[..digits].parse().map_err(|_| err())?;
            rest = &rest[digits..];
            let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
            let unit_ms: u128 = match &rest[..unit_len] {
                "ms" => 1,
                "s" => 1_000,
                "m" => 60_000,
                "h" => 3_600_000,
                "d" => 86_400_000,
                _ => return Err(err()),
            };
            total_ms = total_ms
                .checked_add(n.checked_mul(unit_ms).ok_or_else(err)?)
                .ok_or_else(err)?;
            rest = &rest[unit_len..];
        }
        u64::try_from(total_ms).map(Dur::millis).map_err(|_| err())
    }
}

impl fmt::Display for Dur {
    /// Normalised form: `1h30m`, `90ms`, `0s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ms = self.0.as_millis();
        if ms == 0 {
            return f.write_str("0s");
        }
        for (unit, size) in [
            ("d", 86_400_000u128),
            ("h", 3_600_000),
            ("m", 60_000),
            ("s", 1_000),
            ("ms", 1),
        ] {
            if ms >= size {
                write!(f, "{}{}", ms / size, unit)?;
                ms %= size;
            }
        }
        Ok(())
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DurVisitor)
    }
}

/// Reads a duration from text (`"90s"`) or a number of seconds, without buffering the value
/// first (an untagged enum did, and built an error for every string it met: ~2 % of the
/// SQLite writer thread's time went to decoding durations in job specs).
struct DurVisitor;

impl serde::de::Visitor<'_> for DurVisitor {
    type Value = Dur;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration such as \"90s\" or \"1h30m\", or a number of seconds")
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Dur, E> {
        s.parse().map_err(E::custom)
    }

    fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Dur, E> {
        if n.is_finite() && n >= 0.0 {
            Ok(Dur::millis((n * 1000.0).round() as u64))
        } else {
            Err(E::custom(format!("invalid duration {n}: must be ≥ 0")))
        }
    }

    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Dur, E> {
        Ok(Dur::millis(n.saturating_mul(1000)))
    }

    fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Dur, E> {
        match u64::try_from(n) {
            Ok(n) => self.visit_u64(n),
            Err(_) => Err(E::custom(format!("invalid duration {n}: must be ≥ 0"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        assert_eq!("90s".parse::<Dur>().unwrap(), Dur::secs(90));
        assert_eq!("5m".parse::<Dur>().unwrap(), Dur::secs(300));
        assert_eq!("1h30m".parse::<Dur>().unwrap(), Dur::secs(5400));
        assert_eq!("250ms".parse::<Dur>().unwrap(), Dur::millis(250));
        assert_eq!("12".parse::<Dur>().unwrap(), Dur::secs(12));
        assert_eq!("1.5".parse::<Dur>().unwrap(), Dur::millis(1500));
    }

    #[test]
    fn refuses_garbage() {
        for bad in ["", "5x", "m5", "-1", "1h-5m", "h"] {
            assert!(bad.parse::<Dur>().is_err(), "{bad} should fail");
        }
    }

    #[test]
    fn displays_normalised() {
        assert_eq!(Dur::secs(5400).to_string(), "1h30m");
        assert_eq!(Dur::millis(1500).to_string(), "1s500ms");
        assert_eq!(Dur::secs(0).to_string(), "0s");
    }

    #[test]
    fn json_accepts_numbers_and_strings() {
        assert_eq!(serde_json::from_str::<Dur>("30").unwrap(), Dur::secs(30));
        assert_eq!(serde_json::from_str::<Dur>("\"2m\"").unwrap(), Dur::secs(120));
        assert_eq!(serde_json::to_string(&Dur::secs(120)).unwrap(), "\"2m\"");
        assert_eq!(serde_json::from_str::<Dur>("1.5").unwrap(), Dur::millis(1500));
    }

    #[test]
    fn json_refuses_negative_numbers_and_other_types_saying_what_a_duration_is() {
        for bad in ["-1", "-0.5"] {
            let e = serde_json::from_str::<Dur>(bad).unwrap_err().to_string();
            assert!(e.contains("must be ≥ 0"), "{bad}: {e}");
        }
        let e = serde_json::from_str::<Dur>("true").unwrap_err().to_string();
        assert!(e.contains("a duration such as"), "{e}");
        let e = serde_json::from_str::<Dur>("\"soon\"").unwrap_err().to_string();
        assert!(!e.is_empty());
    }
}
