//! The cluster (`[cluster]`): many tolk nodes, one topic space, over NATS JetStream.
//!
//! Each node is a client of NATS, and a client of its own router like a bridge is:
//! - **Out.** Everything local clients publish goes through one queue, `$cluster/out`, bound
//!   to `#` ([`tolk_bridge::Spool`]): at-most-once messages to core NATS subjects
//!   `<prefix>.0.<topic>`, at-least-once ones to the JetStream stream on `<prefix>.1.<topic>`
//!   ([`subject`]). The queue confirms to publishers ([`tolk_core::QueueOptions::confirms`]):
//!   a PUBACK, confirm or RECEIPT goes out once JetStream has the message. While NATS is away
//!   the queue keeps at-least-once messages (on disk with the store) and publishers are
//!   acknowledged once they are kept here; they are sent when NATS is back.
//! - **In.** The node subscribes only to what its local subscribers want
//!   ([`tolk_core::interest`]), merged into filters that do not overlap ([`cover`]): core
//!   subscriptions for at-most-once, and one durable JetStream consumer, `tolk-<node>`, whose
//!   filter subjects follow the same set, for at-least-once. A message from JetStream is
//!   acknowledged there once this node's store has what it left here.
//! - **Retained** messages live in the bucket `<prefix>_retained` (a JetStream key-value
//!   bucket, last value per topic). Every node follows it, so a subscriber anywhere gets them.
//! - **Loops.** Messages carry their node's name (`Tolk-Node`); a node drops its own.

#![warn(missing_docs)]

mod config;
pub mod cover;
#[cfg(feature = "nats")]
mod node;
pub mod subject;

use std::io;

use tolk_core::frontend::{FrontEnd, FrontEndContext, Listen, StartFuture};

pub use config::{ClusterConfig, ConfigError};

/// The cluster, started as a front end that listens on nothing.
pub struct Cluster {
    config: ClusterConfig,
    node: String,
}

impl Cluster {
    /// This node, named `node`, in the cluster `config` describes.
    pub fn new(config: ClusterConfig, node: String) -> Self {
        Cluster { config, node }
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.config.validate(&self.node)
    }
}

impl FrontEnd for Cluster {
    fn name(&self) -> &'static str {
        "cluster"
    }

    fn listens(&self) -> Vec<Listen> {
        Vec::new()
    }

    fn start(self: Box<Self>, ctx: FrontEndContext) -> StartFuture {
        Box::pin(async move {
            self.validate().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
            #[cfg(feature = "nats")]
            {
                let node = node::Node::open(&ctx, std::sync::Arc::new(self.config), self.node.into())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                ctx.tracker.spawn(node.run());
                Ok(tolk_core::frontend::Started { addrs: Vec::new(), routes: None })
            }
            #[cfg(not(feature = "nats"))]
            {
                let _ = ctx;
                Err(io::Error::new(io::ErrorKind::Unsupported, config::NOT_BUILT))
            }
        })
    }
}
