//! The MQTT front end (3.1.1 and 5.0 on one port) fed the fuzz input as one client's bytes over
//! loopback TCP, against a fresh `tolk_core::Router`; the connection must end after the
//! client's EOF and the front end must stop. Seeds: whole client conversations (CONNECT,
//! SUBSCRIBE, PUBLISH at each QoS, acknowledgements, DISCONNECT) in both protocol levels.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use tolk_core::Protocol;
use tolk_mqtt::{MqttConfig, MqttFrontEnd};

fuzz_target!(|data: &[u8]| {
    let config = MqttConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        // A client that never completes CONNECT is dropped well inside the harness deadline.
        connect_timeout: Duration::from_secs(1),
        write_timeout: Duration::from_secs(1),
        ..MqttConfig::default()
    };
    tolk_fuzz::run_tcp_session(Protocol::Mqtt, Box::new(MqttFrontEnd::new(config)), data);
});
