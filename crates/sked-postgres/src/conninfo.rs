//! The connection string sked is given (`--database-url`, `SKED_DATABASE_URL`), read as libpq
//! reads it as far as TLS goes: `sslmode` with libpq's five values (`disable`, `prefer` — the
//! default —, `require`, `verify-ca`, `verify-full`), `sslrootcert` (a CA file, or `system`)
//! and a client certificate (`sslcert` and `sslkey`, PEM files, for `cert` authentication).
//! tokio-postgres knows only the first three modes and no root certificate, so this module takes
//! those two settings out of the string, in either of libpq's forms (a `postgres://` URL or
//! `key=value` pairs), and hands the rest to tokio-postgres as it was. What the settings mean for
//! the handshake is `tls`'s business, not this module's.
//!
//! Errors never quote the string: it may hold a password.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// libpq's `sslmode`: whether the connection is encrypted, and what of the server's
/// certificate is checked (see `tls` for the checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SslMode {
    /// Never TLS.
    Disable,
    /// TLS if the server offers it, plain otherwise (libpq's default).
    #[default]
    Prefer,
    /// TLS or no connection.
    Require,
    /// TLS, and the server's certificate chains to a trusted root.
    VerifyCa,
    /// TLS, the certificate chains to a trusted root and names the host connected to.
    VerifyFull,
}

impl SslMode {
    /// What tokio-postgres is told: whether TLS is tried and whether it is a must.
    fn wire(self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as Wire;
        match self {
            SslMode::Disable => Wire::Disable,
            SslMode::Prefer => Wire::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Wire::Require,
        }
    }
}

impl FromStr for SslMode {
    type Err = ConnInfoError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "disable" => Ok(SslMode::Disable),
            "prefer" => Ok(SslMode::Prefer),
            "require" => Ok(SslMode::Require),
            "verify-ca" => Ok(SslMode::VerifyCa),
            "verify-full" => Ok(SslMode::VerifyFull),
            // libpq's `allow` (plain first, TLS if the server insists) is not offered:
            // tokio-postgres has no such order, and it is never what one wants.
            other => Err(ConnInfoError::SslMode(other.to_owned())),
        }
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        })
    }
}

/// libpq's `sslrootcert`: where the trusted roots come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    /// A PEM file of one or more CA certificates.
    File(PathBuf),
    /// `system`: the platform's trust store.
    System,
}

/// A client certificate the connection presents: `sslcert` and `sslkey`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// The certificate (then any intermediates), PEM.
    pub cert: PathBuf,
    /// Its private key, PEM.
    pub key: PathBuf,
}

/// The TLS settings of a connection string.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsSettings {
    /// `sslmode`, `prefer` when absent.
    pub mode: SslMode,
    /// `sslrootcert`, if given.
    pub root_cert: Option<RootCert>,
    /// `sslcert` and `sslkey`, if given (libpq's default files under `~/.postgresql/` are not
    /// looked for).
    pub client_cert: Option<ClientCert>,
}

/// A connection string taken apart: tokio-postgres's settings and the TLS ones.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// Everything but the TLS settings (whose mode is set to what tokio-postgres understands).
    pub config: tokio_postgres::Config,
    /// `sslmode` and `sslrootcert`.
    pub tls: TlsSettings,
}

/// The connection string cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConnInfoError {
    /// `sslmode` has a value libpq (or sked) does not know.
    #[error("invalid sslmode `{0}`: expected disable, prefer, require, verify-ca or verify-full")]
    SslMode(String),
    /// `sslrootcert=system` with a mode that does not check the host name (libpq refuses it:
    /// any certificate a public CA issued would pass).
    #[error("sslrootcert=system needs sslmode=verify-full, not `{0}`")]
    WeakModeWithSystemRoots(SslMode),
    /// `sslcert` without `sslkey`, or the other way round.
    #[error("sslcert and sslkey go together: the URL names only `{0}`")]
    HalfClientCert(&'static str),
    /// A percent-encoded key or value of the URL is not UTF-8 once decoded.
    #[error("the URL's `{0}` parameter is not valid UTF-8 once percent-decoded")]
    NotUtf8(&'static str),
    /// The `key=value` form does not parse.
    #[error("invalid connection string: {0}")]
    Syntax(&'static str),
    /// tokio-postgres refused the rest.
    #[error(transparent)]
    Other(tokio_postgres::Error),
}

/// Reads a connection string, URL or `key=value` form.
pub fn parse(s: &str) -> Result<ConnInfo, ConnInfoError> {
    let (rest, found) = if s.starts_with("postgres://") || s.starts_with("postgresql://") {
        take_from_url(s)?
    } else {
        take_from_pairs(s)?
    };
    let mut config: tokio_postgres::Config = rest.parse().map_err(ConnInfoError::Other)?;
    let root_cert = found.sslrootcert.map(|v| match v.as_str() {
        "system" => RootCert::System,
        _ => RootCert::File(PathBuf::from(v)),
    });
    let mode = match (found.sslmode, &root_cert) {
        (Some(mode), _) => mode.parse()?,
        // As libpq: `system` roots alone mean verify-full.
        (None, Some(RootCert::System)) => SslMode::VerifyFull,
        (None, _) => SslMode::Prefer,
    };
    if root_cert == Some(RootCert::System) && mode != SslMode::VerifyFull {
        return Err(ConnInfoError::WeakModeWithSystemRoots(mode));
    }
    let client_cert = match (found.sslcert, found.sslkey) {
        (Some(cert), Some(key)) => Some(ClientCert {
            cert: cert.into(),
            key: key.into(),
        }),
        (Some(_), None) => return Err(ConnInfoError::HalfClientCert("sslcert")),
        (None, Some(_)) => return Err(ConnInfoError::HalfClientCert("sslkey")),
        (None, None) => None,
    };
    config.ssl_mode(mode.wire());
    Ok(ConnInfo {
        config,
        tls: TlsSettings {
            mode,
            root_cert,
            client_cert,
        },
    })
}

/// The TLS settings found in the string (the last of each wins, as with libpq).
#[derive(Default)]
struct Found {
    sslmode: Option<String>,
    sslrootcert: Option<String>,
    sslcert: Option<String>,
    sslkey: Option<String>,
}

impl Found {
    /// Keeps `value` if `key` is one of ours; says whether it was.
    fn take(&mut self, key: &str, value: String) -> bool {
        match key {
            "sslmode" => self.sslmode = Some(value),
            "sslrootcert" => self.sslrootcert = Some(value),
            "sslcert" => self.sslcert = Some(value),
            "sslkey" => self.sslkey = Some(value),
            _ => return false,
        }
        true
    }
}

/// `postgres://[user[:password]@]host[:port][,...][/dbname][?key=value&...]`: the query's
/// pairs of ours are removed, the others kept byte for byte. The query starts at the first `?`
/// after the credentials, as tokio-postgres reads it.
fn take_from_url(s: &str) -> Result<(String, Found), ConnInfoError> {
    let mut found = Found::default();
    let after_credentials = s.find('@').map_or(0, |at| at + 1);
    let Some(question) = s[after_credentials..].find('?').map(|q| after_credentials + q) else {
        return Ok((s.to_owned(), found));
    };
    let mut kept = Vec::new();
    for pair in s[question + 1..].split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = match percent_encoding::percent_decode_str(key).decode_utf8_lossy().as_ref() {
            "sslmode" => "sslmode",
            "sslrootcert" => "sslrootcert",
            "sslcert" => "sslcert",
            "sslkey" => "sslkey",
            _ => {
                kept.push(pair);
                continue;
            }
        };
        let value = percent_encoding::percent_decode_str(value)
            .decode_utf8()
            .map_err(|_| ConnInfoError::NotUtf8(name))?;
        found.take(name, value.into_owned());
    }
    let mut rest = s[..question].to_owned();
    if !kept.is_empty() {
        rest.push('?');
        rest.push_str(&kept.join("&"));
    }
    Ok((rest, found))
}

/// `key=value key='quoted value' ...`: the pairs of ours are removed, the others written
/// back quoted (the same settings, spelled so tokio-postgres reads them back exactly).
fn take_from_pairs(s: &str) -> Result<(String, Found), ConnInfoError> {
    let mut found = Found::default();
    let mut rest = String::new();
    for (key, value) in Pairs::new(s) {
        let (key, value) = (key, value?);
        if !found.take(key, value.clone()) {
            if !rest.is_empty() {
                rest.push(' ');
            }
            rest.push_str(key);
            rest.push_str("='");
            for c in value.chars() {
                if c == '\'' || c == '\\' {
                    rest.push('\\');
                }
                rest.push(c);
            }
            rest.push('\'');
        }
    }
    Ok((rest, found))
}

/// The `key=value` pairs of libpq's other form, read as tokio-postgres reads them: whitespace
/// between pairs and around `=`, values bare or in single quotes, `\` escaping the next
/// character in both.
struct Pairs<'a> {
    rest: &'a str,
}

impl<'a> Pairs<'a> {
    fn new(s: &'a str) -> Self {
        Pairs { rest: s }
    }

    fn value(&mut self) -> Result<String, ConnInfoError> {
        let quoted = self.rest.starts_with('\'');
        if quoted {
            self.rest = &self.rest[1..];
        }
        let mut value = String::new();
        let mut chars = self.rest.char_indices();
        loop {
            match chars.next() {
                Some((i, '\'')) if quoted => {
                    self.rest = &self.rest[i + 1..];
                    return Ok(value);
                }
                Some((i, c)) if c.is_whitespace() && !quoted => {
                    self.rest = &self.rest[i..];
                    break;
                }
                Some((_, '\\')) => value.extend(chars.next().map(|(_, c)| c)),
                Some((_, c)) => value.push(c),
                None if quoted => {
                    return Err(ConnInfoError::Syntax("unterminated quoted value"));
                }
                None => {
                    self.rest = "";
                    break;
                }
            }
        }
        if value.is_empty() {
            return Err(ConnInfoError::Syntax("a key without a value"));
        }
        Ok(value)
    }
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (&'a str, Result<String, ConnInfoError>);

    fn next(&mut self) -> Option<Self::Item> {
        self.rest = self.rest.trim_start();
        if self.rest.is_empty() {
            return None;
        }
        let end = self
            .rest
            .find(|c: char| c.is_whitespace() || c == '=')
            .unwrap_or(self.rest.len());
        let key = &self.rest[..end];
        self.rest = self.rest[end..].trim_start();
        let Some(after) = self.rest.strip_prefix('=') else {
            self.rest = "";
            return Some((key, Err(ConnInfoError::Syntax("a key without `=`"))));
        };
        self.rest = after.trim_start();
        let value = self.value();
        if value.is_err() {
            self.rest = "";
        }
        Some((key, value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_postgres::config::{Host, SslMode as Wire};

    fn tls(s: &str) -> TlsSettings {
        parse(s).unwrap().tls
    }

    #[test]
    fn without_settings_prefer_as_libpq() {
        let info = parse("postgres://sked:pw@db:5433/sked").unwrap();
        assert_eq!(info.tls, TlsSettings::default());
        assert_eq!(info.tls.mode, SslMode::Prefer);
        assert_eq!(info.config.get_ssl_mode(), Wire::Prefer);
        assert_eq!(info.config.get_password(), Some(&b"pw"[..]));
        assert_eq!(info.config.get_ports(), &[5433]);
    }

    #[test]
    fn url_settings_are_taken_out_and_the_rest_kept() {
        let info = parse(
            "postgresql://u:p%40ss@db.example/app?application_name=x&sslmode=verify-full\
             &sslrootcert=%2Fetc%2Fca.pem&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(info.tls.mode, SslMode::VerifyFull);
        assert_eq!(info.tls.root_cert, Some(RootCert::File("/etc/ca.pem".into())));
        assert_eq!(info.config.get_ssl_mode(), Wire::Require);
        assert_eq!(info.config.get_application_name(), Some("x"));
        assert_eq!(info.config.get_password(), Some(&b"p@ss"[..]));
        assert_eq!(info.config.get_dbname(), Some("app"));
        assert_eq!(
            info.config.get_connect_timeout(),
            Some(&std::time::Duration::from_secs(3))
        );
        assert_eq!(info.config.get_hosts(), &[Host::Tcp("db.example".into())]);
    }

    #[test]
    fn a_query_holding_only_ours_leaves_none() {
        let info = parse("postgres://db/app?sslmode=verify-ca").unwrap();
        assert_eq!(info.tls.mode, SslMode::VerifyCa);
        assert_eq!(info.config.get_dbname(), Some("app"));
    }

    #[test]
    fn each_mode_reaches_tokio_postgres_as_what_it_knows() {
        for (mode, wire) in [
            ("disable", Wire::Disable),
            ("prefer", Wire::Prefer),
            ("require", Wire::Require),
            ("verify-ca", Wire::Require),
            ("verify-full", Wire::Require),
        ] {
            let info = parse(&format!("postgres://db/app?sslmode={mode}")).unwrap();
            assert_eq!(info.tls.mode.to_string(), mode);
            assert_eq!(info.config.get_ssl_mode(), wire, "{mode}");
        }
    }

    #[test]
    fn key_value_form() {
        let info = parse(
            "host=db port=5433 user=sked password='it\\'s secret' sslmode = verify-full \
             sslrootcert='/etc/my ca.pem' dbname=app",
        )
        .unwrap();
        assert_eq!(info.tls.mode, SslMode::VerifyFull);
        assert_eq!(info.tls.root_cert, Some(RootCert::File("/etc/my ca.pem".into())));
        assert_eq!(info.config.get_password(), Some(&b"it's secret"[..]));
        assert_eq!(info.config.get_dbname(), Some("app"));
        assert_eq!(info.config.get_ports(), &[5433]);
        assert_eq!(info.config.get_ssl_mode(), Wire::Require);
    }

    #[test]
    fn key_value_syntax_errors_are_refused() {
        for s in ["host=db password='open", "host", "host= "] {
            assert!(matches!(parse(s), Err(ConnInfoError::Syntax(_))), "{s}");
        }
    }

    #[test]
    fn a_bad_mode_is_refused_by_name() {
        for s in [
            "postgres://u:secret@db/app?sslmode=verify_full",
            "host=db password=secret sslmode=verify_full",
        ] {
            let err = parse(s).unwrap_err();
            let message = err.to_string();
            assert!(message.contains("`verify_full`"), "{message}");
            assert!(!message.contains("secret"), "{message}");
        }
        assert!(matches!(
            parse("postgres://db/app?sslmode=allow"),
            Err(ConnInfoError::SslMode(m)) if m == "allow"
        ));
    }

    #[test]
    fn system_roots_mean_verify_full_and_refuse_weaker_modes() {
        assert_eq!(
            tls("postgres://db/app?sslrootcert=system"),
            TlsSettings {
                mode: SslMode::VerifyFull,
                root_cert: Some(RootCert::System),
                client_cert: None,
            }
        );
        assert!(matches!(
            parse("postgres://db/app?sslrootcert=system&sslmode=require"),
            Err(ConnInfoError::WeakModeWithSystemRoots(SslMode::Require))
        ));
    }

    #[test]
    fn other_errors_do_not_quote_the_string() {
        let err = parse("postgres://u:secret@db/app?nonsense=1").unwrap_err();
        assert!(matches!(err, ConnInfoError::Other(_)));
        assert!(!err.to_string().contains("secret"), "{err}");
    }

    #[test]
    fn a_client_certificate_needs_both_files() {
        assert_eq!(
            tls("postgres://db/app?sslcert=/c.pem&sslkey=/k.pem").client_cert,
            Some(ClientCert {
                cert: "/c.pem".into(),
                key: "/k.pem".into()
            })
        );
        assert_eq!(
            tls("host=db sslkey=/k.pem sslcert=/c.pem").client_cert.map(|c| c.key),
            Some("/k.pem".into())
        );
        assert!(matches!(
            parse("postgres://db/app?sslcert=/c.pem"),
            Err(ConnInfoError::HalfClientCert("sslcert"))
        ));
    }
}
