//! Timestamps: `sked_core::timestamp::parse` on arbitrary text (RFC 3339, any offset) and
//! `format` (RFC 3339 UTC with milliseconds, the API's form), and `from_ms`/`trunc_ms` (what
//! stores keep: epoch milliseconds) on arbitrary instants.
//!
//! Checks, besides "no panic":
//! - parse → format → parse is stable: the formatted text parses, to the same epoch
//!   milliseconds, and formats to the same text again; the `serde_ms` field helpers agree with
//!   `parse`/`format`;
//!   (for instants of years 0 to 9999: an offset can carry a parsed instant into year -1 or
//!   10000, which RFC 3339 cannot write, and validation refuses years outside 1970..=9999);
//! - the epoch milliseconds of an instant survive `from_ms` and `trunc_ms`, and a whole-ms
//!   instant of years 0..=9999 formats and parses back to itself exactly.
//!
//! Input: the text to parse; its first 8 bytes (i64 LE) are also an instant in ms.

#![no_main]

use chrono::Datelike;
use libfuzzer_sys::fuzz_target;
use sked_core::Timestamp;
use sked_core::timestamp::{self, format, from_ms, parse, trunc_ms};

/// An instant RFC 3339 can write (four-digit years).
fn writable(t: &Timestamp) -> bool {
    (0..=9999).contains(&t.year())
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Field {
    #[serde(with = "timestamp::serde_ms")]
    at: Timestamp,
    #[serde(default, with = "timestamp::serde_ms_opt")]
    maybe: Option<Timestamp>,
}

fn stable(t: Timestamp, from: &str) {
    let text = format(&t);
    if !writable(&t) {
        return;
    }
    let back = parse(&text).unwrap_or_else(|e| panic!("{from:?} formats as {text:?}, which fails: {e}"));
    assert_eq!(
        back.timestamp_millis(),
        t.timestamp_millis(),
        "{from:?} → {text:?} moved"
    );
    assert_eq!(format(&back), text, "{from:?}: format is not stable");
    assert_eq!(trunc_ms(back), trunc_ms(t));

    let json = serde_json::to_string(&Field { at: t, maybe: Some(t) }).unwrap();
    assert_eq!(json, format!(r#"{{"at":"{text}","maybe":"{text}"}}"#));
    let field: Field = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json} fails: {e}"));
    assert_eq!(
        (field.at, field.maybe),
        (back, Some(back)),
        "serde_ms and parse disagree"
    );
}

fuzz_target!(|data: &[u8]| {
    let mut ms = [0u8; 8];
    let n = data.len().min(8);
    ms[..n].copy_from_slice(&data[..n]);
    let ms = i64::from_le_bytes(ms);
    let t = from_ms(ms);
    if t != Timestamp::MIN_UTC {
        assert_eq!(t.timestamp_millis(), ms, "from_ms loses milliseconds");
        assert_eq!(trunc_ms(t), t);
        if writable(&t) {
            assert_eq!(parse(&format(&t)), Ok(t), "{t:?} does not read back exactly");
        }
    }
    stable(t, "(from_ms)");

    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = parse(text);
    let as_field = serde_json::from_value::<Field>(serde_json::json!({ "at": text }));
    assert_eq!(
        as_field.as_ref().ok().map(|f| f.at),
        parsed.ok(),
        "serde_ms and parse disagree on {text:?}"
    );
    if let Ok(t) = parsed {
        assert_eq!(trunc_ms(t).timestamp_millis(), t.timestamp_millis());
        stable(t, text);
    }
});
