//! The AMQP 0-9-1 front end fed the fuzz input as one client's bytes over loopback TCP, against
//! a fresh `tolk_core::Router`; the connection must end after the client's EOF and the front
//! end must stop. Seeds: the protocol header and a client's handshake, then channel, exchange,
//! queue and basic methods with content.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use tolk_amqp::{AmqpConfig, AmqpFrontEnd};
use tolk_core::Protocol;

fuzz_target!(|data: &[u8]| {
    let config = AmqpConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        handshake_timeout: Duration::from_secs(1),
        ..AmqpConfig::default()
    };
    tolk_fuzz::run_tcp_session(Protocol::Amqp, Box::new(AmqpFrontEnd::new(config)), data);
});
