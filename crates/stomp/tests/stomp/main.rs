//! The STOMP front end over real sockets: an in-process broker on an ephemeral port and a
//! raw-socket test client built on the codec. One test binary, one module per area.

mod backpressure;
mod client;
mod heartbeat;
mod malformed;
mod queue;
mod session;
mod transaction;
mod translation;
