//! Encoded frames on their way to the socket, and the deliveries among them, accounted for
//! once their bytes are written (the core's [`Egress`]).

use std::time::Instant;

use amq_protocol::protocol::AMQPClass;
use tolk_core::drive::Egress;
use tolk_core::{Delivery, Metrics, Protocol, QueueAck};
use tracing::warn;

use amqp_codec::{EncodeError, Encoder};

/// Encoded frames waiting for the socket, and the deliveries among them.
pub(crate) struct Output {
    buf: Vec<u8>,
    written: usize,
    encoder: Encoder,
    egress: Egress,
}

impl Output {
    pub(crate) fn new() -> Self {
        Output { buf: Vec::new(), written: 0, encoder: Encoder::default(), egress: Egress::new(Protocol::Amqp) }
    }

    pub fn method(&mut self, channel: u16, method: AMQPClass) {
        if let Err(e) = self.encoder.method(&mut self.buf, channel, method) {
            warn!(error = %e, "could not encode a method frame");
        }
    }

    /// Appends a method and its content atomically: if the content does not fit the frame
    /// size, neither is written.
    pub fn method_with_content(
        &mut self,
        channel: u16,
        method: AMQPClass,
        properties: amq_protocol::protocol::BasicProperties,
        body: &[u8],
        frame_max: u32,
    ) -> Result<(), EncodeError> {
        let mark = self.buf.len();
        let result = self
            .encoder
            .method(&mut self.buf, channel, method)
            .and_then(|()| self.encoder.content(&mut self.buf, channel, properties, body, frame_max));
        if result.is_err() {
            self.buf.truncate(mark);
        }
        result
    }

    pub(crate) fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The bytes queued and not yet written.
    pub(crate) fn unwritten(&self) -> &[u8] {
        &self.buf[self.written..]
    }

    /// Appends a heartbeat frame.
    pub(crate) fn heartbeat(&mut self) {
        Encoder::heartbeat(&mut self.buf);
    }

    /// Bytes queued and not yet written.
    pub fn len(&self) -> usize {
        self.buf.len() - self.written
    }

    /// Remembers a delivery, counted and its latency recorded once everything queued so far is
    /// written; `settle`, its queue delivery, is acked then (no-ack consumers).
    pub fn record_when_written(&mut self, delivery: &Delivery, taken_at: Instant, settle: Option<QueueAck>) {
        self.egress.record(self.len(), delivery, taken_at, settle);
    }

    pub(crate) fn advance(&mut self, n: usize, now: Instant, metrics: &Metrics) {
        self.written = (self.written + n).min(self.buf.len());
        if self.written == self.buf.len() {
            // Everything is out: give the buffer back, so an idle connection holds none.
            self.buf = Vec::new();
            self.written = 0;
        } else if self.written > 64 * 1024 && self.written * 2 > self.buf.len() {
            self.buf.drain(..self.written);
            self.written = 0;
        }
        self.egress.written(n, now, metrics);
    }
}
