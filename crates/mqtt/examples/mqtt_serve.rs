//! Runs the MQTT front end alone over a fresh router, for trying third-party clients before the
//! `tolk` binary is at hand: `cargo run -p tolk-mqtt --example mqtt_serve -- 127.0.0.1:1883`.
//! Prints "tolk ready" once listening; stops on Ctrl-C (SIGINT).

use std::net::SocketAddr;
use std::sync::Arc;

use tolk_core::frontend::{FrontEnd, FrontEndContext};
use tolk_core::{Metrics, Router, RouterConfig};
use tolk_mqtt::{MqttConfig, MqttFrontEnd};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let bind: SocketAddr = std::env::args().nth(1).as_deref().unwrap_or("127.0.0.1:1883").parse().expect("address");
    let router = Router::new(RouterConfig::default(), Arc::new(Metrics::new()));
    let ctx = FrontEndContext::new(router, std::env::temp_dir());
    let config = MqttConfig { bind, ..MqttConfig::default() };
    let addrs = Box::new(MqttFrontEnd::new(config)).start(ctx.clone()).await?.addrs;
    println!("tolk ready on {addrs:?}");
    tokio::signal::ctrl_c().await?;
    ctx.shutdown.cancel();
    ctx.tracker.close();
    ctx.tracker.wait().await;
    Ok(())
}
