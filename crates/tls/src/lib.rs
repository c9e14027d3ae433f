//! TLS for tolk's listeners, with rustls and its ring provider (no OpenSSL, no aws-lc: both
//! break or bloat the Raspberry Pi builds).
//!
//! One [`Tls`] is made from the `[tls]` section and shared by every listener that has a
//! `tls_bind`. Certificates and keys are PEM files, as Mosquitto and RabbitMQ take them. On
//! SIGHUP the broker calls [`Tls::reload`]: new handshakes use the new files, established
//! connections keep theirs, and files that do not load leave the old ones in place.

#[cfg(feature = "testing")]
pub mod testing;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// The `[tls]` section.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The server's certificate chain (PEM), leaf first.
    pub cert_file: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// CA certificates (PEM) that client certificates must chain to. With it, clients may
    /// present a certificate; with `require_client_cert`, they must.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Refuse clients without a valid certificate (needs `ca_file`).
    #[serde(default)]
    pub require_client_cert: bool,
    /// Take the user name from the client certificate's subject Common Name, as Mosquitto's
    /// `use_identity_as_username`: the certificate is the login, and the user name and password
    /// the client sends are ignored. Needs `require_client_cert`. A certificate without a Common
    /// Name fails the handshake.
    #[serde(default)]
    pub use_identity_as_username: bool,
    /// Longest a TLS handshake may take; a client that does not finish it is closed.
    #[serde(default = "default_handshake_timeout", with = "humantime_serde")]
    pub handshake_timeout: Duration,
}

fn default_handshake_timeout() -> Duration {
    Duration::from_secs(10)
}

/// Why the TLS settings could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no valid PEM.
    #[error("[tls] {setting} = {path:?}: {message}")]
    File {
        /// The setting that names the file.
        setting: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// `require_client_cert` without `ca_file`.
    #[error("[tls] require_client_cert = true needs ca_file: the CA that client certificates must chain to")]
    NoClientCa,
    /// `use_identity_as_username` without `require_client_cert`.
    #[error("[tls] use_identity_as_username = true needs require_client_cert = true: every client must have a name")]
    IdentityWithoutClientCert,
    /// rustls refused the combination (e.g. a key that does not match the certificate).
    #[error("[tls]: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client-certificate verifier could not be built from `ca_file`.
    #[error("[tls] ca_file: {0}")]
    ClientVerifier(#[from] rustls::server::VerifierBuilderError),
}

/// The broker's TLS server settings, reloadable.
pub struct Tls {
    config: TlsConfig,
    current: RwLock<Arc<ServerConfig>>,
}

impl Tls {
    /// Loads the files named in `config`.
    pub fn load(config: TlsConfig) -> Result<Arc<Tls>, TlsError> {
        let server = Arc::new(server_config(&config)?);
        Ok(Arc::new(Tls { config, current: RwLock::new(server) }))
    }

    /// Reads the files again (SIGHUP): later handshakes use them. On error the previous
    /// certificates stay in use.
    pub fn reload(&self) -> Result<(), TlsError> {
        let server = Arc::new(server_config(&self.config)?);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = server;
        Ok(())
    }

    /// The settings new handshakes use.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Runs the server side of a TLS handshake on `stream`, within the handshake timeout.
    /// Returns the stream and, with `use_identity_as_username`, the user its certificate names.
    pub async fn accept(&self, stream: TcpStream) -> io::Result<(TlsStream<TcpStream>, Option<String>)> {
        let acceptor = TlsAcceptor::from(self.server_config());
        let stream = match tokio::time::timeout(self.config.handshake_timeout, acceptor.accept(stream)).await {
            Ok(result) => result?,
            Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "TLS handshake not finished in time")),
        };
        if !self.config.use_identity_as_username {
            return Ok((stream, None));
        }
        let leaf = stream.get_ref().1.peer_certificates().and_then(|certs| certs.first());
        match leaf.and_then(|cert| common_name(cert)) {
            Some(name) => Ok((stream, Some(name))),
            None => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the client certificate has no Common Name to use as the user name",
            )),
        }
    }
}

/// The first Common Name of a certificate's subject, if it is a string (UTF8String,
/// PrintableString or IA5String).
pub fn common_name(cert: &CertificateDer<'_>) -> Option<String> {
    use x509_cert::der::Decode;
    use x509_cert::der::asn1::{Ia5StringRef, ObjectIdentifier, PrintableStringRef, Utf8StringRef};
    const COMMON_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");
    let parsed = x509_cert::Certificate::from_der(cert.as_ref()).ok()?;
    let subject = &parsed.tbs_certificate.subject.0;
    let value = &subject.iter().flat_map(|rdn| rdn.0.iter()).find(|atv| atv.oid == COMMON_NAME)?.value;
    let name = value
        .decode_as::<Utf8StringRef<'_>>()
        .map(|s| s.as_str().to_owned())
        .or_else(|_| value.decode_as::<PrintableStringRef<'_>>().map(|s| s.as_str().to_owned()))
        .or_else(|_| value.decode_as::<Ia5StringRef<'_>>().map(|s| s.as_str().to_owned()))
        .ok()?;
    (!name.is_empty()).then_some(name)
}

fn server_config(config: &TlsConfig) -> Result<ServerConfig, TlsError> {
    let certs = certificates("cert_file", &config.cert_file)?;
    let key =
        PrivateKeyDer::from_pem_file(&config.key_file).map_err(|e| file_error("key_file", &config.key_file, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions()?;
    let builder = match &config.ca_file {
        Some(ca_file) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in certificates("ca_file", ca_file)? {
                roots.add(cert).map_err(|e| file_error("ca_file", ca_file, e))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            if config.use_identity_as_username && !config.require_client_cert {
                return Err(TlsError::IdentityWithoutClientCert);
            }
            let verifier = if config.require_client_cert {
                verifier.build()?
            } else {
                verifier.allow_unauthenticated().build()?
            };
            builder.with_client_cert_verifier(verifier)
        }
        None if config.require_client_cert => return Err(TlsError::NoClientCa),
        None if config.use_identity_as_username => return Err(TlsError::IdentityWithoutClientCert),
        None => builder.with_no_client_auth(),
    };
    Ok(builder.with_single_cert(certs, key)?)
}

/// TLS settings for connecting out (bridges to `mqtts://`, `amqps://` and `https://`
/// remotes): trusting the certificates in `ca_file` (PEM), or the system's store without one.
/// `setting` names the file's setting in errors.
pub fn client_config(setting: &'static str, ca_file: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        Some(path) => {
            for cert in certificates(setting, path)? {
                roots.add(cert).map_err(|e| file_error(setting, path, e))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for error in &found.errors {
                tracing::warn!(%error, "a certificate of the system's store could not be read");
            }
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(file_error(setting, Path::new("(system store)"), "no trusted certificates found; set it"));
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

fn certificates(setting: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(setting, path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(setting, path, e))?;
    if certs.is_empty() {
        return Err(file_error(setting, path, "no CERTIFICATE block in it"));
    }
    Ok(certs)
}

fn file_error(setting: &'static str, path: &Path, error: impl std::fmt::Display) -> TlsError {
    TlsError::File { setting, path: path.to_owned(), message: error.to_string() }
}
