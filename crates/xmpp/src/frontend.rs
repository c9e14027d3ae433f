//! [`XmppFrontEnd`]: the XMPP listeners as the broker sees them (a [`FrontEnd`]).

use std::sync::Arc;

use tolk_core::frontend::{FrontEnd, FrontEndContext, Listen, StartFuture, Started};
use tolk_core::listener::TcpListeners;

use crate::config::XmppConfig;
use crate::connection::XmppHandler;
use crate::session::Service;

/// The XMPP front end: `XmppFrontEnd::new(config)` and hand it to the broker.
pub struct XmppFrontEnd {
    config: XmppConfig,
}

impl XmppFrontEnd {
    /// A front end with this configuration; SASL credentials go to the broker's
    /// authenticator ([`FrontEndContext::auth`]).
    pub fn new(config: XmppConfig) -> Self {
        XmppFrontEnd { config }
    }

    fn listeners(&self) -> TcpListeners {
        let c = &self.config;
        let limits = (c.max_connections, c.max_connections_per_address);
        TcpListeners::new("XMPP", ("xmpp.bind", "xmpp.tls_bind"), c.enabled, (c.bind, c.tls_bind), limits)
    }
}

impl FrontEnd for XmppFrontEnd {
    fn name(&self) -> &'static str {
        "xmpp"
    }

    fn listens(&self) -> Vec<Listen> {
        self.listeners().listens()
    }

    fn start(self: Box<Self>, ctx: FrontEndContext) -> StartFuture {
        Box::pin(async move {
            if !self.config.enabled {
                return Ok(Started::default());
            }
            let listeners = self.listeners();
            let service = Arc::new(Service {
                pubsub_jid: self.config.pubsub_jid(),
                payload_limits: wsn_xml::Limits {
                    max_document_bytes: self.config.max_stanza_bytes,
                    ..wsn_xml::Limits::default()
                },
                auth: ctx.auth.clone(),
                // STARTTLS on the plain port whenever the broker has certificates.
                tls: ctx.tls.clone(),
                config: self.config,
            });
            let addrs = listeners.start(Arc::new(XmppHandler { service }), &ctx).await?;
            Ok(Started::listening(addrs))
        })
    }
}
