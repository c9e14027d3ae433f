//! The push client's connector: resolves a consumer's host, keeps the addresses the consumer
//! policy allows ([`crate::allow`]), and connects to the first that answers. Checking here, on
//! every new connection and on the addresses actually connected to, leaves no gap between a
//! check and a second lookup: a name that starts resolving to an internal address or to the
//! broker itself is never followed. Plain `http://` only.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::Uri;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::allow::ConsumerPolicy;

/// A hyper connector that connects only where the [`ConsumerPolicy`] allows.
#[derive(Clone)]
pub(crate) struct GuardedConnector {
    policy: Arc<ConsumerPolicy>,
    connect_timeout: Duration,
}

impl GuardedConnector {
    pub(crate) fn new(policy: Arc<ConsumerPolicy>, connect_timeout: Duration) -> Self {
        GuardedConnector { policy, connect_timeout }
    }

    async fn connect(self, uri: Uri) -> io::Result<TokioIo<TcpStream>> {
        if !uri.scheme_str().is_some_and(|s| s.eq_ignore_ascii_case("http")) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "only http:// consumers are supported"));
        }
        let host = uri.host().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no host"))?;
        let addresses = self
            .policy
            .addresses(host, uri.port_u16().unwrap_or(80))
            .await
            .map_err(|refused| io::Error::new(io::ErrorKind::PermissionDenied, refused))?;
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
        for address in addresses {
            match tokio::time::timeout(self.connect_timeout, TcpStream::connect(address)).await {
                Ok(Ok(stream)) => {
                    stream.set_nodelay(true)?;
                    return Ok(TokioIo::new(stream));
                }
                Ok(Err(e)) => last = e,
                Err(_) => last = io::Error::new(io::ErrorKind::TimedOut, format!("connecting to {address} timed out")),
            }
        }
        Err(last)
    }
}

impl tower_service::Service<Uri> for GuardedConnector {
    type Response = TokioIo<TcpStream>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<TokioIo<TcpStream>>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        Box::pin(self.clone().connect(uri))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_service::Service;

    fn connector(allow: &[&str]) -> GuardedConnector {
        let allow: Vec<String> = allow.iter().map(|s| (*s).to_owned()).collect();
        let policy = ConsumerPolicy::new(&allow, Arc::default(), Duration::from_secs(5));
        GuardedConnector::new(Arc::new(policy), Duration::from_secs(5))
    }

    #[tokio::test]
    async fn connects_only_where_the_policy_allows() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("http://{}/c", listener.local_addr().unwrap()).parse().unwrap();
        let refused = connector(&["10.0.0.0/8"]).call(uri.clone()).await.unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::PermissionDenied);
        assert!(refused.to_string().contains("consumer_allow"), "{refused}");
        assert!(connector(&["127.0.0.0/8"]).call(uri.clone()).await.is_ok());
        let https: Uri = "https://127.0.0.1/c".parse().unwrap();
        assert_eq!(connector(&[]).call(https).await.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }
}
