//! The AMQP front end as the broker sees it: a [`FrontEnd`] that binds the listener, and the
//! [`ConnectionHandler`] that runs each connection.

use std::future::Future;
use std::sync::Arc;

use tolk_core::frontend::{FrontEnd, FrontEndContext, Listen, StartFuture, Started, Transport};
use tolk_core::listener::{Connection, ConnectionHandler, ConnectionLimits, bind_tcp, spawn_tcp};
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
        if !self.config.enabled {
            return Vec::new();
        }
        vec![Listen { name: "amqp", transport: Transport::Tcp, addr: self.config.bind }]
    }

    fn start(self: Box<Self>, ctx: FrontEndContext) -> StartFuture {
        Box::pin(async move {
            if !self.config.enabled {
                return Ok(Started::default());
            }
            let listener = bind_tcp("amqp", self.config.bind).await?;
            let addr = listener.local_addr()?;
            let limits = ConnectionLimits {
                max_connections: self.config.max_connections,
                max_per_address: self.config.max_connections_per_address,
            };
            let shared = Arc::new(Shared::new(self.config, ctx.router.clone(), ctx.auth.clone()));
            spawn_tcp(listener, Arc::new(Handler { shared }), limits, &ctx);
            Ok(Started::listening(vec![addr]))
        })
    }
}
