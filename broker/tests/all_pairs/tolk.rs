//! The real `tolk` binary, started once with every listener on an ephemeral loopback port. The
//! bound ports are read from its `listening` log lines, so no port is ever guessed or raced for.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The bound address of every listener, by name (`mqtt`, `mqttsn`, `stomp`, `amqp`, `http`).
#[derive(Debug, Clone)]
pub struct Addrs(Arc<HashMap<String, SocketAddr>>);

impl Addrs {
    /// The bound address of a listener.
    pub fn get(&self, listener: &str) -> SocketAddr {
        self.0[listener]
    }
}

/// A running broker and what it logged.
pub struct Tolk {
    child: Child,
    addrs: Addrs,
    log: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

/// The shipped defaults with every `bind` on `127.0.0.1:0`, state in `dir`, and `overrides`
/// (`("section.key", "toml value")`) in place of the defaults they name.
fn config(dir: &tempfile::TempDir, overrides: &[(&str, &str)]) -> std::path::PathBuf {
    let out = Command::new(env!("CARGO_BIN_EXE_tolk")).arg("--print-default-config").output().unwrap();
    assert!(out.status.success(), "--print-default-config failed: {out:?}");
    let mut section = String::new();
    let mut used = vec![false; overrides.len()];
    let text: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = name.to_owned();
            }
            let key = line.split_once(" = ").map(|(k, _)| format!("{section}.{k}"));
            if let Some(i) = overrides.iter().position(|(name, _)| Some(*name) == key.as_deref()) {
                used[i] = true;
                format!("{} = {}", line.split_once(" = ").unwrap().0, overrides[i].1)
            } else if line.starts_with("bind = ") {
                "bind = \"127.0.0.1:0\"".to_owned()
            } else if line.starts_with("data_dir = ") {
                format!("data_dir = {:?}", dir.path().join("state"))
            } else {
                line.to_owned()
            }
        })
        .collect();
    for ((name, _), used) in overrides.iter().zip(used) {
        assert!(used, "no setting {name} in the default configuration");
    }
    let path = dir.path().join("tolk.toml");
    std::fs::write(&path, text.join("\n")).unwrap();
    path
}

/// `listening listener="mqtt" addresses=[127.0.0.1:1234]` or `listening listener="http"
/// address=127.0.0.1:1234` → (name, first address).
fn listening(line: &str) -> Option<(String, SocketAddr)> {
    let rest = &line[line.find(" listening listener=\"")? + " listening listener=\"".len()..];
    let (name, rest) = rest.split_once('"')?;
    let addr = if let Some(list) = rest.strip_prefix(" addresses=[") {
        list.split([',', ']']).next()?
    } else {
        rest.strip_prefix(" address=")?.split_whitespace().next()?
    };
    Some((name.to_owned(), addr.trim().parse().ok()?))
}

impl Tolk {
    /// Starts the broker and returns once it logged `tolk ready`.
    pub fn start() -> Tolk {
        Tolk::start_with(&[])
    }

    /// [`Tolk::start`] with some settings changed: `("section.key", "toml value")`.
    pub fn start_with(overrides: &[(&str, &str)]) -> Tolk {
        let dir = tempfile::tempdir().unwrap();
        let config = config(&dir, overrides);
        let mut child = Command::new(env!("CARGO_BIN_EXE_tolk"))
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let lines = log.clone();
        std::thread::spawn(move || {
            let mut addrs = HashMap::new();
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some((name, addr)) = listening(&line) {
                    addrs.insert(name, addr);
                }
                if line.contains("tolk ready")
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(std::mem::take(&mut addrs));
                }
                lines.lock().unwrap().push(line);
            }
        });
        let addrs = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| {
            panic!("tolk did not become ready:\n{}", log.lock().unwrap().join("\n"));
        });
        for name in ["mqtt", "mqttsn", "stomp", "amqp", "http"] {
            assert!(addrs.contains_key(name), "no `listening` line for {name}: {addrs:?}");
        }
        Tolk { child, addrs: Addrs(Arc::new(addrs)), log, _dir: dir }
    }

    /// Where the listeners are.
    pub fn addrs(&self) -> Addrs {
        self.addrs.clone()
    }

    /// The last `n` log lines, for failure messages.
    pub fn log_tail(&self, n: usize) -> String {
        let log = self.log.lock().unwrap();
        log[log.len().saturating_sub(n)..].join("\n")
    }

    /// GET `path` on the HTTP port; returns the body.
    pub async fn http_get(&self, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(self.addrs.get("http")).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        super::within("an HTTP answer", stream.read_to_string(&mut response)).await.unwrap();
        let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
        assert!(head.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
        body.to_owned()
    }

    /// SIGTERM, then the exit status must be success: the broker stops cleanly with every
    /// protocol's clients still connected.
    pub fn stop(mut self) {
        let killed = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status().unwrap();
        assert!(killed.success());
        for _ in 0..200 {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "tolk exited with {status}:\n{}", self.log_tail(30));
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("tolk did not stop within 10 s of SIGTERM:\n{}", self.log_tail(30));
    }
}

impl Drop for Tolk {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[test]
fn listening_lines_parse() {
    let line = r#"2026-11-22T04:22:01.673501Z  INFO tolk: listening listener="amqp" addresses=[127.0.0.1:38301]"#;
    assert_eq!(listening(line), Some(("amqp".into(), "127.0.0.1:38301".parse().unwrap())));
    let line = r#"2026-11-22T04:22:01.674353Z  INFO tolk: listening listener="http" address=127.0.0.1:34537"#;
    assert_eq!(listening(line), Some(("http".into(), "127.0.0.1:34537".parse().unwrap())));
    let line = r#"INFO tolk: listening listener="x" addresses=[127.0.0.1:1, [::1]:1]"#;
    assert_eq!(listening(line).unwrap().1.port(), 1);
}
