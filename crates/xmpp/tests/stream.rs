//! The XMPP front end over real sockets, with a raw client that can send what a real one never
//! would: STARTTLS on the same socket, bytes smuggled after `<starttls/>`, hostile XML. The
//! interop suite (interop/test_xmpp.py) drives it with slixmpp and xmpp.js.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;
use tolk_core::frontend::{FrontEnd, FrontEndContext};
use tolk_core::{Metrics, Router, RouterConfig};
use tolk_tls::Tls;
use tolk_tls::testing::{TestPki, connector};
use tolk_xmpp::{XmppConfig, XmppFrontEnd};

const WAIT: Duration = Duration::from_secs(5);
const HEADER: &str = "<?xml version='1.0'?><stream:stream to='localhost' xmlns='jabber:client' \
                      xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>";

struct Broker {
    addr: SocketAddr,
    pki: TestPki,
    ctx: FrontEndContext,
    _dir: TempDir,
}

/// A directory removed when the test ends.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Broker {
    async fn start() -> Broker {
        Self::start_with(XmppConfig::default()).await
    }

    async fn start_with(config: XmppConfig) -> Broker {
        let dir = std::env::temp_dir().join(format!("tolk-xmpp-{}-{}", std::process::id(), fastrand_name()));
        std::fs::create_dir_all(&dir).unwrap();
        let pki = TestPki::create(&dir, "xmpp", "client");
        let router = Router::new(RouterConfig::default(), Arc::new(Metrics::new()));
        let mut ctx = FrontEndContext::new(router, dir.clone());
        ctx.tls = Some(Tls::load(pki.config()).unwrap());
        let config = XmppConfig { bind: "127.0.0.1:0".parse().unwrap(), ..config };
        let addrs = Box::new(XmppFrontEnd::new(config)).start(ctx.clone()).await.expect("XMPP starts").addrs;
        Broker { addr: addrs[0], pki, ctx, _dir: TempDir(dir) }
    }

    async fn stop(self) {
        self.ctx.shutdown.cancel();
        self.ctx.tracker.close();
        timeout(WAIT, self.ctx.tracker.wait()).await.expect("front end stops");
    }
}

fn fastrand_name() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

/// Reads until `text` has arrived; everything read so far.
async fn read_until(stream: &mut (impl AsyncRead + Unpin), seen: &mut String, text: &str) -> String {
    let mut buf = [0u8; 4096];
    while !seen.contains(text) {
        let n =
            timeout(WAIT, stream.read(&mut buf)).await.unwrap_or_else(|_| panic!("no {text:?} in {seen:?}")).unwrap();
        assert!(n > 0, "closed before {text:?}; got {seen:?}");
        seen.push_str(std::str::from_utf8(&buf[..n]).unwrap());
    }
    let at = seen.find(text).unwrap() + text.len();
    seen.drain(..at).collect()
}

/// Logs in with PLAIN over `stream` and binds `resource`.
async fn log_in(stream: &mut (impl AsyncRead + AsyncWrite + Unpin), seen: &mut String, resource: &str) {
    stream.write_all(HEADER.as_bytes()).await.unwrap();
    let features = read_until(stream, seen, "</stream:features>").await;
    assert!(features.contains("<mechanism>PLAIN</mechanism>"), "{features}");
    let plain = base64::engine::general_purpose::STANDARD.encode(format!("\0{resource}\0secret"));
    let auth = format!("<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>{plain}</auth>");
    stream.write_all(auth.as_bytes()).await.unwrap();
    read_until(stream, seen, "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>").await;
    stream.write_all(HEADER.as_bytes()).await.unwrap();
    let features = read_until(stream, seen, "</stream:features>").await;
    assert!(features.contains("urn:ietf:params:xml:ns:xmpp-bind"), "{features}");
    let bind = format!(
        "<iq type='set' id='b'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><resource>{resource}</resource></bind></iq>"
    );
    stream.write_all(bind.as_bytes()).await.unwrap();
    let bound = read_until(stream, seen, "</iq>").await;
    assert!(bound.contains(&format!("<jid>{resource}@localhost/{resource}</jid>")), "{bound}");
}

#[tokio::test]
async fn starttls_discards_what_was_sent_in_clear_and_pubsub_runs_over_tls() {
    let broker = Broker::start().await;
    let mut tcp = TcpStream::connect(broker.addr).await.unwrap();
    let mut seen = String::new();
    tcp.write_all(HEADER.as_bytes()).await.unwrap();
    let features = read_until(&mut tcp, &mut seen, "</stream:features>").await;
    assert!(features.contains("<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"), "{features}");
    // A man in the middle appends a publish after <starttls/>: it must not count.
    let smuggled = "<iq type='set' id='evil' to='pubsub.localhost'><pubsub xmlns='http://jabber.org/protocol/pubsub'>\
                    <publish node='evil'><item/></publish></pubsub></iq>";
    tcp.write_all(format!("<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>{smuggled}").as_bytes()).await.unwrap();
    read_until(&mut tcp, &mut seen, "<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>").await;
    assert!(seen.is_empty(), "nothing after <proceed/> in clear: {seen:?}");
    let name = ServerName::try_from("localhost").unwrap();
    let mut tls = connector(&[&broker.pki]).connect(name, tcp).await.expect("TLS handshake after STARTTLS");
    log_in(&mut tls, &mut seen, "alice").await;
    assert!(!seen.contains("evil"), "{seen}");

    let subscribe = "<iq type='set' id='s' to='pubsub.localhost'><pubsub xmlns='http://jabber.org/protocol/pubsub'>\
                     <subscribe node='a/+' jid='alice@localhost'/></pubsub></iq>";
    tls.write_all(subscribe.as_bytes()).await.unwrap();
    let result = read_until(&mut tls, &mut seen, "</iq>").await;
    assert!(result.contains("subscription='subscribed'"), "{result}");
    let publish = "<iq type='set' id='p' to='pubsub.localhost'><pubsub xmlns='http://jabber.org/protocol/pubsub'>\
                   <publish node='a/b'><item id='i1'><t xmlns='urn:x'>21.5 &amp; up</t></item></publish></pubsub></iq>";
    tls.write_all(publish.as_bytes()).await.unwrap();
    let result = read_until(&mut tls, &mut seen, "</iq>").await;
    assert!(result.contains("type='result' id='p'") && result.contains("<item id='i1'/>"), "{result}");
    let event = read_until(&mut tls, &mut seen, "</message>").await;
    assert!(
        event.contains("<items node='a/b'><item id='i1'><t xmlns='urn:x'>21.5 &amp; up</t></item></items>"),
        "{event}"
    );
    // The smuggled publish never reached the router: node `evil` has no item.
    let items = "<iq type='get' id='g' to='pubsub.localhost'><pubsub xmlns='http://jabber.org/protocol/pubsub'>\
                 <items node='evil'/></pubsub></iq>";
    tls.write_all(items.as_bytes()).await.unwrap();
    let answer = read_until(&mut tls, &mut seen, "</iq>").await;
    assert!(answer.contains("<items node='evil'></items>"), "{answer}");
    broker.stop().await;
}

/// Opens a stream in clear and sends `bytes`; the stream error the server answers with.
async fn stream_error_for(broker: &Broker, bytes: &[u8]) -> String {
    let mut tcp = TcpStream::connect(broker.addr).await.unwrap();
    let mut seen = String::new();
    tcp.write_all(HEADER.as_bytes()).await.unwrap();
    read_until(&mut tcp, &mut seen, "</stream:features>").await;
    // The server may close while this is still being written.
    let _ = tcp.write_all(bytes).await;
    let error = read_until(&mut tcp, &mut seen, "</stream:error>").await;
    let mut rest = Vec::new();
    let _ = timeout(WAIT, tcp.read_to_end(&mut rest)).await.expect("the server closes after a stream error");
    error
}

#[tokio::test]
async fn hostile_input_ends_only_that_stream_with_its_stream_error() {
    let broker = Broker::start().await;
    let laughs = "<!DOCTYPE lolz [<!ENTITY lol 'lol'><!ENTITY lol2 '&lol;&lol;&lol;'>]><iq>&lol2;</iq>";
    let cases: [(&str, Vec<u8>); 4] = [
        ("not-well-formed", b"<iq type='get' id='1'><ping xmlns='urn:xmpp:ping'></iq>".to_vec()),
        ("restricted-xml", laughs.as_bytes().to_vec()),
        ("policy-violation", format!("<iq><x>{}", "a".repeat(70_000)).into_bytes()),
        ("not-authorized", b"<iq type='get' id='1'><ping xmlns='urn:xmpp:ping'/></iq>".to_vec()),
    ];
    // A neighbour stays served throughout.
    let mut neighbour = TcpStream::connect(broker.addr).await.unwrap();
    let mut seen = String::new();
    log_in(&mut neighbour, &mut seen, "bob").await;
    for (condition, bytes) in cases {
        let error = stream_error_for(&broker, &bytes).await;
        let expected = format!("<{condition} xmlns='urn:ietf:params:xml:ns:xmpp-streams'/>");
        assert!(error.contains(&expected), "{condition}: {error}");
    }
    neighbour.write_all(b"<iq type='get' id='n' to='localhost'><ping xmlns='urn:xmpp:ping'/></iq>").await.unwrap();
    read_until(&mut neighbour, &mut seen, "id='n'").await;
    broker.stop().await;
}

#[tokio::test]
async fn a_client_over_the_stanza_rate_is_slowed_down_not_closed() {
    let broker = Broker::start_with(XmppConfig { max_stanzas_per_second: 10, ..XmppConfig::default() }).await;
    let mut tcp = TcpStream::connect(broker.addr).await.unwrap();
    let mut seen = String::new();
    log_in(&mut tcp, &mut seen, "carol").await;
    // The log-in took 4 of the 10 a second may bring; 30 pings in one write are then answered
    // over about 2.4 s, every one of them, from what was read at once.
    let started = std::time::Instant::now();
    let pings: String = (0..30)
        .map(|i| format!("<iq type='get' id='p{i}' to='localhost'><ping xmlns='urn:xmpp:ping'/></iq>"))
        .collect();
    tcp.write_all(pings.as_bytes()).await.unwrap();
    for i in 0..30 {
        let answer = timeout(WAIT, read_until(&mut tcp, &mut seen, "/>")).await.expect("every ping is answered");
        assert!(answer.contains(&format!("id='p{i}'")) && answer.contains("type='result'"), "{answer}");
    }
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(2000), "30 stanzas at 10 a second took only {took:?}");
    broker.stop().await;
}
