//! TLS to PostgreSQL against a real server: a private cluster serving TLS with a certificate
//! for `localhost` and `127.0.0.1`, issued by a CA made here, and each `sslmode` the URL can
//! carry — what encrypts, what verifies, and what fails, with errors that say why.
//!
//! Names are checked without resolving them: the URLs give `host` (the name the certificate
//! must hold) and `hostaddr=127.0.0.1` (where to connect), as libpq allows.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use sked_core::ports::{Clock, SystemClock};
use sked_postgres::testing::{PgServer, ServerTls, postgres};
use sked_postgres::{ConnectError, PgDb, PgOptions, PgQueue};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A certificate authority: its certificate (PEM), and what signs with it.
struct Ca {
    name: String,
    pem: String,
    /// The certificate in a file, once asked for.
    pem_file: OnceLock<PathBuf>,
    issuer: Issuer<'static, KeyPair>,
}

/// Where the tests' certificate files go: the TLS server's directory, removed with it when
/// the test process exits.
fn files_dir() -> PathBuf {
    let dir = tls_server().log().parent().unwrap().join("test-files");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca {
            name: name.to_owned(),
            pem: cert.pem(),
            pem_file: OnceLock::new(),
            issuer: Issuer::new(params, key),
        }
    }

    /// The CA's certificate as a PEM file (for `sslrootcert`).
    fn pem_file(&self) -> &PathBuf {
        self.pem_file.get_or_init(|| {
            let path = files_dir().join(format!("{}.pem", self.name));
            std::fs::write(&path, &self.pem).unwrap();
            path
        })
    }

    /// A client certificate for user `cn`, in two PEM files (certificate, key).
    fn client_cert(&self, cn: &str) -> (PathBuf, PathBuf) {
        let base = files_dir().join(format!("client-{cn}"));
        let files = (base.with_extension("crt"), base.with_extension("key"));
        self.write_client_cert(cn, &files);
        files
    }

    /// Writes a new client certificate for user `cn` into `files` (certificate, key).
    fn write_client_cert(&self, cn: &str, (cert_file, key_file): &(PathBuf, PathBuf)) {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        std::fs::write(cert_file, cert.pem()).unwrap();
        std::fs::write(key_file, key.serialize_pem()).unwrap();
    }

    /// A server certificate for `names` (DNS names or IP addresses).
    fn server_tls(&self, names: &[&str]) -> ServerTls {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, "sked test server");
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        ServerTls {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            client_ca_pem: Some(self.pem.clone()),
        }
    }
}

/// The CA the TLS server's certificate comes from.
fn ca() -> &'static Ca {
    static CA: OnceLock<Ca> = OnceLock::new();
    CA.get_or_init(|| Ca::new("sked-test-ca"))
}

/// A CA that issued nothing the server holds.
fn other_ca() -> &'static Ca {
    static CA: OnceLock<Ca> = OnceLock::new();
    CA.get_or_init(|| Ca::new("sked-other-ca"))
}

/// This binary's TLS server (`ssl=on`), its certificate for `localhost` and `127.0.0.1`; it
/// asks for client certificates of the same CA (and accepts clients without one).
fn tls_server() -> &'static PgServer {
    static SERVER: OnceLock<PgServer> = OnceLock::new();
    SERVER.get_or_init(|| PgServer::start_with_tls(&ca().server_tls(&["localhost", "127.0.0.1"])))
}

/// The URL of a fresh database on `server`, reached at 127.0.0.1 under the name `host`,
/// with `params` added.
fn url(server: &PgServer, host: &str, params: &str) -> String {
    let fresh = server.fresh_database();
    let database = fresh.rsplit('/').next().unwrap();
    format!(
        "postgres://sked@{host}:{}/{database}?hostaddr=127.0.0.1&{params}",
        server.port
    )
}

fn root_cert(ca: &Ca) -> String {
    format!("sslrootcert={}", ca.pem_file().display())
}

/// Whether the pool's session is encrypted, as the server sees it.
async fn encrypted(db: &PgDb) -> bool {
    db.get()
        .await
        .unwrap()
        .query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0)
}

async fn connect(url: &str) -> Result<PgDb, ConnectError> {
    PgDb::connect(url, &PgOptions::default()).await
}

/// The whole chain of an error's messages, where the cause is.
fn chain(err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        message.push_str(": ");
        message.push_str(&e.to_string());
        source = e.source();
    }
    message
}

#[tokio::test]
async fn require_encrypts_without_a_ca() {
    let db = connect(&url(tls_server(), "localhost", "sslmode=require"))
        .await
        .unwrap();
    assert!(encrypted(&db).await);
}

#[tokio::test]
async fn prefer_is_the_default_and_encrypts_when_offered() {
    let db = connect(&url(tls_server(), "localhost", "application_name=t"))
        .await
        .unwrap();
    assert!(encrypted(&db).await);
}

#[tokio::test]
async fn verify_full_with_the_right_ca_connects() {
    for host in ["localhost", "127.0.0.1"] {
        let params = format!("sslmode=verify-full&{}", root_cert(ca()));
        let db = connect(&url(tls_server(), host, &params)).await.unwrap();
        assert!(encrypted(&db).await, "{host}");
    }
}

#[tokio::test]
async fn verify_full_with_another_ca_fails() {
    let params = format!("sslmode=verify-full&{}", root_cert(other_ca()));
    let err = connect(&url(tls_server(), "localhost", &params)).await.unwrap_err();
    assert!(matches!(err, ConnectError::Connect(_)), "{err}");
    assert_eq!(
        chain(&err),
        "could not connect to PostgreSQL: error performing TLS handshake: invalid peer certificate: UnknownIssuer"
    );
}

#[tokio::test]
async fn require_with_a_ca_file_checks_the_chain_as_libpq() {
    let params = format!("sslmode=require&{}", root_cert(other_ca()));
    let message = chain(&connect(&url(tls_server(), "localhost", &params)).await.unwrap_err());
    assert!(message.contains("UnknownIssuer"), "{message}");
}

#[tokio::test]
async fn verify_full_to_a_name_not_in_the_certificate_fails_and_verify_ca_does_not_mind() {
    let host = "db.not-in-the-certificate.test";
    let full = format!("sslmode=verify-full&{}", root_cert(ca()));
    let message = chain(&connect(&url(tls_server(), host, &full)).await.unwrap_err());
    assert!(message.contains("certificate not valid for name"), "{message}");

    let ca_only = format!("sslmode=verify-ca&{}", root_cert(ca()));
    let db = connect(&url(tls_server(), host, &ca_only)).await.unwrap();
    assert!(encrypted(&db).await);
    let wrong_ca = format!("sslmode=verify-ca&{}", root_cert(other_ca()));
    let message = chain(&connect(&url(tls_server(), host, &wrong_ca)).await.unwrap_err());
    assert!(message.contains("UnknownIssuer"), "{message}");
}

#[tokio::test]
async fn verify_full_without_a_ca_file_trusts_default_roots_only() {
    // The test CA is in no platform's store: the certificate is refused.
    let message = chain(
        &connect(&url(tls_server(), "localhost", "sslmode=verify-full"))
            .await
            .unwrap_err(),
    );
    assert!(message.contains("UnknownIssuer"), "{message}");
}

#[tokio::test]
async fn disable_connects_unencrypted() {
    let db = connect(&url(tls_server(), "localhost", "sslmode=disable"))
        .await
        .unwrap();
    assert!(!encrypted(&db).await);
}

#[tokio::test]
async fn require_to_a_server_without_tls_fails_clearly() {
    let err = connect(&url(postgres(), "127.0.0.1", "sslmode=require"))
        .await
        .unwrap_err();
    assert_eq!(
        chain(&err),
        "could not connect to PostgreSQL: error performing TLS handshake: server does not support TLS"
    );
    // prefer (the default) falls back to a plain session there.
    let db = connect(&url(postgres(), "127.0.0.1", "sslmode=prefer")).await.unwrap();
    assert!(!encrypted(&db).await);
}

#[tokio::test]
async fn a_bad_sslmode_is_refused_by_name() {
    let err = connect("postgres://sked:hunter2@127.0.0.1:1/x?sslmode=verify-everything")
        .await
        .unwrap_err();
    assert!(matches!(err, ConnectError::Url(_)), "{err}");
    let message = chain(&err);
    assert_eq!(
        message,
        "invalid database URL: invalid sslmode `verify-everything`: expected disable, prefer, require, verify-ca or verify-full"
    );
    assert!(!message.contains("hunter2"), "{message}");
}

#[tokio::test]
async fn an_unreadable_ca_file_is_named() {
    let missing = std::env::temp_dir().join("sked-tls-test-no-such-ca.pem");
    let err = connect(&format!(
        "postgres://sked@127.0.0.1:1/x?sslmode=verify-full&sslrootcert={}",
        missing.display()
    ))
    .await
    .unwrap_err();
    assert!(matches!(err, ConnectError::Tls(_)), "{err}");
    assert!(err.to_string().contains(&*missing.to_string_lossy()), "{err}");
}

/// The queue's `LISTEN` connection, opened outside the pool, is encrypted and verified as the
/// pool's are (seen from the server: the session listening is an SSL one).
#[tokio::test]
async fn the_listen_connection_uses_tls_too() {
    let params = format!("sslmode=verify-full&{}", root_cert(ca()));
    let db = connect(&url(tls_server(), "localhost", &params)).await.unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let _queue = PgQueue::new(db.clone(), clock);
    let conn = db.get().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listening: Vec<bool> = conn
            .query(
                "SELECT s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
                 WHERE a.datname = current_database() AND a.query LIKE 'LISTEN%'",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        if !listening.is_empty() {
            assert_eq!(listening, [true]);
            return;
        }
        assert!(Instant::now() < deadline, "no LISTEN session in 20 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `sslcert` and `sslkey`: the connection presents the client certificate (the server, which
/// trusts its CA, reads its subject).
#[tokio::test]
async fn a_client_certificate_is_presented() {
    let (cert, key) = ca().client_cert("sked");
    let params = format!(
        "sslmode=verify-full&{}&sslcert={}&sslkey={}",
        root_cert(ca()),
        cert.display(),
        key.display()
    );
    let db = connect(&url(tls_server(), "localhost", &params)).await.unwrap();
    let subject: Option<String> = db
        .get()
        .await
        .unwrap()
        .query_one("SELECT client_dn FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(subject.as_deref(), Some("/CN=sked"));

    let missing = format!(
        "{}&sslcert={}&sslkey=/nonexistent/sked.key",
        root_cert(ca()),
        cert.display()
    );
    let err = connect(&url(tls_server(), "localhost", &missing)).await.unwrap_err();
    assert_eq!(err.to_string(), "could not read sslkey `/nonexistent/sked.key`");
}

/// A client certificate rotated in place is presented by the next new connection, without
/// reopening the pool (the connection opened before keeps the old one).
#[tokio::test]
async fn a_rotated_client_certificate_is_used_by_new_connections() {
    let files = ca().client_cert("before");
    let params = format!(
        "sslmode=verify-full&{}&sslcert={}&sslkey={}",
        root_cert(ca()),
        files.0.display(),
        files.1.display()
    );
    let db = connect(&url(tls_server(), "localhost", &params)).await.unwrap();
    let subject = |conn: deadpool_postgres::Object| async move {
        let dn: Option<String> = conn
            .query_one("SELECT client_dn FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0);
        dn
    };
    let first = db.get().await.unwrap();

    ca().write_client_cert("after", &files);
    // A modification time of its own, whatever the file system's resolution.
    for file in [&files.0, &files.1] {
        let f = std::fs::File::options().append(true).open(file).unwrap();
        f.set_modified(std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000))
            .unwrap();
    }
    // `first` is held: the pool opens a new connection.
    let second = db.get().await.unwrap();
    assert_eq!(subject(second).await.as_deref(), Some("/CN=after"));
    assert_eq!(subject(first).await.as_deref(), Some("/CN=before"));
}
