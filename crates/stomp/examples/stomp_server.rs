//! Runs the STOMP front end alone, for trying third-party clients against it without the full
//! broker: `cargo run -p tolk-stomp --example stomp_server -- 127.0.0.1:61613`. Prints the bound
//! address and runs until Ctrl-C.

use std::sync::Arc;

use tolk_core::frontend::{FrontEnd, FrontEndContext};
use tolk_core::{Metrics, Router, RouterConfig};
use tolk_stomp::{StompConfig, StompFrontEnd};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let bind = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:61613".into());
    let config = StompConfig {
        bind: bind.parse().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?,
        ..StompConfig::default()
    };
    let router = Router::new(RouterConfig::default(), Arc::new(Metrics::new()));
    let ctx = FrontEndContext::new(router, std::env::temp_dir());
    let addrs = Box::new(StompFrontEnd::new(config)).start(ctx.clone()).await?.addrs;
    println!("STOMP listening on {}", addrs[0]);
    tokio::signal::ctrl_c().await?;
    ctx.shutdown.cancel();
    ctx.tracker.close();
    ctx.tracker.wait().await;
    Ok(())
}
