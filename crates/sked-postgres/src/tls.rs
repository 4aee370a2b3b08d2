//! What a connection string's TLS settings ([`TlsSettings`]: libpq's `sslmode`, `sslrootcert`,
//! `sslcert` and `sslkey`) mean for the handshake: a rustls client configuration behind
//! tokio-postgres-rustls's connector, checking as much of the server's certificate as libpq
//! would.
//!
//! | `sslmode`                         | encrypted        | certificate checked            |
//! |-----------------------------------|------------------|--------------------------------|
//! | `disable`                         | no               | —                              |
//! | `prefer` (default), `require`     | if offered / yes | nothing; the chain if `sslrootcert` names a file (as libpq) |
//! | `verify-ca`                       | yes              | chains to a trusted root       |
//! | `verify-full`                     | yes              | chains, and names the host (DNS name or IP address) |
//!
//! Trusted roots: the `sslrootcert` file's certificates; without one (or with `system`) the
//! platform's store (rustls-native-certs), or Mozilla's (webpki-roots) where the platform has
//! none. (libpq would look for `~/.postgresql/root.crt` instead, and fail without it.)
//!
//! With `sslcert` and `sslkey` the connection presents that client certificate (for the
//! server's `cert` authentication or `clientcert=verify-*`).
//!
//! The files are read when the pool is opened (a missing one fails the start) and again, for
//! the next new connection, once one of them has a new modification time ([`TlsConnector`]):
//! a certificate rotated in place (cert-manager, a Kubernetes Secret's update) is picked up
//! without a restart. Files that cannot be used after a change are reported and the previous
//! ones kept.
//!
//! The crypto provider is ring, chosen here rather than process-wide: builds with the AWS SDK
//! link aws-lc-rs too, and rustls will not pick between two. This module decides nothing about
//! the connection string's syntax (`conninfo`'s business).

use crate::conninfo::{ClientCert, RootCert, SslMode, TlsSettings};
use rustls::DigitallySignedStruct;
use rustls::SignatureScheme;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{WebPkiServerVerifier, verify_server_cert_signed_by_trust_anchor};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, RootCertStore};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The TLS settings cannot be put to use.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The `sslrootcert` file could not be read as PEM.
    #[error("could not read sslrootcert `{path}`")]
    ReadRootCert {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The `sslrootcert` file holds a certificate that cannot be a trust anchor.
    #[error("sslrootcert `{path}` holds an unusable certificate")]
    BadRootCert {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::Error,
    },
    /// The client certificate or its key could not be read.
    #[error("could not read {what} `{path}`")]
    ReadClientCert {
        /// `sslcert` or `sslkey`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// No trusted roots could be found for a mode that verifies.
    #[error("no trusted root certificates for sslmode={0}: name a CA file with sslrootcert")]
    NoRoots(SslMode),
    /// rustls refused the configuration.
    #[error("could not configure TLS")]
    Config(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// What of the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Nothing: the session is encrypted, against a passive eavesdropper only.
    Nothing,
    /// It chains to a trusted root, whatever name it holds.
    Chain,
    /// It chains to a trusted root and names the host.
    ChainAndName,
}

impl Check {
    fn of(settings: &TlsSettings) -> Check {
        match settings.mode {
            SslMode::VerifyFull => Check::ChainAndName,
            SslMode::VerifyCa => Check::Chain,
            // libpq verifies the chain in these modes too when given a CA file.
            _ if matches!(settings.root_cert, Some(RootCert::File(_))) => Check::Chain,
            _ => Check::Nothing,
        }
    }
}

/// The TLS side of every new connection: tokio-postgres-rustls's connector for the settings,
/// built again when one of the files it was built from has changed since. Cheap to clone (the
/// clones share the connector).
#[derive(Clone)]
pub struct TlsConnector {
    /// What to build from.
    settings: Arc<TlsSettings>,
    /// The connector, and the modification times of the files it was built from.
    built: Arc<Mutex<(Stamp, MakeRustlsConnect)>>,
}

/// The modification time of each file the settings name (`None`: unreadable).
type Stamp = Vec<Option<SystemTime>>;

impl TlsConnector {
    /// Builds the connector, reading the files the settings name.
    pub(crate) fn new(settings: TlsSettings) -> Result<TlsConnector, TlsError> {
        let stamp = stamp(&settings);
        let connector = connector(&settings)?;
        Ok(TlsConnector {
            settings: Arc::new(settings),
            built: Arc::new(Mutex::new((stamp, connector))),
        })
    }

    /// The connector for a new connection: rebuilt first if a file has changed.
    fn current(&self) -> MakeRustlsConnect {
        let mut built = self.built.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = stamp(&self.settings);
        if now != built.0 {
            match connector(&self.settings) {
                Ok(connector) => {
                    tracing::info!("the database's TLS files changed: new connections use them");
                    *built = (now, connector);
                }
                // Tried again at the next connection: a rotation may be half done.
                Err(error) => tracing::warn!(
                    error = %error,
                    "the database's TLS files changed but cannot be used; new connections keep the previous ones"
                ),
            }
        }
        built.1.clone()
    }
}

impl<S> MakeTlsConnect<S> for TlsConnector
where
    MakeRustlsConnect: MakeTlsConnect<S>,
{
    type Stream = <MakeRustlsConnect as MakeTlsConnect<S>>::Stream;
    type TlsConnect = <MakeRustlsConnect as MakeTlsConnect<S>>::TlsConnect;
    type Error = <MakeRustlsConnect as MakeTlsConnect<S>>::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<Self::TlsConnect, Self::Error> {
        self.current().make_tls_connect(domain)
    }
}

/// The modification times of the files `settings` names.
fn stamp(settings: &TlsSettings) -> Stamp {
    let root = match &settings.root_cert {
        Some(RootCert::File(path)) => Some(path.as_path()),
        _ => None,
    };
    let client = settings
        .client_cert
        .iter()
        .flat_map(|c| [c.cert.as_path(), c.key.as_path()]);
    root.into_iter()
        .chain(client)
        .map(|path| std::fs::metadata(path).and_then(|m| m.modified()).ok())
        .collect()
}

/// The connector for `settings` (the roots and the client certificate are loaded here).
fn connector(settings: &TlsSettings) -> Result<MakeRustlsConnect, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let algorithms = provider.signature_verification_algorithms;
    let verifier: Arc<dyn ServerCertVerifier> = match Check::of(settings) {
        Check::Nothing => Arc::new(Verifier {
            roots: None,
            algorithms,
        }),
        Check::Chain => Arc::new(Verifier {
            roots: Some(roots(settings)?),
            algorithms,
        }),
        Check::ChainAndName => WebPkiServerVerifier::builder_with_provider(roots(settings)?, provider.clone())
            .build()
            .map_err(|e| TlsError::Config(Box::new(e)))?,
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(Box::new(e)))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match &settings.client_cert {
        None => config.with_no_client_auth(),
        Some(client) => {
            let (chain, key) = client_cert(client)?;
            config
                .with_client_auth_cert(chain, key)
                .map_err(|e| TlsError::Config(Box::new(e)))?
        }
    };
    Ok(MakeRustlsConnect::new(config))
}

/// The client certificate's chain and key, from their PEM files.
fn client_cert(client: &ClientCert) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let read_err = |what, path: &Path| {
        let path = path.to_owned();
        move |source| TlsError::ReadClientCert { what, path, source }
    };
    let chain = CertificateDer::pem_file_iter(&client.cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(read_err("sslcert", &client.cert))?;
    let key = PrivateKeyDer::from_pem_file(&client.key).map_err(read_err("sslkey", &client.key))?;
    Ok((chain, key))
}

/// The trusted roots for a mode that verifies.
fn roots(settings: &TlsSettings) -> Result<Arc<RootCertStore>, TlsError> {
    let store = match &settings.root_cert {
        Some(RootCert::File(path)) => file_roots(path)?,
        Some(RootCert::System) | None => platform_roots(),
    };
    if store.is_empty() {
        return Err(TlsError::NoRoots(settings.mode));
    }
    Ok(Arc::new(store))
}

fn file_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path).map_err(|source| TlsError::ReadRootCert {
        path: path.to_owned(),
        source,
    })?;
    for cert in certs {
        let cert = cert.map_err(|source| TlsError::ReadRootCert {
            path: path.to_owned(),
            source,
        })?;
        store.add(cert).map_err(|source| TlsError::BadRootCert {
            path: path.to_owned(),
            source,
        })?;
    }
    Ok(store)
}

/// The platform's trust store, or Mozilla's roots where the platform has none (a bare
/// container image).
fn platform_roots() -> RootCertStore {
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        tracing::warn!(%error, "could not load some of the platform's root certificates");
    }
    let mut store = RootCertStore::empty();
    let (added, _ignored) = store.add_parsable_certificates(found.certs);
    if added == 0 {
        tracing::info!("no platform root certificates; trusting Mozilla's (webpki-roots)");
        store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    store
}

/// The verifier of [`Check::Nothing`] (no roots) and [`Check::Chain`] (roots, any name). The
/// handshake's signatures are checked either way: they prove the peer holds the certificate's
/// key, which channel binding and the encryption itself rest on.
#[derive(Debug)]
struct Verifier {
    /// The trust anchors the certificate must chain to; `None`: anything is accepted.
    roots: Option<Arc<RootCertStore>>,
    /// The provider's signature algorithms.
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
            verify_server_cert_signed_by_trust_anchor(&cert, roots, intermediates, now, self.algorithms.all)?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(mode: SslMode, root_cert: Option<RootCert>) -> TlsSettings {
        TlsSettings {
            mode,
            root_cert,
            client_cert: None,
        }
    }

    #[test]
    fn what_each_mode_checks() {
        let file = || Some(RootCert::File("/ca.pem".into()));
        assert_eq!(Check::of(&settings(SslMode::Disable, None)), Check::Nothing);
        assert_eq!(Check::of(&settings(SslMode::Prefer, None)), Check::Nothing);
        assert_eq!(Check::of(&settings(SslMode::Require, None)), Check::Nothing);
        assert_eq!(Check::of(&settings(SslMode::Require, file())), Check::Chain);
        assert_eq!(Check::of(&settings(SslMode::Prefer, file())), Check::Chain);
        assert_eq!(Check::of(&settings(SslMode::VerifyCa, None)), Check::Chain);
        assert_eq!(Check::of(&settings(SslMode::VerifyFull, file())), Check::ChainAndName);
    }

    #[test]
    fn a_missing_ca_file_is_named() {
        let missing = std::env::temp_dir().join("sked-no-such-ca.pem");
        let Err(err) = connector(&settings(SslMode::VerifyFull, Some(RootCert::File(missing.clone())))) else {
            panic!("a missing CA file was accepted");
        };
        assert!(err.to_string().contains(&*missing.to_string_lossy()), "{err}");
    }

    #[test]
    fn modes_without_a_file_use_default_roots() {
        // The platform's store or Mozilla's: never empty.
        assert!(!roots(&settings(SslMode::VerifyFull, None)).unwrap().is_empty());
    }
}
