//! The `tolk` binary as a user runs it: configuration handling, HTTP endpoints, graceful stop.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

fn tolk() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tolk"))
}

fn write_config(dir: &tempfile::TempDir, text: &str) -> std::path::PathBuf {
    let path = dir.path().join("tolk.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The shipped default configuration with every listener on an ephemeral loopback port, the
/// HTTP server on `http_port`, and state under `dir`: tests run in parallel and must never
/// claim a standard port.
fn test_config(dir: &tempfile::TempDir, http_port: u16) -> std::path::PathBuf {
    let defaults = String::from_utf8(tolk().arg("--print-default-config").output().unwrap().stdout).unwrap();
    let mut section = String::new();
    let text: Vec<String> = defaults
        .lines()
        .map(|line| {
            if line.starts_with('[') {
                section = line.to_owned();
            }
            if line.starts_with("bind = ") {
                let port = if section == "[http]" { http_port } else { 0 };
                format!("bind = \"127.0.0.1:{port}\"")
            } else if line.starts_with("data_dir = ") {
                format!("data_dir = {:?}", dir.path().join("state"))
            } else {
                line.to_owned()
            }
        })
        .collect();
    write_config(dir, &text.join("\n"))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn http_get(port: u16, path: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// Starts the broker and returns once it logged that it is ready.
fn start(config: &std::path::Path) -> Child {
    let mut child = tolk().arg("--config").arg(config).stderr(Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (ready_tx, ready_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("tolk ready") {
                let _ = ready_tx.send(());
            }
        }
    });
    ready_rx.recv_timeout(Duration::from_secs(20)).expect("broker did not become ready");
    child
}

#[test]
fn printed_default_config_is_valid_and_documented() {
    let out = tolk().arg("--print-default-config").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("[http]") && text.contains("bind = \"0.0.0.0:8080\""));
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(&dir, &text);
    let check = tolk().arg("--config").arg(&path).arg("--check-config").output().unwrap();
    assert!(check.status.success(), "{check:?}");
}

#[test]
fn config_errors_name_file_field_and_problem_and_exit_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(&dir, "[http]\nbind = \"0.0.0.0:99999\"\n");
    let out = tolk().arg("--config").arg(&path).arg("--check-config").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("tolk.toml") && err.contains("bind") && err.contains("line 2"), "{err}");

    let missing = tolk().args(["--config", "/nonexistent/tolk.toml"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8(missing.stderr).unwrap().contains("cannot read config file /nonexistent/tolk.toml"));
}

#[test]
fn a_tls_listener_needs_loadable_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let check = |text: &str| {
        let path = write_config(&dir, text);
        let out = tolk().arg("--config").arg(&path).arg("--check-config").output().unwrap();
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    };
    let (code, err) = check("[mqtt]\ntls_bind = \"127.0.0.1:0\"\n");
    assert_eq!(code, Some(2));
    assert!(err.contains("mqtt.tls_bind") && err.contains("[tls]"), "{err}");
    let (code, err) = check("[tls]\ncert_file = \"/nonexistent/server.pem\"\nkey_file = \"/nonexistent/key.pem\"\n");
    assert_eq!(code, Some(2));
    assert!(err.contains("cert_file") && err.contains("/nonexistent/server.pem"), "{err}");
}

#[test]
fn check_config_reads_the_password_file_and_the_acl() {
    let dir = tempfile::tempdir().unwrap();
    let passwd = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates/auth/tests/fixtures/passwd");
    let check = |text: String| {
        let path = write_config(&dir, &text);
        let out = tolk().arg("--config").arg(&path).arg("--check-config").output().unwrap();
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    };
    let acl = dir.path().join("acl");
    std::fs::write(&acl, "user alice\ntopic readwrite sensors/#\n").unwrap();
    let off = "[wsn]\nenabled = false\n";
    assert_eq!(check(format!("{off}[auth]\npassword_file = {passwd:?}\nacl_file = {acl:?}\n")).0, Some(0));
    let (code, err) = check(format!("{off}[auth]\npassword_file = \"/nonexistent/passwd\"\n"));
    assert_eq!(code, Some(2));
    assert!(err.contains("password_file") && err.contains("/nonexistent/passwd"), "{err}");
    std::fs::write(&acl, "user alice\ntopic readwrite sensors/#\ntopic sometimes x\nqueue orders\n").unwrap();
    let (code, err) = check(format!("{off}[auth]\npassword_file = {passwd:?}\nacl_file = {acl:?}\n"));
    assert_eq!(code, Some(2));
    assert!(err.contains("acl_file") && err.contains("line 4"), "{err}");
}

/// GET `path` with an `Authorization` header (empty: none); returns the whole response.
fn http_get_as(port: u16, path: &str, authorization: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let header = if authorization.is_empty() { String::new() } else { format!("Authorization: {authorization}\r\n") };
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\n{header}Connection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn metrics_and_api_ask_for_a_user_when_http_requires_auth() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let passwd = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates/auth/tests/fixtures/passwd");
    let config = write_config(
        &dir,
        &format!(
            "data_dir = {:?}\n[http]\nbind = \"127.0.0.1:{port}\"\nrequire_auth = true\n[auth]\npassword_file = {passwd:?}\n\
             [mqttsn]\nenabled = false\n[wsn]\nenabled = false\n[mqtt]\nbind = \"127.0.0.1:0\"\n\
             [stomp]\nbind = \"127.0.0.1:0\"\n[amqp]\nbind = \"127.0.0.1:0\"\n",
            dir.path().join("state")
        ),
    );
    let mut child = start(&config);
    let refused = http_get_as(port, "/metrics", "");
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    assert!(refused.to_ascii_lowercase().contains("www-authenticate: basic realm=\"tolk\""), "{refused}");
    // alice:wonder land, and a wrong password.
    assert!(http_get_as(port, "/metrics", "Basic YWxpY2U6d29uZGVyIGxhbmQ=").starts_with("HTTP/1.1 200"));
    assert!(http_get_as(port, "/api/latency", "Basic YWxpY2U6d29uZGVyIGxhbmQ=").starts_with("HTTP/1.1 200"));
    assert!(http_get_as(port, "/api/latency", "Basic YWxpY2U6d29uZGVy").starts_with("HTTP/1.1 401"));
    assert!(http_get_as(port, "/healthz", "").starts_with("HTTP/1.1 200"), "health stays open");
    Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().unwrap();
    assert!(child.wait().unwrap().success());
}

#[test]
fn tells_systemd_it_is_ready_once_listening_and_when_stopping() {
    use std::os::unix::net::UnixDatagram;
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let port = free_port();
    let config = test_config(&dir, port);
    let mut child =
        tolk().arg("--config").arg(config).env("NOTIFY_SOCKET", &socket_path).stderr(Stdio::null()).spawn().unwrap();
    let mut buf = [0u8; 256];
    let n = socket.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"READY=1\n");
    assert!(http_get(port, "/healthz").ends_with("ok\n"), "listeners are up when READY=1 is sent");
    Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().unwrap();
    let n = socket.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"STOPPING=1\n");
    assert!(child.wait().unwrap().success());
}

#[test]
fn serves_health_metrics_and_latency_then_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let data = dir.path().join("state");
    let mut child = start(&test_config(&dir, port));

    let health = http_get(port, "/healthz");
    assert!(health.starts_with("HTTP/1.1 200") && health.ends_with("ok\n"), "{health}");
    let metrics = http_get(port, "/metrics");
    assert!(metrics.contains("text/plain; version=0.0.4"), "{metrics}");
    assert!(metrics.contains("# TYPE tolk_hop_latency_seconds histogram"));
    assert!(metrics.contains("tolk_connections{protocol=\"mqtt\"} 0"));
    let latency = http_get(port, "/api/latency");
    assert!(latency.contains("application/json") && latency.contains("\"unit\":\"microseconds\""), "{latency}");
    assert!(data.is_dir(), "data_dir is created");

    let killed = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().unwrap();
    assert!(killed.success());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait().unwrap()));
    let status = rx.recv_timeout(Duration::from_secs(10)).expect("broker did not stop on SIGTERM");
    assert!(status.success(), "{status:?}");
}
