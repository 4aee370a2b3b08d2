//! Integer fields as JSON counts them: `3` and `3.0` are the same integer (JSON Schema's
//! `integer`, and what many JSON encoders write for a whole-valued number), so a job's
//! `priority`, `max_retries` and an HTTP task's `expect_status` accept both. A fraction, a
//! negative number or one beyond the field's type is refused as serde refuses it.
//!
//! Use with `#[serde(deserialize_with = "crate::integer::whole")]` (or `whole_opt` for an
//! `Option`); serialising is serde's own.

use serde::de::{self, Deserializer, Unexpected, Visitor};
use std::fmt;
use std::marker::PhantomData;

/// Reads a non-negative whole number (`3`, `3.0`) that fits `T`.
pub fn whole<'de, D: Deserializer<'de>, T: TryFrom<u64>>(d: D) -> Result<T, D::Error> {
    d.deserialize_any(Whole(PhantomData))
}

/// [`whole`], or `null`.
pub fn whole_opt<'de, D: Deserializer<'de>, T: TryFrom<u64>>(d: D) -> Result<Option<T>, D::Error> {
    d.deserialize_option(WholeOpt(PhantomData))
}

struct Whole<T>(PhantomData<T>);

impl<T: TryFrom<u64>> Visitor<'_> for Whole<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a whole number from 0 to {}", max::<T>())
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<T, E> {
        T::try_from(n).map_err(|_| E::invalid_value(Unexpected::Unsigned(n), &self))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<T, E> {
        match u64::try_from(n) {
            Ok(n) => self.visit_u64(n),
            Err(_) => Err(E::invalid_value(Unexpected::Signed(n), &self)),
        }
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<T, E> {
        // 2^64 as f64 is the first value past u64::MAX.
        if n.is_finite() && n.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&n) {
            self.visit_u64(n as u64)
        } else {
            Err(E::invalid_type(Unexpected::Float(n), &self))
        }
    }
}

struct WholeOpt<T>(PhantomData<T>);

impl<'de, T: TryFrom<u64>> Visitor<'de> for WholeOpt<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a whole number from 0 to {}, or null", max::<T>())
    }

    fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        whole(d).map(Some)
    }
}

/// The largest `u64` that fits `T` (for messages).
fn max<T: TryFrom<u64>>() -> u64 {
    let (mut lo, mut hi) = (0u64, u64::MAX);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if T::try_from(mid).is_ok() {
            lo = mid
        } else {
            hi = mid - 1
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize, PartialEq)]
    struct S {
        #[serde(deserialize_with = "super::whole")]
        p: u8,
        #[serde(default, deserialize_with = "super::whole_opt")]
        q: Option<u16>,
    }

    fn s(v: serde_json::Value) -> Result<S, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn whole_floats_are_integers_and_the_rest_is_refused() {
        assert_eq!(s(json!({"p": 7})), Ok(S { p: 7, q: None }));
        assert_eq!(s(json!({"p": 7.0, "q": 404.0})), Ok(S { p: 7, q: Some(404) }));
        assert_eq!(s(json!({"p": 7, "q": null})), Ok(S { p: 7, q: None }));
        for bad in [
            json!({"p": 7.5}),
            json!({"p": -1}),
            json!({"p": 256}),
            json!({"p": 256.0}),
            json!({"p": "7"}),
        ] {
            assert!(s(bad.clone()).is_err(), "{bad}");
        }
        assert!(s(json!({"p": 300})).unwrap_err().contains("0 to 255"));
    }
}
