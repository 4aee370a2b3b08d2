//! Environment values that may be secrets. A task's env value is a string, or `{"secret": "…"}`:
//! a secret reaches the payload as a plain variable, but the API never returns it (it reads
//! back as `{"secret": true}`), sked never logs it (`Debug` prints `***`), and the run's
//! captured output shows `***` where it would appear ([`mask`]), as CI systems do.
//!
//! `{"secret": true}` in a replacement (PUT, PATCH) keeps the secret the job already has under
//! that name, so a client can write back what it read; a create cannot use it (there is
//! nothing to keep), and validation says so.

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A task's environment: name → value.
pub type Env = BTreeMap<String, EnvValue>;

/// What `***` replaces in captured output.
pub const MASK: &str = "***";

/// One environment value.
#[derive(Clone, PartialEq, Eq)]
pub enum EnvValue {
    /// A plain value, returned by the API as given.
    Plain(String),
    /// A secret: given to the payload, never shown.
    Secret(String),
    /// `{"secret": true}`: the secret the job already has under this name (a replacement
    /// only; never stored).
    KeepSecret,
}

impl EnvValue {
    /// The value to give the payload (`None` for [`EnvValue::KeepSecret`]).
    pub fn value(&self) -> Option<&str> {
        match self {
            EnvValue::Plain(v) | EnvValue::Secret(v) => Some(v),
            EnvValue::KeepSecret => None,
        }
    }
}

impl From<&str> for EnvValue {
    fn from(v: &str) -> Self {
        EnvValue::Plain(v.to_string())
    }
}

impl From<String> for EnvValue {
    fn from(v: String) -> Self {
        EnvValue::Plain(v)
    }
}

impl fmt::Debug for EnvValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnvValue::Plain(v) => write!(f, "{v:?}"),
            EnvValue::Secret(_) | EnvValue::KeepSecret => f.write_str(MASK),
        }
    }
}

impl Serialize for EnvValue {
    /// As stored: a string, or `{"secret": "<value>"}`. The API writes [`redacted`] envs.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            EnvValue::Plain(v) => s.serialize_str(v),
            EnvValue::Secret(v) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("secret", v)?;
                m.end()
            }
            EnvValue::KeepSecret => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("secret", &true)?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for EnvValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = EnvValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a string, or {"secret": "<value>"}"#)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<EnvValue, E> {
                Ok(EnvValue::Plain(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<EnvValue, E> {
                Ok(EnvValue::Plain(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EnvValue, A::Error> {
                let Some(key) = map.next_key::<String>()? else {
                    return Err(de::Error::custom(r#"expected {"secret": "<value>"}"#));
                };
                if key != "secret" {
                    return Err(de::Error::unknown_field(&key, &["secret"]));
                }
                let value = match map.next_value::<serde_json::Value>()? {
                    serde_json::Value::String(v) => EnvValue::Secret(v),
                    serde_json::Value::Bool(true) => EnvValue::KeepSecret,
                    _ => {
                        return Err(de::Error::custom(
                            r#"a secret is {"secret": "<value>"} ({"secret": true} keeps the stored one)"#,
                        ));
                    }
                };
                if let Some(extra) = map.next_key::<String>()? {
                    return Err(de::Error::unknown_field(&extra, &["secret"]));
                }
                Ok(value)
            }
        }
        d.deserialize_any(V)
    }
}

/// The variables to give a payload, secrets as plain values (a [`EnvValue::KeepSecret`],
/// which validation keeps out of stored jobs, is left out).
pub fn payload_vars(env: &Env) -> impl Iterator<Item = (&str, &str)> {
    env.iter().filter_map(|(k, v)| v.value().map(|v| (k.as_str(), v)))
}

/// `env` as the API shows it: every secret as `{"secret": true}`.
pub fn redacted(env: &Env) -> Env {
    env.iter()
        .map(|(k, v)| {
            let shown = match v {
                EnvValue::Plain(p) => EnvValue::Plain(p.clone()),
                EnvValue::Secret(_) | EnvValue::KeepSecret => EnvValue::KeepSecret,
            };
            (k.clone(), shown)
        })
        .collect()
}

/// Whether `env` holds a secret (so its view must be redacted).
pub fn has_secrets(env: &Env) -> bool {
    env.values().any(|v| !matches!(v, EnvValue::Plain(_)))
}

/// Whether `env` asks to keep a stored secret ([`EnvValue::KeepSecret`]).
pub fn keeps_secrets(env: &Env) -> bool {
    env.values().any(|v| *v == EnvValue::KeepSecret)
}

/// Replaces each [`EnvValue::KeepSecret`] of `env` by the secret `old` has under that name;
/// the names it could not fill (no secret there) are returned.
pub fn keep_secrets(env: &mut Env, old: &Env) -> Vec<String> {
    let mut missing = Vec::new();
    for (name, value) in env.iter_mut() {
        if *value == EnvValue::KeepSecret {
            match old.get(name) {
                Some(EnvValue::Secret(s)) => *value = EnvValue::Secret(s.clone()),
                _ => missing.push(name.clone()),
            }
        }
    }
    missing
}

/// The secret values of `env`, longest first (so a secret containing another is masked whole).
pub fn secret_values(env: &Env) -> Vec<String> {
    let mut out: Vec<String> = env
        .values()
        .filter_map(|v| match v {
            EnvValue::Secret(s) if !s.is_empty() => Some(s.clone()),
            _ => None,
        })
        .collect();
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

/// `line` with every occurrence of each of `secrets` replaced by [`MASK`].
pub fn mask(line: &str, secrets: &[String]) -> String {
    let mut out = line.to_string();
    for s in secrets {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), MASK);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(json: serde_json::Value) -> Env {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn secrets_round_trip_as_stored_and_read_back_redacted() {
        let e = env(serde_json::json!({"LEVEL": "full", "TOKEN": {"secret": "s3cr3t"}}));
        assert_eq!(e["TOKEN"].value(), Some("s3cr3t"));
        assert_eq!(serde_json::to_value(&e).unwrap()["TOKEN"]["secret"], "s3cr3t");
        let shown = serde_json::to_value(redacted(&e)).unwrap();
        assert_eq!(shown, serde_json::json!({"LEVEL": "full", "TOKEN": {"secret": true}}));
        assert!(!format!("{e:?}").contains("s3cr3t"));
    }

    #[test]
    fn keep_fills_from_the_stored_secret_and_names_what_it_cannot() {
        let old = env(serde_json::json!({"TOKEN": {"secret": "s3cr3t"}, "PLAIN": "p"}));
        let mut new = env(serde_json::json!({"TOKEN": {"secret": true}, "PLAIN": {"secret": true}}));
        assert_eq!(keep_secrets(&mut new, &old), vec!["PLAIN".to_string()]);
        assert_eq!(new["TOKEN"], EnvValue::Secret("s3cr3t".into()));
    }

    #[test]
    fn bad_shapes_are_refused_and_output_is_masked() {
        for bad in [
            serde_json::json!({"X": {"secret": 1}}),
            serde_json::json!({"X": {"secret": false}}),
            serde_json::json!({"X": {"other": "v"}}),
            serde_json::json!({"X": {"secret": "v", "extra": 1}}),
            serde_json::json!({"X": 3}),
        ] {
            assert!(serde_json::from_value::<Env>(bad.clone()).is_err(), "{bad}");
        }
        let secrets = secret_values(&env(
            serde_json::json!({"A": {"secret": "abc"}, "B": {"secret": "abcdef"}}),
        ));
        assert_eq!(mask("token abcdef and abc", &secrets), "token *** and ***");
    }
}
