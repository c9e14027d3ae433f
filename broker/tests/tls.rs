//! The binary's TLS listener as a user runs it: MQTT over TLS answers a CONNECT, and SIGHUP
//! swaps the certificate for new connections while open ones carry on.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tolk_tls::testing::{TestPki, connector};

/// An MQTT 3.1.1 CONNECT (client id `id`, one letter; keep-alive 60, clean session).
fn connect_packet(id: u8) -> [u8; 15] {
    [0x10, 0x0d, 0, 4, b'M', b'Q', b'T', b'T', 4, 2, 0, 60, 0, 1, id]
}
/// CONNACK, session not present, accepted.
const CONNACK: &[u8] = &[0x20, 0x02, 0x00, 0x00];

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The broker process, killed if the test fails before stopping it.
struct Broker(Child);

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.0.kill();
    }
}

/// Starts the broker; the receiver gets every log line.
fn start(config: &std::path::Path) -> (Broker, mpsc::Receiver<String>) {
    let mut child =
        Command::new(env!("CARGO_BIN_EXE_tolk")).arg("--config").arg(config).stderr(Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let broker = Broker(child);
    wait_for(&rx, "tolk ready");
    (broker, rx)
}

fn wait_for(lines: &mpsc::Receiver<String>, text: &str) {
    loop {
        let line = lines.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("no log line with {text:?}"));
        if line.contains(text) {
            return;
        }
    }
}

/// Connects over TLS, sends CONNECT, expects CONNACK; returns the connection.
async fn connect(port: u16, id: u8, ca: &TestPki, also: &TestPki) -> tokio_rustls::client::TlsStream<TcpStream> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let mut tls = connector(&[ca, also]).connect(name, tcp).await.unwrap();
    tls.write_all(&connect_packet(id)).await.unwrap();
    let mut answer = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(10), tls.read_exact(&mut answer)).await.unwrap().unwrap();
    assert_eq!(answer, CONNACK);
    tls
}

fn served_certificate(tls: &tokio_rustls::client::TlsStream<TcpStream>) -> CertificateDer<'static> {
    tls.get_ref().1.peer_certificates().unwrap()[0].clone().into_owned()
}

/// PINGREQ, PINGRESP: the connection still works.
async fn ping(tls: &mut tokio_rustls::client::TlsStream<TcpStream>) {
    tls.write_all(&[0xc0, 0x00]).await.unwrap();
    let mut answer = [0u8; 2];
    tokio::time::timeout(Duration::from_secs(10), tls.read_exact(&mut answer)).await.unwrap().unwrap();
    assert_eq!(answer, [0xd0, 0x00]);
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
    let (mut broker, lines) = start(&config);

    let mut before = connect(port, b'a', &first, &second).await;
    assert_eq!(served_certificate(&before), CertificateDer::from_pem_file(&first.cert_file).unwrap());

    std::fs::copy(&second.cert_file, &first.cert_file).unwrap();
    std::fs::copy(&second.key_file, &first.key_file).unwrap();
    Command::new("kill").arg("-HUP").arg(broker.0.id().to_string()).status().unwrap();
    wait_for(&lines, "TLS certificates reloaded");
    let after = connect(port, b'b', &first, &second).await;
    assert_eq!(served_certificate(&after), CertificateDer::from_pem_file(&second.cert_file).unwrap());
    // The connection made before the reload was not dropped.
    ping(&mut before).await;

    Command::new("kill").arg("-TERM").arg(broker.0.id().to_string()).status().unwrap();
    assert!(broker.0.wait().unwrap().success());
}
