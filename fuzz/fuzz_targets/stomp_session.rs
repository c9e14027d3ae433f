//! The STOMP front end fed the fuzz input as one client's bytes over loopback TCP, against a
//! fresh `tolk_core::Router`; the connection must end after the client's EOF and the front end
//! must stop. Seeds: client conversations built from the STOMP 1.2 specification's frames.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use tolk_core::Protocol;
use tolk_stomp::{StompConfig, StompFrontEnd};

fuzz_target!(|data: &[u8]| {
    let config = StompConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        // No heart-beats from the server: they would only add timer wake-ups to every input.
        heart_beat_send: Duration::ZERO,
        heart_beat_receive: Duration::ZERO,
        connect_timeout: Duration::from_secs(1),
        write_timeout: Duration::from_secs(1),
        ..StompConfig::default()
    };
    tolk_fuzz::run_tcp_session(Protocol::Stomp, Box::new(StompFrontEnd::new(config)), data);
});
