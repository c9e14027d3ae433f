//! Serves the WS-N endpoint alone (default configuration, path `/wsn`), for trying clients
//! against it before the broker binary is at hand:
//!
//! ```text
//! cargo run -p tolk-wsn --example wsn_serve -- 127.0.0.1:8080
//! ```

use std::sync::Arc;

use tolk_core::frontend::{FrontEnd, FrontEndContext};
use tolk_core::{Metrics, Router, RouterConfig};
use tolk_wsn::{WsnConfig, WsnFrontEnd};

#[tokio::main]
async fn main() {
    let bind = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8080".to_owned());
    let router = Router::new(RouterConfig::default(), Arc::new(Metrics::new()));
    let ctx = FrontEndContext::new(router, std::env::temp_dir());
    let started = Box::new(WsnFrontEnd::new(WsnConfig::default())).start(ctx.clone()).await.expect("WS-N starts");
    let app = started.routes.expect("WS-N serves routes");
    let listener = tokio::net::TcpListener::bind(&bind).await.expect("bind");
    ctx.http_addr.set(listener.local_addr().expect("address")).expect("set once");
    println!("WS-N endpoint on http://{}/wsn", listener.local_addr().expect("address"));
    let shutdown = ctx.shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        shutdown.cancel();
    });
    axum::serve(listener, app).with_graceful_shutdown(ctx.shutdown.clone().cancelled_owned()).await.expect("serve");
}
