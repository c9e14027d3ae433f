//! The AMQP front end as the broker sees it: a [`FrontEnd`] that binds the listener, and the
//! [`ConnectionHandler`] that runs each connection.

use std::future::Future;
use std::sync::Arc;

use tolk_core::frontend::{FrontEnd, FrontEndContext, Listen, StartFuture, Started};
use tolk_core::listener::{Connection, ConnectionHandler, TcpListeners};
use tolk_core::{CloseReason, Protocol};

use crate::config::AmqpConfig;
use crate::context::Shared;

/// The AMQP 0-9-1 front end. Build it from the `[amqp]` configuration with [`AmqpFrontEnd::new`].
pub struct AmqpFrontEnd {
    config: AmqpConfig,
}

impl AmqpFrontEnd {
    /// A front end with `config`; nothing is bound until [`FrontEnd::start`].
    pub fn new(config: AmqpConfig) -> Self {
        AmqpFrontEnd { config }
    }

    fn listeners(&self) -> TcpListeners {
        let c = &self.config;
        let limits = (c.max_connections, c.max_connections_per_address);
        TcpListeners::new("AMQP 0-9-1", ("amqp.bind", "amqp.tls_bind"), c.enabled, (c.bind, c.tls_bind), limits)
    }
}

struct Handler {
    shared: Arc<Shared>,
}

impl ConnectionHandler for Handler {
    fn protocol(&self) -> Protocol {
        Protocol::Amqp
    }

    fn handle(self: Arc<Self>, connection: Connection) -> impl Future<Output = CloseReason> + Send {
        crate::connection::run(self.shared.clone(), connection)
    }
}

impl FrontEnd for AmqpFrontEnd {
    fn name(&self) -> &'static str {
        "amqp"
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
            let shared = Arc::new(Shared::new(self.config, ctx.router.clone(), ctx.auth.clone()));
            Ok(Started::listening(listeners.start(Arc::new(Handler { shared }), &ctx).await?))
        })
    }
}
