//! One AMQP channel's state (spec §2.2.5 channel class, §3.1.4 "message acknowledgement"):
//! delivery tags, unacknowledged deliveries, consumers, prefetch and flow, publisher confirms
//! and the content of a publish in progress; plus `channel.flow` and the channel's teardown.
//!
//! Every unacknowledged delivery holds the core's `QueueAck`; a channel that ends for any reason
//! (client close, channel error, connection end) gives all of them back to their queues in
//! order, so the core's at-least-once promise holds whatever path closes it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use amq_protocol::frame::AMQPContentHeader;
use amq_protocol::protocol::{AMQPClass, channel};
use amq_protocol::types::ShortString;
use bytes::BytesMut;
use tolk_core::{Delivery, Queue, QueueAck};

use crate::context::Ctx;
use crate::error::AmqpError;
use crate::output::Output;

/// Where a publish in progress is going, decided when `basic.publish` arrives.
pub(crate) enum PublishTarget {
    /// The default exchange: the queue named by the routing key.
    Default,
    /// `amq.topic`: the router, on this topic.
    Bridge(String),
    /// Any other exchange, routed by the registry.
    Exchange,
}

/// A `basic.publish` waiting for its content.
pub(crate) struct Publish {
    pub exchange: String,
    pub routing_key: String,
    pub mandatory: bool,
    pub target: PublishTarget,
}

/// Content assembly (spec §4.2.6): method, then one header, then body frames.
pub(crate) enum Content {
    Idle,
    Header(Publish),
    Body { publish: Publish, header: Box<AMQPContentHeader>, body: BytesMut },
}

/// One consumer (`basic.consume`).
pub(crate) struct Consumer {
    pub tag: ShortString,
    pub queue: Arc<Queue>,
    pub no_ack: bool,
    pub exclusive: bool,
    /// Deliveries written to the client and not yet settled.
    pub unacked: usize,
    /// Cancelled by the client but still holding unacknowledged deliveries: kept in the core
    /// with its credit lowered to what it holds (so nothing new is dispatched to it) until they
    /// are settled, because the core would otherwise requeue messages the client may still ack.
    pub cancelled: bool,
}

/// One unacknowledged delivery.
pub(crate) struct Unacked {
    pub ack: QueueAck,
    /// The core consumer tag, or `None` for a `basic.get`.
    pub consumer: Option<u64>,
}

/// An open channel.
pub(crate) struct Channel {
    pub id: u16,
    /// `channel.close` was sent for an error; waiting for close-ok, dropping other frames.
    pub closing: bool,
    pub content: Content,
    pub next_delivery_tag: u64,
    pub unacked: BTreeMap<u64, Unacked>,
    /// Unacknowledged consumer deliveries (what a global prefetch limits).
    pub consumer_unacked: usize,
    /// Unacknowledged `basic.get` deliveries.
    pub get_unacked: usize,
    /// Deliveries taken from the outbox but held back by `channel.flow` or a global prefetch.
    pub held: VecDeque<Delivery>,
    /// Core consumer tag → consumer.
    pub consumers: HashMap<u64, Consumer>,
    /// Consumer tag → core consumer tag, for consumers not cancelled.
    pub tags: HashMap<String, u64>,
    /// Prefetch for consumers created from now on (`basic.qos`, global = false).
    pub prefetch: u16,
    /// Channel-wide prefetch (`basic.qos`, global = true), 0 = none.
    pub global_prefetch: u16,
    /// `channel.flow` state.
    pub flow: bool,
    /// Next publish sequence number once `confirm.select` was received.
    pub confirms: Option<u64>,
    /// The queue last declared on this channel, for methods given an empty queue name.
    pub last_queue: Option<String>,
}

impl Channel {
    pub fn new(id: u16) -> Self {
        Channel {
            id,
            closing: false,
            content: Content::Idle,
            next_delivery_tag: 1,
            unacked: BTreeMap::new(),
            consumer_unacked: 0,
            get_unacked: 0,
            held: VecDeque::new(),
            consumers: HashMap::new(),
            tags: HashMap::new(),
            prefetch: 0,
            global_prefetch: 0,
            flow: true,
            confirms: None,
            last_queue: None,
        }
    }

    /// Whether the next frame must be a content header or body.
    pub fn expects_content(&self) -> bool {
        !matches!(self.content, Content::Idle)
    }

    /// Whether a delivery for a consumer with `no_ack` must wait in `held`.
    pub fn must_hold(&self, no_ack: bool) -> bool {
        !self.flow
            || !self.held.is_empty()
            || (!no_ack && self.global_prefetch > 0 && self.consumer_unacked >= usize::from(self.global_prefetch))
    }
}

/// How the client settled a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settle {
    Ack,
    Requeue,
    Discard,
}

/// Settles one unacknowledged delivery and keeps the consumer accounting right, finishing the
/// cancellation of a cancelled consumer once it holds nothing.
pub(crate) fn settle(ctx: &mut Ctx, ch: &mut Channel, entry: Unacked, how: Settle) {
    let apply = |ack: &QueueAck| match how {
        Settle::Ack => ack.ack(),
        Settle::Requeue => ack.nack(true),
        Settle::Discard => ack.nack(false),
    };
    let Some(core_tag) = entry.consumer else {
        ch.get_unacked = ch.get_unacked.saturating_sub(1);
        apply(&entry.ack);
        return;
    };
    ch.consumer_unacked = ch.consumer_unacked.saturating_sub(1);
    let Some(consumer) = ch.consumers.get_mut(&core_tag) else {
        apply(&entry.ack);
        return;
    };
    consumer.unacked = consumer.unacked.saturating_sub(1);
    if !consumer.cancelled {
        apply(&entry.ack);
        return;
    }
    if consumer.unacked > 0 {
        // Lower the credit first so that the settle cannot make room for a new dispatch.
        ctx.core.set_credit(core_tag, consumer.unacked);
        apply(&entry.ack);
    } else {
        apply(&entry.ack);
        ch.consumers.remove(&core_tag);
        ctx.consumers.remove(&core_tag);
        ctx.core.cancel(core_tag);
    }
}

/// `channel.flow` (§1.5.2.3): the client pauses or resumes deliveries on this channel.
pub(crate) fn handle(ch: &mut Channel, out: &mut Output, method: channel::AMQPMethod) -> Result<(), AmqpError> {
    match method {
        channel::AMQPMethod::Flow(flow) => {
            ch.flow = flow.active;
            out.method(ch.id, AMQPClass::Channel(channel::AMQPMethod::FlowOk(channel::FlowOk { active: flow.active })));
            Ok(())
        }
        channel::AMQPMethod::FlowOk(_) => {
            Err(AmqpError::command_invalid("channel.flow-ok without a channel.flow from the broker"))
        }
        _ => Err(AmqpError::command_invalid("channel.open-ok is sent by servers, not clients")),
    }
}

/// Ends everything the channel holds. The core consumers go first: removing a consumer
/// requeues everything it holds (unacknowledged, held back, still in the outbox) in delivery
/// order, before any of it could be dispatched again. Then the remaining `basic.get`
/// deliveries go back newest first, so that they end up at the front in their original order.
pub(crate) fn teardown(ctx: &mut Ctx, ch: &mut Channel) {
    ch.held.clear();
    for (core_tag, consumer) in ch.consumers.drain() {
        ctx.core.cancel(core_tag);
        ctx.consumers.remove(&core_tag);
        if consumer.exclusive && !consumer.cancelled {
            ctx.shared.registry.remove_exclusive_consumer(&consumer.queue);
        }
    }
    // Consumer deliveries were requeued above; settling them again is a no-op in the core.
    for (_, entry) in std::mem::take(&mut ch.unacked).into_iter().rev() {
        entry.ack.nack(true);
    }
    ch.consumer_unacked = 0;
    ch.get_unacked = 0;
    ch.tags.clear();
    if let Content::Body { body, .. } = std::mem::replace(&mut ch.content, Content::Idle) {
        ctx.assembling = ctx.assembling.saturating_sub(body.len() as u64);
    }
}
