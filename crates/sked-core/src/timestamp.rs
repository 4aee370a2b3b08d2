//! Timestamps: UTC instants with millisecond precision, written as RFC 3339 (`…T09:00:00.000Z`).

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use serde::{Deserialize, Deserializer, Serializer};

/// The one instant type of sked: UTC, compared and stored at millisecond precision.
pub type Timestamp = DateTime<Utc>;

/// Truncates an instant to whole milliseconds (what every store keeps).
pub fn trunc_ms(t: Timestamp) -> Timestamp {
    from_ms(t.timestamp_millis())
}

/// Milliseconds since the Unix epoch to an instant.
pub fn from_ms(ms: i64) -> Timestamp {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// RFC 3339 UTC with milliseconds, the API's timestamp format.
pub fn format(t: &Timestamp) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Parses RFC 3339 with any offset into UTC.
pub fn parse(s: &str) -> Result<Timestamp, chrono::ParseError> {
    DateTime::parse_from_rfc3339(s).map(|t| t.with_timezone(&Utc))
}

/// serde helpers for `Timestamp` fields in the API format.
pub mod serde_ms {
    use super::*;

    /// Serializes as RFC 3339 with milliseconds.
    pub fn serialize<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format(t))
    }

    /// Deserializes RFC 3339 with any offset.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let s = String::deserialize(d)?;
        parse(&s).map_err(|e| serde::de::Error::custom(format!("invalid timestamp {s:?}: {e}")))
    }
}

/// serde helpers for `Option<Timestamp>` fields (absent or `null` is `None`).
pub mod serde_ms_opt {
    use super::*;

    /// Serializes as RFC 3339 with milliseconds, or `null`.
    pub fn serialize<S: Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&format(t)),
            None => s.serialize_none(),
        }
    }

    /// Deserializes RFC 3339 with any offset, or `null`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        let s = Option::<String>::deserialize(d)?;
        s.map(|s| parse(&s).map_err(|e| serde::de::Error::custom(format!("invalid timestamp {s:?}: {e}"))))
            .transpose()
    }
}
