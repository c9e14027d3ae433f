//! Handshakes with a real rustls client: the served certificate, a reload that takes effect
//! for new connections only, and a failed reload that keeps the old certificate.

use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tolk_tls::Tls;
use tolk_tls::testing::{TestPki, connector};

/// Serves one echo connection per call; returns the certificate the client was shown.
async fn handshake(tls: &Arc<Tls>, connector: &tokio_rustls::TlsConnector) -> std::io::Result<CertificateDer<'static>> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = {
        let tls = tls.clone();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await?;
            let (mut stream, _) = tls.accept(tcp).await?;
            let mut byte = [0u8; 1];
            stream.read_exact(&mut byte).await?;
            stream.write_all(&byte).await?;
            stream.flush().await?;
            std::io::Result::Ok(())
        })
    };
    let tcp = TcpStream::connect(addr).await?;
    let mut client = connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await?;
    client.write_all(b"x").await?;
    let mut echo = [0u8; 1];
    client.read_exact(&mut echo).await?;
    assert_eq!(&echo, b"x");
    server.await.unwrap()?;
    let (_, session) = client.get_ref();
    Ok(session.peer_certificates().expect("server certificate")[0].clone().into_owned())
}

#[tokio::test]
async fn reload_serves_new_certificates_to_new_connections_and_keeps_the_old_on_error() {
    let dir = std::env::temp_dir().join(format!("tolk-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let first = TestPki::create(&dir, "first", "c");
    let second = TestPki::create(&dir, "second", "c");
    let tls = Tls::load(first.config()).unwrap();
    let connector = connector(&[&first, &second]);
    let first_cert = CertificateDer::from_pem_file(&first.cert_file).unwrap();
    let second_cert = CertificateDer::from_pem_file(&second.cert_file).unwrap();

    assert_eq!(handshake(&tls, &connector).await.unwrap(), first_cert);

    std::fs::copy(&second.cert_file, &first.cert_file).unwrap();
    std::fs::copy(&second.key_file, &first.key_file).unwrap();
    tls.reload().unwrap();
    assert_eq!(handshake(&tls, &connector).await.unwrap(), second_cert);

    std::fs::write(&first.cert_file, "not a certificate").unwrap();
    let error = tls.reload().unwrap_err().to_string();
    assert!(error.contains("cert_file"), "{error}");
    assert_eq!(handshake(&tls, &connector).await.unwrap(), second_cert, "the last good certificate stays");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_client_trusting_another_ca_is_refused() {
    let dir = std::env::temp_dir().join(format!("tolk-tls-other-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let served = TestPki::create(&dir, "served", "c");
    let other = TestPki::create(&dir, "other", "c");
    let tls = Tls::load(served.config()).unwrap();
    assert!(handshake(&tls, &connector(&[&other])).await.is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn require_client_cert_needs_a_ca() {
    let dir = std::env::temp_dir().join(format!("tolk-tls-noca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pki = TestPki::create(&dir, "noca", "c");
    let config = tolk_tls::TlsConfig { require_client_cert: true, ..pki.config() };
    assert!(matches!(Tls::load(config), Err(tolk_tls::TlsError::NoClientCa)));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn use_identity_as_username_names_the_client_by_its_certificate() {
    let dir = std::env::temp_dir().join(format!("tolk-tls-identity-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pki = TestPki::create(&dir, "identity", "sensor-42");
    let base = tolk_tls::TlsConfig { ca_file: Some(pki.ca_file.clone()), require_client_cert: true, ..pki.config() };
    let without_required =
        tolk_tls::TlsConfig { use_identity_as_username: true, require_client_cert: false, ..base.clone() };
    assert!(matches!(Tls::load(without_required), Err(tolk_tls::TlsError::IdentityWithoutClientCert)));
    let tls = Tls::load(tolk_tls::TlsConfig { use_identity_as_username: true, ..base }).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        tls.accept(tcp).await.map(|(_, identity)| identity)
    });
    let connector = tolk_tls::testing::connector_with_client_cert(&[&pki], &pki);
    let tcp = TcpStream::connect(addr).await.unwrap();
    let _client = connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
    assert_eq!(server.await.unwrap().unwrap(), Some("sensor-42".to_owned()));
    std::fs::remove_dir_all(&dir).unwrap();
}
