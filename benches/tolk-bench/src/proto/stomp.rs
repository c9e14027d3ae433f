//! A minimal STOMP 1.2 client over TCP, written for the bench: CONNECT, SEND, SUBSCRIBE with a
//! receipt, MESSAGE, ACK and DISCONNECT. It is deliberately not tolk's own STOMP codec, so a
//! bug shared by broker and client cannot hide. Header values are used raw (the few this client
//! reads — `ack`, `receipt-id`, `message`, `content-length` — never carry escapes).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};

use super::amqp::routing_key;
use super::{Connection, Connector, Delivery, Publisher, Qos, Subscription, Target};
use crate::clock::Clock;

/// Time allowed for TCP connect plus CONNECTED, and for SUBSCRIBE's RECEIPT.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Receipt id of the one SUBSCRIBE a subscriber sends.
const SUBSCRIBE_RECEIPT: &str = "tolk-bench-sub";

/// One received frame.
#[derive(Debug)]
struct Frame {
    command: String,
    headers: Vec<(String, String)>,
    body: Bytes,
}

impl Frame {
    /// First value of a header: STOMP 1.2 section "Repeated Header Entries" says the first wins.
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// An ERROR frame's `message` header and body, for the report.
    fn error_text(&self) -> String {
        let message = self.header("message").unwrap_or("");
        format!("STOMP ERROR {message} {}", String::from_utf8_lossy(&self.body).trim())
    }
}

/// Encodes a client frame. Bodies always carry `content-length`, so binary payloads with NUL
/// bytes survive (STOMP 1.2 "Body").
fn encode(command: &str, headers: &[(&str, &str)], body: &[u8]) -> BytesMut {
    let mut out = BytesMut::with_capacity(command.len() + 64 + body.len());
    out.put_slice(command.as_bytes());
    out.put_u8(b'\n');
    for (k, v) in headers {
        out.put_slice(k.as_bytes());
        out.put_u8(b':');
        out.put_slice(v.as_bytes());
        out.put_u8(b'\n');
    }
    if !body.is_empty() {
        out.put_slice(format!("content-length:{}\n", body.len()).as_bytes());
    }
    out.put_u8(b'\n');
    out.put_slice(body);
    out.put_u8(0);
    out
}

/// Takes one frame off the front of `buf`, or `None` if it is not all there yet. Heart-beat
/// EOLs between frames are skipped. `max` bounds a frame so a broken peer cannot grow `buf`.
fn decode(buf: &mut BytesMut, max: usize) -> Result<Option<Frame>> {
    while buf.first() == Some(&b'\n') || buf.starts_with(b"\r\n") {
        let eol = if buf[0] == b'\n' { 1 } else { 2 };
        buf.advance(eol);
    }
    // The header block ends at the first empty line: a LF followed by LF or CRLF.
    let end = buf.iter().enumerate().filter(|&(_, &b)| b == b'\n').find_map(|(i, _)| match buf.get(i + 1..) {
        Some([b'\n', ..]) => Some((i, i + 2)),
        Some([b'\r', b'\n', ..]) => Some((i, i + 3)),
        _ => None,
    });
    let Some((head_end, body_start)) = end else {
        if buf.len() > max {
            bail!("STOMP frame header longer than {max} bytes");
        }
        return Ok(None);
    };
    let head = std::str::from_utf8(&buf[..head_end]).context("STOMP headers are not UTF-8")?;
    let mut lines = head.lines();
    let command = lines.next().unwrap_or("").trim_end_matches('\r').to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.trim_end_matches('\r').split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let length = headers.iter().find(|(k, _)| k == "content-length").map(|(_, v)| v.parse::<usize>());
    let body_end = match length {
        Some(Ok(n)) => {
            if body_start + n + 1 > buf.len() {
                if body_start + n + 1 > max {
                    bail!("STOMP frame of {} bytes exceeds {max}", body_start + n + 1);
                }
                return Ok(None);
            }
            body_start + n
        }
        Some(Err(_)) => bail!("bad content-length in a {command} frame"),
        None => match buf[body_start..].iter().position(|&b| b == 0) {
            Some(i) => body_start + i,
            None if buf.len() > max => bail!("STOMP frame longer than {max} bytes"),
            None => return Ok(None),
        },
    };
    let mut frame = buf.split_to(body_end + 1);
    frame.truncate(body_end);
    let body = frame.split_off(body_start).freeze();
    Ok(Some(Frame { command, headers, body }))
}

/// Reads frames off one connection.
struct FrameReader<R> {
    io: R,
    buf: BytesMut,
    max: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// The next frame; `None` at a clean end of stream. Cancel-safe: bytes read stay in `buf`.
    async fn next(&mut self) -> Result<Option<Frame>> {
        loop {
            if let Some(frame) = decode(&mut self.buf, self.max)? {
                return Ok(Some(frame));
            }
            if self.io.read_buf(&mut self.buf).await? == 0 {
                if self.buf.iter().any(|b| !b.is_ascii_whitespace()) {
                    bail!("connection closed in the middle of a frame");
                }
                return Ok(None);
            }
        }
    }
}

/// Connects STOMP clients to one broker. Topics map to `/topic/<topic>`, the destination tolk
/// (and RabbitMQ's STOMP plugin) routes through its topic space; with dotted destinations, to
/// `/topic/<amq.topic routing key>`.
#[derive(Debug, Clone)]
pub struct StompConnector {
    addr: SocketAddr,
    max_frame: usize,
    dotted: bool,
}

impl StompConnector {
    /// A connector for `target`, sized for payloads of `payload` bytes.
    pub fn new(target: &Target, payload: usize) -> Self {
        StompConnector { addr: target.addr, max_frame: payload.max(1024) + 8192, dotted: target.dotted_destinations }
    }

    /// TCP connect, CONNECT, wait for CONNECTED. Heart-beats are declined (`0,0`): runs are
    /// short, and a heart-beat would be traffic the scenario did not ask for.
    async fn connect(&self, client_id: &str) -> Result<(FrameReader<OwnedReadHalf>, OwnedWriteHalf)> {
        let handshake = async {
            let stream = TcpStream::connect(self.addr).await?;
            stream.set_nodelay(true)?;
            let (read, mut write) = stream.into_split();
            let connect = encode(
                "CONNECT",
                // `host` names the virtual host: RabbitMQ's default is `/`; tolk has one and
                // takes any name.
                &[("accept-version", "1.2"), ("host", "/"), ("heart-beat", "0,0"), ("client-id", client_id)],
                b"",
            );
            write.write_all(&connect).await?;
            let mut reader = FrameReader { io: read, buf: BytesMut::with_capacity(4096), max: self.max_frame };
            match reader.next().await? {
                Some(f) if f.command == "CONNECTED" => Ok((reader, write)),
                Some(f) if f.command == "ERROR" => bail!("{}", f.error_text()),
                Some(f) => bail!("expected CONNECTED, got {}", f.command),
                None => bail!("connection closed before CONNECTED"),
            }
        };
        tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
            .await
            .context("STOMP handshake timed out")?
            .with_context(|| format!("{client_id}: connecting to stomp://{}", self.addr))
    }
}

/// The destination for a topic: `/topic/a/b` for tolk, `/topic/a.b` when `dotted`.
fn destination(topic: &str, dotted: bool) -> String {
    if dotted { format!("/topic/{}", routing_key(topic)) } else { format!("/topic/{topic}") }
}

/// Reads frames until told to stop; returns why the broker ended the connection if it did.
fn spawn_watcher(mut reader: FrameReader<OwnedReadHalf>, mut write: Option<OwnedWriteHalf>) -> Connection {
    let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = &mut stop_rx => {
                    if let Some(w) = write.as_mut() {
                        let _ = w.write_all(&encode("DISCONNECT", &[], b"")).await;
                    }
                    return None;
                }
                frame = reader.next() => match frame {
                    Ok(Some(f)) if f.command == "ERROR" => return Some(f.error_text()),
                    Ok(Some(_)) => {}
                    Ok(None) => return Some("connection closed by broker".into()),
                    Err(e) => return Some(format!("{e:#}")),
                },
            }
        }
    });
    Connection::new(stop_tx, task)
}

/// A STOMP publisher: SEND frames go straight to the socket.
pub struct StompPublisher {
    write: OwnedWriteHalf,
    persistent: bool,
    dotted: bool,
    connection: Connection,
}

impl Publisher for StompPublisher {
    async fn publish(&mut self, topic: &str, payload: Bytes) -> Result<()> {
        let destination = destination(topic, self.dotted);
        // tolk maps persistent:true to at-least-once (docs/translation.md).
        let headers: &[(&str, &str)] = if self.persistent {
            &[("destination", &destination), ("persistent", "true")]
        } else {
            &[("destination", &destination)]
        };
        self.write.write_all(&encode("SEND", headers, &payload)).await.context("STOMP publisher's connection is gone")
    }

    async fn close(mut self) -> Option<String> {
        // Stop the watcher first: the broker closes the socket after DISCONNECT, and that
        // expected end must not be reported as the broker's doing.
        let reason = self.connection.close().await;
        let _ = self.write.write_all(&encode("DISCONNECT", &[], b"")).await;
        reason
    }
}

impl Connector for StompConnector {
    type Publisher = StompPublisher;

    async fn publisher(&self, client_id: String, qos: Qos) -> Result<StompPublisher> {
        let (reader, write) = self.connect(&client_id).await?;
        Ok(StompPublisher {
            write,
            persistent: qos != Qos::AtMostOnce,
            dotted: self.dotted,
            connection: spawn_watcher(reader, None),
        })
    }

    async fn subscribe(
        &self,
        client_id: String,
        topic: String,
        qos: Qos,
        clock: Clock,
        buffer: usize,
    ) -> Result<Subscription> {
        let (mut reader, mut write) = self.connect(&client_id).await?;
        // ack:auto is at-most-once in tolk; client-individual is at-least-once, acked per message.
        let ack_each = qos != Qos::AtMostOnce;
        let ack = if ack_each { "client-individual" } else { "auto" };
        let destination = destination(&topic, self.dotted);
        let subscribe = encode(
            "SUBSCRIBE",
            &[("id", "0"), ("destination", &destination), ("ack", ack), ("receipt", SUBSCRIBE_RECEIPT)],
            b"",
        );
        write.write_all(&subscribe).await?;
        let confirmed = async {
            loop {
                match reader.next().await? {
                    Some(f) if f.command == "RECEIPT" && f.header("receipt-id") == Some(SUBSCRIBE_RECEIPT) => {
                        return Ok(());
                    }
                    Some(f) if f.command == "ERROR" => bail!("{}", f.error_text()),
                    Some(_) => {}
                    None => bail!("connection closed before the SUBSCRIBE receipt"),
                }
            }
        };
        tokio::time::timeout(HANDSHAKE_TIMEOUT, confirmed)
            .await
            .context("no RECEIPT for SUBSCRIBE")?
            .with_context(|| format!("{client_id}: subscribing to {destination}"))?;

        let (tx, deliveries) = mpsc::channel(buffer.max(1));
        let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut stop_rx => {
                        let _ = write.write_all(&encode("DISCONNECT", &[], b"")).await;
                        return None;
                    }
                    frame = reader.next() => match frame {
                        Ok(Some(f)) if f.command == "MESSAGE" => {
                            let received_ns = clock.now_ns();
                            if ack_each
                                && let Some(id) = f.header("ack")
                                && let Err(e) = write.write_all(&encode("ACK", &[("id", id)], b"")).await
                            {
                                return Some(format!("writing ACK: {e}"));
                            }
                            // Waiting for room here stops the socket reads: TCP backpressure.
                            if tx.send(Delivery { payload: f.body, received_ns }).await.is_err() {
                                let _ = write.write_all(&encode("DISCONNECT", &[], b"")).await;
                                return None;
                            }
                        }
                        Ok(Some(f)) if f.command == "ERROR" => return Some(f.error_text()),
                        Ok(Some(_)) => {}
                        Ok(None) => return Some("connection closed by broker".into()),
                        Err(e) => return Some(format!("{e:#}")),
                    },
                }
            }
        });
        Ok(Subscription { deliveries, connection: Connection::new(stop_tx, task) })
    }

    async fn idle(&self, client_id: String) -> Result<Connection> {
        let (reader, write) = self.connect(&client_id).await?;
        Ok(spawn_watcher(reader, Some(write)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_with_binary_bodies() {
        let mut buf = encode("MESSAGE", &[("destination", "/topic/a"), ("ack", "7")], b"a\0b");
        buf.put_slice(b"\n\r\n");
        buf.put_slice(&encode("RECEIPT", &[("receipt-id", "x")], b""));
        let f = decode(&mut buf, 1 << 20).unwrap().unwrap();
        assert_eq!((f.command.as_str(), f.header("ack"), &f.body[..]), ("MESSAGE", Some("7"), &b"a\0b"[..]));
        let f = decode(&mut buf, 1 << 20).unwrap().unwrap();
        assert_eq!((f.command.as_str(), f.header("receipt-id")), ("RECEIPT", Some("x")));
        assert!(buf.is_empty());
    }

    #[test]
    fn partial_frames_wait_for_more_at_every_split() {
        let whole = encode("MESSAGE", &[("destination", "/topic/a")], b"hello");
        for cut in 0..whole.len() {
            let mut buf = BytesMut::from(&whole[..cut]);
            assert!(decode(&mut buf, 1 << 20).unwrap().is_none(), "cut at {cut}");
            buf.put_slice(&whole[cut..]);
            assert_eq!(&decode(&mut buf, 1 << 20).unwrap().unwrap().body[..], b"hello");
        }
    }

    #[test]
    fn crlf_headers_and_nul_terminated_bodies_decode() {
        let mut buf = BytesMut::from(&b"CONNECTED\r\nversion:1.2\r\n\r\n\0"[..]);
        let f = decode(&mut buf, 1024).unwrap().unwrap();
        assert_eq!((f.command.as_str(), f.header("version")), ("CONNECTED", Some("1.2")));
    }

    #[test]
    fn oversized_frames_are_refused() {
        let mut buf = BytesMut::from(&b"MESSAGE\ncontent-length:5000\n\n"[..]);
        assert!(decode(&mut buf, 1024).is_err());
        let mut buf = BytesMut::from(vec![b'X'; 2048].as_slice());
        assert!(decode(&mut buf, 1024).is_err());
    }
}
