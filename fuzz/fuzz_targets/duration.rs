//! Durations: `sked_core::duration::Dur` parsed from arbitrary text (`FromStr`, the forms
//! `"90s"`, `"1h30m"`, `"250ms"`, a number of seconds) and decoded from arbitrary JSON (a string
//! or a number, as job specs carry them).
//!
//! Checks, besides "no panic":
//! - a parsed `Dur` formats to its normalised form, which parses back to the same value, and
//!   formatting that gives the same text again;
//! - its JSON form (a string) decodes back to the same value;
//! - the input as a JSON string decodes exactly when the text parses, to the same value;
//! - a JSON integer of seconds and the same digits as text give the same value (up to 2^53 ms,
//!   where both are exact);
//! - whatever JSON decodes as a duration round-trips through its JSON form and its text form.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sked_core::duration::Dur;

/// The text form and the JSON form of `d` both read back as `d`, and the text form is stable.
fn round_trips(d: Dur) {
    let text = d.to_string();
    let back: Dur = text
        .parse()
        .unwrap_or_else(|e| panic!("{d:?} formats as {text:?}, which fails: {e}"));
    assert_eq!(back, d, "{text:?} reparses to another value");
    assert_eq!(back.to_string(), text, "the normalised form is not stable");
    let json = serde_json::to_string(&d).unwrap();
    let back: Dur = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{d:?} encodes as {json}, which fails: {e}"));
    assert_eq!(back, d, "{json} decodes to another value");
}

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = serde_json::from_slice::<Dur>(data) {
        round_trips(d);
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = text.parse::<Dur>();
    if let Ok(d) = parsed {
        round_trips(d);
    }
    let as_json_string = serde_json::to_string(text).unwrap();
    let decoded = serde_json::from_str::<Dur>(&as_json_string);
    assert_eq!(
        decoded.as_ref().ok(),
        parsed.as_ref().ok(),
        "{text:?} as text and as a JSON string disagree"
    );
    // A JSON integer: digits, no leading zero.
    let json_integer = text.bytes().all(|b| b.is_ascii_digit()) && (text == "0" || !text.starts_with('0'));
    if json_integer
        && let Ok(n) = text.parse::<u64>()
        && n <= (1u64 << 53) / 1000
    {
        let from_number = serde_json::from_str::<Dur>(text).ok();
        assert_eq!(from_number, parsed.ok(), "{n} as a JSON number and as text disagree");
        assert_eq!(from_number, Some(Dur::secs(n)));
    }
});
