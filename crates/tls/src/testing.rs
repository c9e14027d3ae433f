//! A throw-away public key infrastructure for tests: a CA, a server certificate for
//! `localhost` and 127.0.0.1, and a client certificate, written as PEM files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use tokio_rustls::TlsConnector;

use crate::TlsConfig;

/// The files of a test PKI.
pub struct TestPki {
    /// The CA certificate: what clients trust, and what client certificates chain to.
    pub ca_file: PathBuf,
    /// The server's certificate and key.
    pub cert_file: PathBuf,
    /// The server's private key.
    pub key_file: PathBuf,
    /// A client certificate (common name `client_cn`) and its key.
    pub client_cert_file: PathBuf,
    /// The client's private key.
    pub client_key_file: PathBuf,
}

impl TestPki {
    /// Writes a new CA and certificates into `dir`, their names starting with `prefix`.
    pub fn create(dir: &Path, prefix: &str, client_cn: &str) -> TestPki {
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, format!("{prefix} test CA"));
        let ca = CertifiedIssuer::self_signed(ca_params, ca_key).expect("CA certificate");

        let server_key = KeyPair::generate().expect("server key");
        let mut server_params = CertificateParams::new(vec!["localhost".to_owned()]).expect("server params");
        server_params.subject_alt_names.push(SanType::IpAddress([127, 0, 0, 1].into()));
        server_params.distinguished_name.push(DnType::CommonName, "localhost");
        let server = server_params.signed_by(&server_key, &ca).expect("server certificate");

        let client_key = KeyPair::generate().expect("client key");
        let mut client_params = CertificateParams::new(Vec::new()).expect("client params");
        client_params.distinguished_name.push(DnType::CommonName, client_cn);
        let client = client_params.signed_by(&client_key, &ca).expect("client certificate");

        let write = |name: &str, pem: String| {
            let path = dir.join(format!("{prefix}-{name}.pem"));
            std::fs::write(&path, pem).expect("write PEM");
            path
        };
        TestPki {
            ca_file: write("ca", ca.pem()),
            cert_file: write("server", server.pem()),
            key_file: write("server-key", server_key.serialize_pem()),
            client_cert_file: write("client", client.pem()),
            client_key_file: write("client-key", client_key.serialize_pem()),
        }
    }

    /// `[tls]` settings serving this PKI's server certificate.
    pub fn config(&self) -> TlsConfig {
        TlsConfig {
            cert_file: self.cert_file.clone(),
            key_file: self.key_file.clone(),
            ca_file: None,
            require_client_cert: false,
            use_identity_as_username: false,
            handshake_timeout: crate::default_handshake_timeout(),
        }
    }
}

/// A TLS client (rustls with ring) that trusts the CAs of `pkis` and presents no certificate.
pub fn connector(pkis: &[&TestPki]) -> TlsConnector {
    TlsConnector::from(Arc::new(client_builder(pkis).with_no_client_auth()))
}

/// A TLS client that trusts the CAs of `pkis` and presents `client`'s client certificate.
pub fn connector_with_client_cert(pkis: &[&TestPki], client: &TestPki) -> TlsConnector {
    let chain = vec![CertificateDer::from_pem_file(&client.client_cert_file).expect("client certificate")];
    let key = rustls_pki_types::PrivateKeyDer::from_pem_file(&client.client_key_file).expect("client key");
    let config = client_builder(pkis).with_client_auth_cert(chain, key).expect("client certificate and key");
    TlsConnector::from(Arc::new(config))
}

fn client_builder(pkis: &[&TestPki]) -> rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert> {
    let mut roots = rustls::RootCertStore::empty();
    for pki in pkis {
        roots.add(CertificateDer::from_pem_file(&pki.ca_file).expect("CA file")).expect("CA certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
}
