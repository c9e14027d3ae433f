//! The binary's TLS listener as a user runs it: MQTT over TLS answers a CONNECT, and SIGHUP
//! swaps the certificate for new connections.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use rustls::ClientConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tolk_tls::testing::TestPki;

/// An MQTT 3.1.1 CONNECT (client id "t", keep-alive 60, clean session).
const CONNECT: &[u8] = &[0x10, 0x0d, 0, 4, b'M', b'Q', b'T', b'T', 4, 2, 0, 60, 0, 1, b't'];
/// CONNACK, session not present, accepted.
const CONNACK: &[u8] = &[0x20, 0x02, 0x00, 0x00];

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts the broker; the receiver gets every log line.
fn start(config: &std::path::Path) -> (Child, mpsc::Receiver<String>) {
    let mut child =
        Command::new(env!("CARGO_BIN_EXE_tolk")).arg("--config").arg(config).stderr(Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    wait_for(&rx, "tolk ready");
    (child, rx)
}

fn wait_for(lines: &mpsc::Receiver<String>, text: &str) {
    loop {
        let line = lines.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("no log line with {text:?}"));
        if line.contains(text) {
            return;
        }
    }
}

/// Connects over TLS, sends CONNECT, expects CONNACK; returns the server's certificate.
async fn connect(port: u16, ca: &TestPki, also: &TestPki) -> CertificateDer<'static> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(&ca.ca_file).unwrap()).unwrap();
    roots.add(CertificateDer::from_pem_file(&also.ca_file).unwrap()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let mut tls = TlsConnector::from(Arc::new(config)).connect(name, tcp).await.unwrap();
    tls.write_all(CONNECT).await.unwrap();
    let mut answer = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(10), tls.read_exact(&mut answer)).await.unwrap().unwrap();
    assert_eq!(answer, CONNACK);
    tls.get_ref().1.peer_certificates().unwrap()[0].clone().into_owned()
}

#[tokio::test]
async fn mqtt_over_tls_and_a_certificate_reloaded_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let first = TestPki::create(dir.path(), "first", "c");
    let second = TestPki::create(dir.path(), "second", "c");
    let port = free_port();
    let config = dir.path().join("tolk.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {data:?}\n[http]\nenabled = false\n[wsn]\nenabled = false\n[stomp]\nenabled = false\n\
             [amqp]\nenabled = false\n[mqttsn]\nenabled = false\n\
             [mqtt]\nbind = \"127.0.0.1:0\"\ntls_bind = \"127.0.0.1:{port}\"\n\
             [tls]\ncert_file = {cert:?}\nkey_file = {key:?}\n",
            data = dir.path().join("data"),
            cert = first.cert_file,
            key = first.key_file,
        ),
    )
    .unwrap();
    let (mut child, lines) = start(&config);

    assert_eq!(connect(port, &first, &second).await, CertificateDer::from_pem_file(&first.cert_file).unwrap());

    std::fs::copy(&second.cert_file, &first.cert_file).unwrap();
    std::fs::copy(&second.key_file, &first.key_file).unwrap();
    Command::new("kill").arg("-HUP").arg(child.id().to_string()).status().unwrap();
    wait_for(&lines, "TLS certificates reloaded");
    assert_eq!(connect(port, &first, &second).await, CertificateDer::from_pem_file(&second.cert_file).unwrap());

    Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().unwrap();
    assert!(child.wait().unwrap().success());
}
