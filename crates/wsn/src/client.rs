//! The HTTP client that POSTs notifications to consumers: hyper's pooled HTTP/1.1 client, so a
//! consumer receiving a stream of notifications reuses one keep-alive connection instead of
//! paying a TCP handshake per message. Connections are made by [`GuardedConnector`], which
//! connects only to addresses the consumer policy allows. Plain `http://` only: the connector
//! refuses other schemes (https consumers are refused earlier, at Subscribe, with a fault
//! saying so). Every push carries this broker's loop mark ([`crate::push_mark`]).
//!
//! The WS-N bridge (`bridges/wsn`) talks to its remote broker through the same client
//! ([`NotifyClient::for_bridge`], [`NotifyClient::call`]), so the binary holds one copy of it.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderValue, Method, Request, Uri, header};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use wsn_xml::SoapVersion;

use crate::allow::ConsumerPolicy;
use crate::config::PushConfig;
use crate::connector::GuardedConnector;
use crate::push_mark;

/// Most bytes of a consumer's response body read (and thrown away) so that the connection can
/// be reused; a longer answer is cut off and its connection closed.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// Idle keep-alive connections are closed after this long.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a delivery attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum PostError {
    /// The consumer answered, but not with 2xx.
    #[error("consumer answered HTTP {0}")]
    Status(u16),
    /// No answer within the request timeout.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// Connecting or talking to the consumer failed.
    #[error("{0}")]
    Transport(String),
}

/// A pooled client shared by every push subscription (or one bridge's).
pub struct NotifyClient {
    client: Client<GuardedConnector, Full<Bytes>>,
    timeout: Duration,
}

impl NotifyClient {
    pub(crate) fn new(config: &PushConfig, policy: Arc<ConsumerPolicy>) -> Self {
        let connector = GuardedConnector::new(policy, config.request_timeout);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .pool_max_idle_per_host(config.max_concurrent_per_consumer.max(1))
            .build(connector);
        NotifyClient { client, timeout: config.request_timeout }
    }

    /// The client of a WS-N bridge: any host (the remote is the operator's choice), each
    /// exchange within `timeout`.
    pub fn for_bridge(timeout: Duration) -> Self {
        let config = PushConfig { request_timeout: timeout, ..PushConfig::default() };
        NotifyClient::new(&config, Arc::new(ConsumerPolicy::new(&[], Arc::default(), timeout)))
    }

    /// POSTs a SOAP 1.2 request to `uri` and returns the status and the answer (at most
    /// 64 KiB of it), within the timeout.
    pub async fn call(&self, uri: &Uri, body: Bytes) -> Result<(u16, Bytes), PostError> {
        self.exchange(uri, SoapVersion::V12, None, body).await
    }

    /// POSTs one SOAP message carrying the loop `mark` and waits for a 2xx answer, within the
    /// request timeout.
    pub(crate) async fn post(
        &self,
        uri: &Uri,
        soap: SoapVersion,
        mark: &HeaderValue,
        body: Bytes,
    ) -> Result<(), PostError> {
        match self.exchange(uri, soap, Some(mark), body).await? {
            (status, _) if (200..300).contains(&status) => Ok(()),
            (status, _) => Err(PostError::Status(status)),
        }
    }

    async fn exchange(
        &self,
        uri: &Uri,
        soap: SoapVersion,
        mark: Option<&HeaderValue>,
        body: Bytes,
    ) -> Result<(u16, Bytes), PostError> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = uri.clone();
        let headers = request.headers_mut();
        if let Some(mark) = mark {
            headers.insert(push_mark::HEADER, mark.clone());
        }
        match soap {
            SoapVersion::V11 => {
                headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/xml; charset=utf-8"));
                // SOAP 1.1 §6.1.1: the SOAPAction header is required, its value quoted.
                headers.insert("soapaction", HeaderValue::from_static(concat_action()));
            }
            SoapVersion::V12 => {
                headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(soap12_content_type()));
            }
        }
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| PostError::Transport(error_chain(&e)))?;
            let status = response.status();
            // Read the (small) answer, which also lets the connection go back to the pool.
            let answer = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
                .collect()
                .await
                .map(|body| body.to_bytes())
                .unwrap_or_default();
            Ok((status.as_u16(), answer))
        };
        tokio::time::timeout(self.timeout, exchange).await.unwrap_or(Err(PostError::Timeout(self.timeout)))
    }
}

const fn concat_action() -> &'static str {
    "\"http://docs.oasis-open.org/wsn/bw-2/NotificationConsumer/Notify\""
}

const fn soap12_content_type() -> &'static str {
    "application/soap+xml; charset=utf-8; action=\"http://docs.oasis-open.org/wsn/bw-2/NotificationConsumer/Notify\""
}

/// The error and its causes on one line ("client error (Connect): tcp connect error: Connection
/// refused"), since hyper's top-level message alone says little.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use wsn_xml::NOTIFY_ACTION;

    #[test]
    fn header_constants_carry_the_notify_action() {
        assert_eq!(concat_action(), format!("\"{NOTIFY_ACTION}\""));
        assert!(soap12_content_type().ends_with(&format!("action=\"{NOTIFY_ACTION}\"")));
    }
}
