//! [`StompFrontEnd`]: the STOMP listener as the broker sees it (a [`FrontEnd`]).

use std::sync::Arc;

use tolk_core::frontend::{FrontEnd, FrontEndContext, Listen, StartFuture, Started, Transport};
use tolk_core::listener::{ConnectionLimits, bind_tcp, spawn_tcp};

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
}

impl FrontEnd for StompFrontEnd {
    fn name(&self) -> &'static str {
        "stomp"
    }

    fn listens(&self) -> Vec<Listen> {
        if !self.config.enabled {
            return Vec::new();
        }
        vec![Listen { name: "stomp", transport: Transport::Tcp, addr: self.config.bind }]
    }

    fn start(self: Box<Self>, ctx: FrontEndContext) -> StartFuture {
        Box::pin(async move {
            if !self.config.enabled {
                return Ok(Started::default());
            }
            let listener = bind_tcp("stomp", self.config.bind).await?;
            let addr = listener.local_addr()?;
            let limits = ConnectionLimits {
                max_connections: self.config.max_connections,
                max_per_address: self.config.max_connections_per_address,
            };
            let handler = Arc::new(StompHandler { config: Arc::new(self.config), auth: ctx.auth.clone() });
            spawn_tcp(listener, handler, limits, &ctx);
            tracing::info!(%addr, "STOMP listening");
            Ok(Started::listening(vec![addr]))
        })
    }
}
