//! Bridges to other brokers (`[[bridge]]`): the engine every bridge kind shares.
//!
//! A bridge is a client of the router, like a session: it publishes what its remote sends under
//! the `in` rules, and sends the remote what its spool collects under the `out` rules. The
//! engine owns everything that does not depend on the remote's protocol: the configuration and
//! Mosquitto's topic rule syntax ([`rule`]), the spool, the loop rules and the counters
//! ([`Link`]), and the waits between connection attempts ([`Backoff`]). Each kind of remote is
//! a crate of its own (`bridges/mqtt`, …) that provides a [`Runner`]: a task that connects,
//! reconnects, and moves messages between its [`Link`] and the remote, and the HTTP routes it
//! serves on the broker's port, if any (the WS-N kind's consumer).

#![warn(missing_docs)]

mod backoff;
mod commits;
mod config;
mod link;
pub mod rule;
mod spool;
#[cfg(feature = "testing")]
pub mod testing;

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;

use tolk_core::frontend::{FrontEnd, FrontEndContext, Listen, StartFuture, Started};

pub use backoff::Backoff;
pub use commits::AwaitingStore;
pub use config::{BridgeConfig, ConfigError, Kind};
pub use link::{Inbound, Link, Outbound, Refused};
pub use spool::{Spool, settle};

/// Starts one bridge of a kind.
pub type Runner = fn(Link) -> Launch;

/// A started bridge: its task, which runs until the broker stops (its link's shutdown token),
/// and the routes it serves on the broker's HTTP port.
pub struct Launch {
    task: Pin<Box<dyn Future<Output = ()> + Send>>,
    routes: Option<axum::Router>,
}

impl Launch {
    /// A bridge that is a task alone.
    pub fn task(task: impl Future<Output = ()> + Send + 'static) -> Self {
        Launch { task: Box::pin(task), routes: None }
    }

    /// A bridge that also serves `routes` on the broker's HTTP port.
    pub fn with_routes(task: impl Future<Output = ()> + Send + 'static, routes: axum::Router) -> Self {
        Launch { task: Box::pin(task), routes: Some(routes) }
    }
}

/// Every configured bridge, started as one front end (it listens on nothing).
pub struct Bridges {
    configs: Vec<BridgeConfig>,
    runners: Vec<(Kind, Runner)>,
}

impl Bridges {
    /// The bridges of `configs`, run by the kinds in `runners`.
    pub fn new(configs: Vec<BridgeConfig>, runners: Vec<(Kind, Runner)>) -> Self {
        Bridges { configs, runners }
    }

    /// Checks every bridge's configuration, and that its kind can be run.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut names = std::collections::HashSet::new();
        for config in &self.configs {
            config.validate()?;
            if !names.insert(config.name.as_str()) {
                return Err(config.error("another bridge has this name"));
            }
            if !self.runners.iter().any(|(kind, _)| *kind == config.kind) {
                return Err(config.error(&format!("bridges of kind {} are not available yet", config.kind.as_str())));
            }
        }
        Ok(())
    }
}

impl FrontEnd for Bridges {
    fn name(&self) -> &'static str {
        "bridges"
    }

    fn listens(&self) -> Vec<Listen> {
        Vec::new()
    }

    fn start(self: Box<Self>, ctx: FrontEndContext) -> StartFuture {
        Box::pin(async move {
            self.validate().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
            let node: Arc<str> = match ctx.router.node_name() {
                Some(node) => node.clone(),
                None => Arc::from("tolk"),
            };
            let mut routes: Option<axum::Router> = None;
            for config in self.configs {
                let Some(&(_, runner)) = self.runners.iter().find(|(kind, _)| *kind == config.kind) else { continue };
                let name = config.name.clone();
                let link = Link::open(&ctx, config, node.clone())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
                tracing::info!(bridge = %name, "bridge starting");
                let launch = runner(link);
                ctx.tracker.spawn(launch.task);
                if let Some(more) = launch.routes {
                    routes = Some(match routes {
                        Some(routes) => routes.merge(more),
                        None => more,
                    });
                }
            }
            Ok(Started { addrs: Vec::new(), routes })
        })
    }
}
