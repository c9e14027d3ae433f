//! Plain HTTP/1.1 for the WS-N client, on hyper's connection-level API: a publisher owns one
//! keep-alive connection (no pool: like a TCP connection of the other protocols, it is the
//! publisher's), Subscribe and Unsubscribe use a connection each, and a subscriber's consumer
//! endpoint serves the connections the broker opens to it.

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};

use anyhow::{Context, Result, anyhow};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full, Limited};
use hyper::body::{Body, Incoming};
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::soap;

/// Most bytes of a response or request body read; the broker's answers are a few hundred bytes,
/// and a pushed Notify holds one message (or a small batch).
const MAX_BODY: usize = 4 << 20;

/// An `http://authority/path` URL, resolved.
#[derive(Debug, Clone)]
pub struct HttpUrl {
    /// Where to connect.
    pub addr: SocketAddr,
    /// `host:port`, for the Host header.
    pub authority: String,
    /// Path (and query), from `/`.
    pub path: String,
}

impl HttpUrl {
    /// Reads a URL the broker handed out (a subscription manager's address).
    pub fn parse(url: &str) -> Result<HttpUrl> {
        let rest = url.strip_prefix("http://").with_context(|| format!("{url} is not an http:// URL"))?;
        let (authority, path) = rest.find('/').map_or((rest, "/"), |i| rest.split_at(i));
        let host_port = if authority.rsplit_once(':').is_some_and(|(_, p)| !p.contains(']')) {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        let addr = host_port
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {authority}"))?
            .next()
            .with_context(|| format!("{authority} resolves to no address"))?;
        Ok(HttpUrl { addr, authority: authority.to_string(), path: path.to_string() })
    }
}

/// The future that runs a client connection; it ends when the connection closes.
pub type Driver = Connection<TokioIo<TcpStream>, Full<Bytes>>;

/// The sending side of one client connection.
pub struct HttpConnection {
    sender: SendRequest<Full<Bytes>>,
    authority: String,
}

/// Opens a connection to `url`'s server; the caller runs the returned driver.
pub async fn connect(url: &HttpUrl) -> Result<(HttpConnection, Driver)> {
    let stream = TcpStream::connect(url.addr).await.with_context(|| format!("connecting to {}", url.addr))?;
    // A lone small request must not wait for a delayed ACK (Nagle).
    stream.set_nodelay(true)?;
    let (sender, driver) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    Ok((HttpConnection { sender, authority: url.authority.clone() }, driver))
}

/// Reads a body, at most [`MAX_BODY`] bytes of it.
pub async fn read_body(body: impl Body<Data = Bytes, Error = hyper::Error>) -> Result<Bytes> {
    Ok(Limited::new(body, MAX_BODY).collect().await.map_err(|e| anyhow!(e))?.to_bytes())
}

impl HttpConnection {
    /// POSTs a SOAP 1.2 document to `path`; returns the status and the body of the answer.
    pub async fn post(&mut self, path: &str, document: String) -> Result<(StatusCode, Bytes)> {
        let request = Request::post(path)
            .header(HOST, &self.authority)
            .header(CONTENT_TYPE, soap::CONTENT_TYPE)
            .body(Full::new(Bytes::from(document)))?;
        self.sender.ready().await.context("HTTP connection to the broker is gone")?;
        let response = self.sender.send_request(request).await.context("HTTP request to the broker failed")?;
        let status = response.status();
        Ok((status, read_body(response.into_body()).await?))
    }
}

/// POSTs one document on a connection of its own, which closes once the answer is read.
pub async fn post_once(url: &HttpUrl, document: String) -> Result<(StatusCode, Bytes)> {
    let (mut connection, driver) = connect(url).await?;
    // The driver ends by itself when `connection` is dropped.
    tokio::spawn(driver);
    connection.post(&url.path, document).await
}

/// Serves HTTP/1.1 requests on one accepted connection until the peer closes it.
pub async fn serve<F, Fut>(stream: TcpStream, handle: F) -> hyper::Result<()>
where
    F: Fn(Request<Incoming>) -> Fut + Send + 'static,
    Fut: Future<Output = Response<Empty<Bytes>>> + Send + 'static,
{
    // Replies are tiny: send them at once rather than waiting for a delayed ACK.
    let _ = stream.set_nodelay(true);
    let service = service_fn(move |request| {
        let reply = handle(request);
        async move { Ok::<_, Infallible>(reply.await) }
    });
    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await
}

/// The local address this host uses to reach `peer` (a connected UDP socket sends nothing):
/// where a consumer endpoint must listen for the broker to reach it.
pub fn local_ip_towards(peer: SocketAddr) -> Result<IpAddr> {
    let any: SocketAddr = if peer.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { ([0u16; 8], 0).into() };
    let probe = UdpSocket::bind(any)?;
    probe.connect(peer).with_context(|| format!("no route to {peer}"))?;
    Ok(probe.local_addr()?.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_address_host_header_and_path() {
        let url = HttpUrl::parse("http://127.0.0.1:8080/wsn/subscriptions/ab?x=1").unwrap();
        assert_eq!(url.addr, "127.0.0.1:8080".parse().unwrap());
        assert_eq!((url.authority.as_str(), url.path.as_str()), ("127.0.0.1:8080", "/wsn/subscriptions/ab?x=1"));
        let url = HttpUrl::parse("http://[::1]").unwrap();
        assert_eq!((url.addr.port(), url.path.as_str()), (80, "/"));
        assert!(HttpUrl::parse("https://127.0.0.1/").is_err());
    }
}
