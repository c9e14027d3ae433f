//! The XMPP front end fed the fuzz input as one client's bytes over loopback TCP, against a
//! fresh `tolk_core::Router`; the connection must end after the client's EOF and the front end
//! must stop. No `[tls]`: STARTTLS is not offered, so the whole conversation stays in clear.
//! Seeds: a slixmpp-style session (header, SASL PLAIN, bind, pubsub requests) and hostile XML.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use tolk_core::Protocol;
use tolk_xmpp::{XmppConfig, XmppFrontEnd};

fuzz_target!(|data: &[u8]| {
    let config = XmppConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        connect_timeout: Duration::from_secs(1),
        write_timeout: Duration::from_secs(1),
        ..XmppConfig::default()
    };
    tolk_fuzz::run_tcp_session(Protocol::Xmpp, Box::new(XmppFrontEnd::new(config)), data);
});
