//! AMQP 0.9.1 frames on a socket, for the bench's own client. Methods are built and parsed with
//! amq-protocol (lapin's codec crate, not tolk's), so that a bug shared by broker and client
//! cannot hide. Content headers and bodies, which every delivery carries, are read in place: a
//! header only gives the body's size here, and a body is a slice of the read buffer.

use std::net::SocketAddr;
use std::time::Duration;

use amq_protocol::frame::{AMQPContentHeader, AMQPFrame, ProtocolVersion, WriteContext, gen_frame};
use amq_protocol::protocol::{AMQPClass, basic, channel, connection};
use amq_protocol::types::FieldTable;
use anyhow::{Context, Result, bail};
use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// Time allowed for the TCP connection, the handshake and the channel's opening.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The frame size the client proposes; the broker's own limit, if lower, wins.
const FRAME_MAX: u32 = 128 * 1024;

/// Frame type octets (AMQP 0.9.1 section 4.2.3) and the end octet.
const FRAME_METHOD: u8 = 1;
const FRAME_HEADER: u8 = 2;
const FRAME_BODY: u8 = 3;
const FRAME_HEARTBEAT: u8 = 8;
const FRAME_END: u8 = 0xCE;

/// Type, channel and size before a frame's payload, and the end octet after it.
const FRAME_OVERHEAD: usize = 8;

/// The one channel every client of the bench uses.
pub const CHANNEL: u16 = 1;

/// One frame as the client needs it (every client uses one channel, so its number is not kept).
#[derive(Debug)]
pub enum Incoming {
    /// A method, parsed.
    Method(AMQPClass),
    /// A content header: only the body's size matters here.
    Header { body_size: u64 },
    /// Some or all of a content body.
    Body(Bytes),
    /// A heartbeat (the client declines them, but the broker may send one).
    Heartbeat,
}

/// Appends `frame` to `out`.
pub fn encode(out: &mut Vec<u8>, frame: &AMQPFrame) {
    let buf = std::mem::take(out);
    let (buf, _) = gen_frame(frame)(WriteContext::from(buf)).expect("writing to a Vec cannot fail").into_inner();
    *out = buf;
}

/// Appends a method frame on `channel` to `out`.
pub fn encode_method(out: &mut Vec<u8>, channel: u16, method: AMQPClass) {
    encode(out, &AMQPFrame::Method(channel, method));
}

/// Appends a content header and the body frames of `payload` to `out`, the body split by the
/// negotiated frame size.
pub fn encode_content(out: &mut Vec<u8>, properties: &basic::AMQPProperties, payload: &[u8], frame_max: usize) {
    let header = AMQPContentHeader { class_id: 60, body_size: payload.len() as u64, properties: properties.clone() };
    encode(out, &AMQPFrame::Header(CHANNEL, header));
    for chunk in payload.chunks(frame_max - FRAME_OVERHEAD) {
        out.push(FRAME_BODY);
        out.extend_from_slice(&CHANNEL.to_be_bytes());
        out.extend_from_slice(&(chunk.len() as u32).to_be_bytes());
        out.extend_from_slice(chunk);
        out.push(FRAME_END);
    }
}

/// Takes one frame off the front of `buf`, or `None` if it is not all there yet. `max` bounds
/// a frame, so that a broken peer cannot grow `buf`.
pub fn decode(buf: &mut BytesMut, max: usize) -> Result<Option<Incoming>> {
    let Some(&[kind, _, _, s0, s1, s2, s3]) = buf.get(..7) else {
        return Ok(None);
    };
    let size = u32::from_be_bytes([s0, s1, s2, s3]) as usize;
    if size + FRAME_OVERHEAD > max {
        bail!("AMQP frame of {} bytes exceeds {max}", size + FRAME_OVERHEAD);
    }
    if buf.len() < size + FRAME_OVERHEAD {
        return Ok(None);
    }
    if buf[7 + size] != FRAME_END {
        bail!("AMQP frame without its end octet");
    }
    let mut frame = buf.split_to(size + FRAME_OVERHEAD);
    frame.truncate(7 + size);
    frame.advance(7);
    Ok(Some(match kind {
        FRAME_METHOD => {
            let (_, method) = amq_protocol::protocol::parse_class(&frame[..])
                .map_err(|e| anyhow::anyhow!("unparsable AMQP method: {e:?}"))?;
            Incoming::Method(method)
        }
        // class id (2), weight (2), body size (8), then the properties.
        FRAME_HEADER if frame.len() >= 12 => Incoming::Header { body_size: (&frame[4..12]).get_u64() },
        FRAME_BODY => Incoming::Body(frame.freeze()),
        FRAME_HEARTBEAT => Incoming::Heartbeat,
        other => bail!("unexpected AMQP frame type {other}"),
    }))
}

/// Reads frames off one connection.
pub struct FrameReader<R> {
    io: R,
    buf: BytesMut,
    max: usize,
}

impl<R> FrameReader<R> {
    /// Whether a whole frame is already read and waiting.
    pub fn has_frame(&self) -> bool {
        match self.buf.get(3..7) {
            Some(&[s0, s1, s2, s3]) => self.buf.len() >= u32::from_be_bytes([s0, s1, s2, s3]) as usize + FRAME_OVERHEAD,
            _ => false,
        }
    }
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// The next frame; `None` at a clean end of stream. Cancel-safe: bytes read stay in `buf`.
    pub async fn next(&mut self) -> Result<Option<Incoming>> {
        loop {
            if let Some(frame) = decode(&mut self.buf, self.max)? {
                return Ok(Some(frame));
            }
            if self.io.read_buf(&mut self.buf).await? == 0 {
                if !self.buf.is_empty() {
                    bail!("connection closed in the middle of a frame");
                }
                return Ok(None);
            }
        }
    }

    /// The next method, skipping heartbeats; an error for the end of the stream, content, or
    /// the broker closing the connection or channel (with its reply).
    pub async fn method(&mut self) -> Result<AMQPClass> {
        loop {
            match self.next().await? {
                Some(Incoming::Method(method)) => return refusal(&method).map_or(Ok(method), Err),
                Some(Incoming::Heartbeat) => {}
                Some(other) => bail!("expected a method, got {other:?}"),
                None => bail!("connection closed by broker"),
            }
        }
    }
}

/// The broker's reply if `method` closes the connection or the channel.
pub fn refusal(method: &AMQPClass) -> Option<anyhow::Error> {
    match method {
        AMQPClass::Connection(connection::AMQPMethod::Close(c)) => {
            Some(anyhow::anyhow!("connection.close {} {}", c.reply_code, c.reply_text))
        }
        AMQPClass::Channel(channel::AMQPMethod::Close(c)) => {
            Some(anyhow::anyhow!("channel.close {} {}", c.reply_code, c.reply_text))
        }
        _ => None,
    }
}

/// An open connection with channel [`CHANNEL`] open on it.
pub struct Opened {
    /// Frames from the broker.
    pub reader: FrameReader<OwnedReadHalf>,
    /// The socket's sending side.
    pub writer: OwnedWriteHalf,
    /// The negotiated frame size.
    pub frame_max: usize,
}

impl Opened {
    /// Sends `method` on the channel and waits for the broker's answer.
    pub async fn call(&mut self, method: AMQPClass) -> Result<AMQPClass> {
        let mut out = Vec::new();
        encode_method(&mut out, CHANNEL, method);
        self.writer.write_all(&out).await?;
        tokio::time::timeout(HANDSHAKE_TIMEOUT, self.reader.method()).await.context("no answer from the broker")?
    }
}

/// Connects as guest/guest to vhost `/`, declines heartbeats (runs are short, and a heartbeat
/// is traffic the scenario did not ask for) and opens channel [`CHANNEL`].
pub async fn open(addr: SocketAddr, client_id: &str) -> Result<Opened> {
    let handshake = async {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (read, mut writer) = stream.into_split();
        let mut reader = FrameReader { io: read, buf: BytesMut::with_capacity(4096), max: FRAME_MAX as usize };
        let mut out = Vec::new();
        encode(&mut out, &AMQPFrame::ProtocolHeader(ProtocolVersion::amqp_0_9_1()));
        writer.write_all(&out).await?;
        let AMQPClass::Connection(connection::AMQPMethod::Start(_)) = reader.method().await? else {
            bail!("expected connection.start");
        };
        let mut properties = FieldTable::default();
        properties.insert("connection_name".into(), amq_protocol::types::AMQPValue::LongString(client_id.into()));
        let start_ok = connection::StartOk {
            client_properties: properties,
            mechanism: "PLAIN".into(),
            response: "\0guest\0guest".into(),
            locale: "en_US".into(),
        };
        out.clear();
        encode_method(&mut out, 0, AMQPClass::Connection(connection::AMQPMethod::StartOk(start_ok)));
        writer.write_all(&out).await?;
        let AMQPClass::Connection(connection::AMQPMethod::Tune(tune)) = reader.method().await? else {
            bail!("expected connection.tune");
        };
        let frame_max = match tune.frame_max {
            0 => FRAME_MAX,
            broker => broker.min(FRAME_MAX),
        };
        let tune_ok = connection::TuneOk { channel_max: 1, frame_max, heartbeat: 0 };
        out.clear();
        encode_method(&mut out, 0, AMQPClass::Connection(connection::AMQPMethod::TuneOk(tune_ok)));
        let open = connection::Open { virtual_host: "/".into() };
        encode_method(&mut out, 0, AMQPClass::Connection(connection::AMQPMethod::Open(open)));
        encode_method(&mut out, CHANNEL, AMQPClass::Channel(channel::AMQPMethod::Open(channel::Open {})));
        writer.write_all(&out).await?;
        let AMQPClass::Connection(connection::AMQPMethod::OpenOk(_)) = reader.method().await? else {
            bail!("expected connection.open-ok");
        };
        let AMQPClass::Channel(channel::AMQPMethod::OpenOk(_)) = reader.method().await? else {
            bail!("expected channel.open-ok");
        };
        Ok(Opened { reader, writer, frame_max: frame_max as usize })
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
        .await
        .context("AMQP handshake timed out")?
        .with_context(|| format!("{client_id}: connecting to amqp://{addr}"))
}

/// `connection.close` with reply 200, as a client says goodbye.
pub fn goodbye() -> Vec<u8> {
    let close = connection::Close { reply_code: 200, reply_text: "bye".into(), class_id: 0, method_id: 0 };
    let mut out = Vec::new();
    encode_method(&mut out, 0, AMQPClass::Connection(connection::AMQPMethod::Close(close)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_round_trips_split_by_the_frame_size() {
        let mut out = Vec::new();
        let publish = basic::Publish {
            exchange: "amq.topic".into(),
            routing_key: "a.b".into(),
            mandatory: false,
            immediate: false,
        };
        encode_method(&mut out, CHANNEL, AMQPClass::Basic(basic::AMQPMethod::Publish(publish.clone())));
        let payload: Vec<u8> = (0..=255).cycle().take(5000).collect();
        encode_content(&mut out, &basic::AMQPProperties::default().with_delivery_mode(2), &payload, 4096);
        let mut buf = BytesMut::from(&out[..]);
        let Some(Incoming::Method(AMQPClass::Basic(basic::AMQPMethod::Publish(p)))) = decode(&mut buf, 4096).unwrap()
        else {
            panic!("expected basic.publish");
        };
        assert_eq!(p, publish);
        assert!(matches!(decode(&mut buf, 4096).unwrap(), Some(Incoming::Header { body_size: 5000 })));
        let mut body = Vec::new();
        while let Some(Incoming::Body(chunk)) = decode(&mut buf, 4096).unwrap() {
            assert!(chunk.len() <= 4096 - FRAME_OVERHEAD);
            body.extend_from_slice(&chunk);
        }
        assert_eq!(body, payload);
        assert!(buf.is_empty());
    }

    #[test]
    fn partial_frames_wait_and_oversized_ones_are_refused() {
        let mut out = Vec::new();
        encode_content(&mut out, &basic::AMQPProperties::default(), b"hello", 4096);
        for cut in 0..out.len() {
            let mut buf = BytesMut::from(&out[..cut]);
            let first = decode(&mut buf, 4096).unwrap();
            assert!(first.is_none() || cut >= out.len() - 13, "cut at {cut}");
        }
        let mut buf = BytesMut::from(&[FRAME_BODY, 0, 1, 0, 1, 0, 0][..]);
        assert!(decode(&mut buf, 4096).is_err());
        let mut buf = BytesMut::from(&[FRAME_BODY, 0, 1, 0, 0, 0, 1, b'x', 0][..]);
        assert!(decode(&mut buf, 4096).is_err(), "no end octet");
    }
}
