//! [`StompFrontEnd`]: the STOMP listener as the broker sees it (a [`FrontEnd`]).

use std::sync::Arc;

use tolk_core::frontend::{FrontEnd, FrontEndContext, Listen, StartFuture, Started};
use tolk_core::listener::{TcpListeners, WebSocketEndpoint};

use crate::config::StompConfig;
use crate::connection::StompHandler;

/// The STOMP front end: `StompFrontEnd::new(config)` and hand it to the broker.
pub struct StompFrontEnd {
    config: StompConfig,
}

impl StompFrontEnd {
    /// A front end with this configuration; CONNECT credentials go to the broker's
    /// authenticator ([`FrontEndContext::auth`]).
    pub fn new(config: StompConfig) -> Self {
        StompFrontEnd { config }
    }

    fn listeners(&self) -> TcpListeners {
        let c = &self.config;
        let limits = (c.max_connections, c.max_connections_per_address);
        TcpListeners::new("STOMP", ("stomp.bind", "stomp.tls_bind"), c.enabled, (c.bind, c.tls_bind), limits)
    }
}

impl FrontEnd for StompFrontEnd {
    fn name(&self) -> &'static str {
        "stomp"
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
            let websocket = self.config.websocket.then_some(WebSocketEndpoint {
                path: "/stomp",
                subprotocols: &["v12.stomp", "v11.stomp", "v10.stomp"],
                max_message_bytes: self.config.max_frame_size_bytes,
                limits: listeners.limits,
            });
            let handler = Arc::new(StompHandler { config: Arc::new(self.config), auth: ctx.auth.clone() });
            let addrs = listeners.start(handler.clone(), &ctx).await?;
            let routes = websocket.map(|endpoint| endpoint.routes(handler, &ctx));
            Ok(Started { addrs, routes })
        })
    }
}
