//! The remote NotificationBroker as this bridge talks to it: SOAP 1.2 requests POSTed with the
//! WS-N front end's pooled HTTP/1.1 client ([`NotifyClient`]), each answer read within the
//! request timeout and a size limit, and parsed with `wsn-xml`'s reply reader.

use std::time::Duration;

use axum::http::Uri;
use tolk_wsn::NotifyClient;
use wsn_xml::{EndpointReference, Limits, Reply, Request, RequestHeaders, SoapVersion, parse_reply, write_request};

/// Why an exchange failed, for the log.
pub(crate) type Failure = String;

/// One remote broker's endpoint.
pub(crate) struct Remote {
    client: NotifyClient,
    broker: EndpointReference,
    limits: Limits,
}

impl Remote {
    /// The broker at `url` (`http://host:port/path`), each exchange bounded by `timeout`.
    pub(crate) fn new(url: &str, timeout: Duration) -> Result<Remote, Failure> {
        let uri: Uri = url.parse().map_err(|e| format!("url {url:?}: {e}"))?;
        if uri.scheme_str() != Some("http") || uri.authority().is_none() {
            return Err(format!("url {url:?}: a WS-N bridge's url is http://host:port/path"));
        }
        Ok(Remote {
            client: NotifyClient::for_bridge(timeout),
            broker: EndpointReference::new(url),
            limits: Limits::default(),
        })
    }

    /// The broker's endpoint, for Subscribe and Notify.
    pub(crate) fn broker(&self) -> &EndpointReference {
        &self.broker
    }

    /// POSTs `request` to `to` (its reference parameters as headers, `path` as `tolk:Path`) and
    /// reads the answer: `None` for an empty `2xx` (Notify's `202`), else the parsed reply. A
    /// fault or another status is a failure.
    pub(crate) async fn call(
        &self,
        to: &EndpointReference,
        request: &Request,
        path: Option<&str>,
    ) -> Result<Option<Reply>, Failure> {
        let uri: Uri = to.address.parse().map_err(|e| format!("address {:?}: {e}", to.address))?;
        let headers = RequestHeaders { to: Some(to), path, ..RequestHeaders::default() };
        let body = write_request(SoapVersion::V12, &headers, request);
        let (status, answer) = self.client.call(&uri, body).await.map_err(|e| e.to_string())?;
        let reply = if answer.iter().all(u8::is_ascii_whitespace) {
            None
        } else {
            let reply = parse_reply(&answer, &self.limits)
                .map_err(|e| format!("HTTP {status}, and an answer that is not SOAP: {e}"))?;
            Some(reply)
        };
        match reply {
            Some(Reply::Fault { code, reason }) => Err(format!("the remote answered a fault: {code}: {reason}")),
            _ if !(200..300).contains(&status) => Err(format!("the remote answered HTTP {status}")),
            reply => Ok(reply),
        }
    }
}
