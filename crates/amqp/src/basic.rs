//! The `basic` and `confirm` classes (spec §1.8.3, RabbitMQ's confirm extension): publishing
//! (content assembly, routing, mandatory returns, confirms), consumers, deliveries with
//! per-channel delivery tags, acknowledgements, `basic.get`, `basic.recover`, and prefetch.
//!
//! Prefetch: `basic.qos` with `global = false` sets the per-consumer limit of consumers created
//! afterwards on the channel (RabbitMQ's `per_consumer_qos`); it becomes the core consumer's
//! credit. `global = true` sets a channel-wide limit, applied here by holding deliveries back
//! until acknowledgements make room. Prefetch 0 means the core's default credit (bounded, never
//! unlimited).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use amq_protocol::frame::AMQPContentHeader;
use amq_protocol::protocol::{AMQPClass, basic, confirm};
use amq_protocol::types::ShortString;
use bytes::{Bytes, BytesMut};
use tolk_core::access::Right;
use tolk_core::store::StoreError;
use tolk_core::{Delivery, DropReason, Protocol, QoS, Queue, QueuePush};
use tracing::{debug, warn};

use crate::access::{authorize, authorize_exchange, not_authorized};
use crate::channel::{Channel, Consumer, Content, Publish, PublishTarget, Settle, Unacked, settle};
use crate::context::{Confirm, Ctx};
use crate::error::{AmqpError, code};
use crate::output::Output;
use crate::queue::{find, unique_name};
use crate::topic_key;
use crate::translate::{self, INTERNAL_TOPIC_PREFIX, TOPIC_BRIDGE};

fn reply(out: &mut Output, ch: &Channel, m: basic::AMQPMethod) {
    out.method(ch.id, AMQPClass::Basic(m));
}

/// Dispatches one basic-class method.
pub(crate) fn handle(
    ctx: &mut Ctx,
    ch: &mut Channel,
    out: &mut Output,
    method: basic::AMQPMethod,
    now: Instant,
) -> Result<(), AmqpError> {
    use basic::AMQPMethod as M;
    match method {
        M::Qos(m) => {
            if m.global {
                ch.global_prefetch = m.prefetch_count;
            } else {
                ch.prefetch = m.prefetch_count;
            }
            reply(out, ch, M::QosOk(basic::QosOk {}));
            release_held(ctx, ch, out, now);
        }
        M::Consume(m) => consume(ctx, ch, out, m)?,
        M::Cancel(m) => {
            if let Some(&core_tag) = ch.tags.get(m.consumer_tag.as_str()) {
                cancel_consumer(ctx, ch, core_tag);
            }
            if !m.nowait {
                reply(out, ch, M::CancelOk(basic::CancelOk { consumer_tag: m.consumer_tag }));
            }
        }
        M::Publish(m) => publish(ctx, ch, m)?,
        M::Get(m) => get(ctx, ch, out, m, now)?,
        M::Ack(m) => {
            settle_tags(ctx, ch, m.delivery_tag, m.multiple, Settle::Ack)?;
            release_held(ctx, ch, out, now);
        }
        M::Reject(m) => {
            settle_tags(ctx, ch, m.delivery_tag, false, if m.requeue { Settle::Requeue } else { Settle::Discard })?;
            release_held(ctx, ch, out, now);
        }
        M::Nack(m) => {
            settle_tags(
                ctx,
                ch,
                m.delivery_tag,
                m.multiple,
                if m.requeue { Settle::Requeue } else { Settle::Discard },
            )?;
            release_held(ctx, ch, out, now);
        }
        M::Recover(m) => {
            if !m.requeue {
                return Err(AmqpError::not_implemented(
                    "basic.recover with requeue=false is not supported; use requeue=true",
                ));
            }
            settle_tags(ctx, ch, 0, true, Settle::Requeue)?;
            reply(out, ch, M::RecoverOk(basic::RecoverOk {}));
            release_held(ctx, ch, out, now);
        }
        M::RecoverAsync(_) => {
            return Err(AmqpError::not_implemented(
                "basic.recover-async is deprecated and not implemented; use basic.recover",
            ));
        }
        M::QosOk(_)
        | M::ConsumeOk(_)
        | M::CancelOk(_)
        | M::Return(_)
        | M::Deliver(_)
        | M::GetOk(_)
        | M::GetEmpty(_)
        | M::RecoverOk(_) => {
            return Err(AmqpError::command_invalid("this basic method is sent by servers, not clients"));
        }
    }
    Ok(())
}

/// `confirm.select` (RabbitMQ extension): from now on every publish is answered with
/// `basic.ack`, or `basic.nack` when a queue refused it (full).
pub(crate) fn handle_confirm(ch: &mut Channel, out: &mut Output, method: confirm::AMQPMethod) -> Result<(), AmqpError> {
    match method {
        confirm::AMQPMethod::Select(m) => {
            ch.confirms.get_or_insert(1);
            if !m.nowait {
                out.method(ch.id, AMQPClass::Confirm(confirm::AMQPMethod::SelectOk(confirm::SelectOk {})));
            }
            Ok(())
        }
        confirm::AMQPMethod::SelectOk(_) => {
            Err(AmqpError::command_invalid("confirm.select-ok is sent by servers, not clients"))
        }
    }
}

fn consume(ctx: &mut Ctx, ch: &mut Channel, out: &mut Output, m: basic::Consume) -> Result<(), AmqpError> {
    if m.no_local {
        return Err(AmqpError::not_implemented("basic.consume with no_local=true is not supported"));
    }
    if let Some((arg, _)) = m.arguments.inner().iter().next() {
        return Err(AmqpError::not_implemented(format!("consumer argument '{arg}' is not supported")));
    }
    let queue = find(ctx, ch, m.queue.as_str())?;
    authorize(ctx, queue.name(), &[Right::Read])?;
    let max = ctx.shared.config.max_consumers_per_channel;
    if ch.consumers.len() >= max {
        return Err(AmqpError::precondition_failed(format!(
            "channel {} already has the maximum of {max} consumers",
            ch.id
        )));
    }
    let core_tag = ctx.next_core_tag;
    ctx.next_core_tag += 1;
    let tag = if m.consumer_tag.as_str().is_empty() {
        ShortString::try_new(unique_name("amq.ctag-", ctx.shared.router.next_session_id().0)).unwrap_or_default()
    } else {
        m.consumer_tag
    };
    if ch.tags.contains_key(tag.as_str()) {
        return Err(AmqpError::not_allowed(format!("attempt to reuse consumer tag '{tag}' on channel {}", ch.id)));
    }
    let credit = if m.no_ack { 0 } else { usize::from(ch.prefetch) };
    let core = &mut ctx.core;
    let name = queue.name().to_owned();
    ctx.shared.registry.add_consumer(&queue, core.id(), m.exclusive, || {
        core.consume(&queue, credit, QoS::ExactlyOnce, core_tag).map_err(|_| {
            AmqpError::resource_locked(format!("cannot obtain exclusive access to locked queue '{name}' in vhost '/'"))
        })
    })?;
    ch.tags.insert(tag.to_string(), core_tag);
    ch.consumers.insert(
        core_tag,
        Consumer { tag: tag.clone(), queue, no_ack: m.no_ack, exclusive: m.exclusive, unacked: 0, cancelled: false },
    );
    ctx.consumers.insert(core_tag, ch.id);
    if !m.nowait {
        reply(out, ch, basic::AMQPMethod::ConsumeOk(basic::ConsumeOk { consumer_tag: tag }));
    }
    Ok(())
}

/// Cancels a consumer: nothing more is delivered under its tag. Deliveries it holds stay
/// acknowledgeable; the core consumer goes once they are settled (see `Consumer::cancelled`).
fn cancel_consumer(ctx: &mut Ctx, ch: &mut Channel, core_tag: u64) {
    let Some(consumer) = ch.consumers.get_mut(&core_tag) else { return };
    ch.tags.remove(consumer.tag.as_str());
    if consumer.exclusive {
        ctx.shared.registry.remove_exclusive_consumer(&consumer.queue);
        consumer.exclusive = false;
    }
    consumer.cancelled = true;
    let unacked = consumer.unacked;
    let (mine, others): (Vec<Delivery>, Vec<Delivery>) =
        std::mem::take(&mut ch.held).into_iter().partition(|d| d.tag == core_tag);
    ch.held = others.into();
    for d in mine.into_iter().rev() {
        if let Some(ack) = &d.ack {
            ack.nack(true);
        }
    }
    if unacked == 0 {
        ch.consumers.remove(&core_tag);
        ctx.consumers.remove(&core_tag);
        ctx.core.cancel(core_tag);
    } else {
        ctx.core.set_credit(core_tag, unacked);
    }
}

/// Consumers whose queue was deleted get `basic.cancel` (if the client announced
/// `consumer_cancel_notify`) and are forgotten; their deliveries stay acknowledgeable (no-ops).
pub(crate) fn cancel_consumers_of_deleted_queues(ctx: &mut Ctx, ch: &mut Channel, out: &mut Output) {
    let router = &ctx.shared.router;
    let dead: Vec<u64> = ch
        .consumers
        .iter()
        .filter(|(_, c)| !router.queue(c.queue.name()).is_some_and(|q| Arc::ptr_eq(&q, &c.queue)))
        .map(|(tag, _)| *tag)
        .collect();
    for core_tag in dead {
        let Some(consumer) = ch.consumers.remove(&core_tag) else { continue };
        ctx.consumers.remove(&core_tag);
        ctx.core.cancel(core_tag);
        ch.held.retain(|d| d.tag != core_tag);
        if consumer.cancelled {
            continue;
        }
        ch.tags.remove(consumer.tag.as_str());
        if consumer.exclusive {
            ctx.shared.registry.remove_exclusive_consumer(&consumer.queue);
        }
        debug!(channel = ch.id, tag = %consumer.tag, queue = consumer.queue.name(), "queue deleted; cancelling its consumer");
        if ctx.cancel_notify {
            reply(out, ch, basic::AMQPMethod::Cancel(basic::Cancel { consumer_tag: consumer.tag, nowait: true }));
        }
    }
}

fn unknown_tag(tag: u64) -> AmqpError {
    AmqpError::precondition_failed(format!("unknown delivery tag {tag}"))
}

/// Settles delivery `tag` (or, with `multiple`, every tag up to it; tag 0 with `multiple`
/// means all).
fn settle_tags(ctx: &mut Ctx, ch: &mut Channel, tag: u64, multiple: bool, how: Settle) -> Result<(), AmqpError> {
    let tags: Vec<u64> = if multiple {
        let tags: Vec<u64> = if tag == 0 {
            ch.unacked.keys().copied().collect()
        } else {
            ch.unacked.range(..=tag).map(|(t, _)| *t).collect()
        };
        if tags.is_empty() && tag != 0 {
            return Err(unknown_tag(tag));
        }
        tags
    } else if ch.unacked.contains_key(&tag) {
        vec![tag]
    } else {
        return Err(unknown_tag(tag));
    };
    // Requeued consumer deliveries are dispatched again as soon as each frees credit, so they
    // go oldest first to arrive in order; basic.get deliveries wait at the front of the queue,
    // so they go newest first to end up in order.
    let entries: Vec<Unacked> = tags.into_iter().filter_map(|t| ch.unacked.remove(&t)).collect();
    let (consumer, pulled): (Vec<Unacked>, Vec<Unacked>) = entries.into_iter().partition(|e| e.consumer.is_some());
    for entry in consumer {
        settle(ctx, ch, entry, how);
    }
    for entry in pulled.into_iter().rev() {
        settle(ctx, ch, entry, how);
    }
    Ok(())
}

fn publish(ctx: &mut Ctx, ch: &mut Channel, m: basic::Publish) -> Result<(), AmqpError> {
    if m.immediate {
        return Err(AmqpError::not_implemented(
            "basic.publish with immediate=true is not supported (RabbitMQ dropped it too); use mandatory and publisher confirms",
        ));
    }
    let exchange = m.exchange.as_str();
    let key = m.routing_key.as_str();
    let target = if exchange.is_empty() {
        authorize(ctx, key, &[Right::Write])?;
        PublishTarget::Default
    } else {
        let options = ctx.shared.registry.require(exchange)?;
        if options.internal {
            return Err(AmqpError::access_refused(format!(
                "cannot publish to internal exchange '{exchange}' in vhost '/'"
            )));
        }
        if exchange == TOPIC_BRIDGE {
            let topic = topic_key::routing_key_to_topic(key).map_err(AmqpError::precondition_failed)?;
            if topic.starts_with(INTERNAL_TOPIC_PREFIX) {
                return Err(AmqpError::access_refused(format!(
                    "routing key '{key}': keys starting with '$amqp.' are reserved on amq.topic"
                )));
            }
            PublishTarget::Bridge(topic)
        } else {
            authorize_exchange(ctx, exchange, &[Right::Write])?;
            PublishTarget::Exchange
        }
    };
    ch.content = Content::Header(Publish {
        exchange: exchange.to_owned(),
        routing_key: key.to_owned(),
        mandatory: m.mandatory,
        target,
    });
    Ok(())
}

/// A content header frame (spec §4.2.6.1) for the publish in progress.
pub(crate) fn content_header(
    ctx: &mut Ctx,
    ch: &mut Channel,
    out: &mut Output,
    header: AMQPContentHeader,
    now: Instant,
) -> Result<(), AmqpError> {
    let publish = match std::mem::replace(&mut ch.content, Content::Idle) {
        Content::Header(publish) => publish,
        Content::Idle => {
            return Err(AmqpError::unexpected_frame(format!(
                "content header on channel {} without a basic.publish",
                ch.id
            )));
        }
        Content::Body { .. } => {
            return Err(AmqpError::unexpected_frame(format!(
                "content header on channel {} before the previous body was complete",
                ch.id
            )));
        }
    };
    if header.class_id != 60 {
        return Err(AmqpError::unexpected_frame(format!(
            "content header of class {} after basic.publish (class 60)",
            header.class_id
        )));
    }
    let max = ctx.shared.config.max_message_size_bytes;
    if header.body_size > max {
        return Err(AmqpError::precondition_failed(format!(
            "message size {} is larger than configured max size {max}",
            header.body_size
        ))
        .during(60, 40));
    }
    if header.body_size == 0 {
        return finish_publish(ctx, ch, out, publish, &header, Bytes::new(), now);
    }
    ch.content = Content::Body { publish, header: Box::new(header), body: BytesMut::new() };
    Ok(())
}

/// A content body frame (spec §4.2.6.2).
pub(crate) fn content_body(
    ctx: &mut Ctx,
    ch: &mut Channel,
    out: &mut Output,
    data: Bytes,
    now: Instant,
) -> Result<(), AmqpError> {
    let Content::Body { header, body, .. } = &mut ch.content else {
        return Err(AmqpError::unexpected_frame(format!("content body on channel {} without a content header", ch.id)));
    };
    let expected = header.body_size;
    let have = body.len() as u64 + data.len() as u64;
    if have > expected {
        return Err(AmqpError::frame_error(format!(
            "content body on channel {} is longer than the {expected} bytes its header announced",
            ch.id
        )));
    }
    let max = ctx.shared.config.max_message_size_bytes;
    if ctx.assembling + data.len() as u64 > max {
        return Err(AmqpError::precondition_failed(format!(
            "messages being received at once on this connection exceed the configured max size {max}"
        ))
        .during(60, 40));
    }
    ctx.assembling += data.len() as u64;
    // Copy out of the read buffer, so that a stored message does not pin the whole buffer.
    body.extend_from_slice(&data);
    if have < expected {
        return Ok(());
    }
    let Content::Body { publish, header, body } = std::mem::replace(&mut ch.content, Content::Idle) else {
        return Ok(());
    };
    ctx.assembling = ctx.assembling.saturating_sub(body.len() as u64);
    finish_publish(ctx, ch, out, publish, &header, body.freeze(), now)
}

/// Routes a complete message, answers `mandatory` and confirms.
fn finish_publish(
    ctx: &mut Ctx,
    ch: &mut Channel,
    out: &mut Output,
    publish: Publish,
    header: &AMQPContentHeader,
    body: Bytes,
    now: Instant,
) -> Result<(), AmqpError> {
    let metrics = ctx.metrics.clone();
    let counters = metrics.protocol(Protocol::Amqp);
    counters.messages_in.fetch_add(1, Ordering::Relaxed);
    let origin = translate::origin(ctx.core.id(), &ctx.client_id);
    let mut message = translate::message_from_publish(String::new(), body.clone(), &header.properties, origin, now)?;
    let (exchange, key) = (publish.exchange.as_str(), publish.routing_key.as_str());
    let mut routed = false;
    let mut refused = 0usize;
    // The store commit of what this message left on disk; commits are durable in order, so
    // the last one made for it says when all of them are.
    let mut durable = None;
    let mut push =
        |queue: &Arc<Queue>, message: &Arc<tolk_core::Message>| match queue.push(message.clone(), &mut durable) {
            QueuePush::Accepted => routed = true,
            QueuePush::Congested => {
                routed = true;
                ctx.core.congested_by(queue);
            }
            QueuePush::Full => {
                // Counted by the queue.
                routed = true;
                refused += 1;
            }
            QueuePush::Deleted => ctx.shared.registry.forget_queue(queue),
        };
    match publish.target {
        PublishTarget::Bridge(topic) => {
            message.topic = topic.into();
            let outcome = ctx.core.publish_into(Arc::new(message), &mut durable);
            if outcome.not_authorized {
                return Err(not_authorized(&format!("topic '{key}' on exchange '{exchange}'")));
            }
            routed = outcome.matched > 0;
            refused = outcome.refused;
        }
        PublishTarget::Default => {
            message.topic = translate::internal_topic("", key).into();
            if let Some(queue) = ctx.shared.router.queue(key) {
                push(&queue, &Arc::new(message));
            }
        }
        PublishTarget::Exchange => {
            let route = ctx.shared.registry.route(exchange, key, header.properties.headers().as_ref());
            let topic = route.topic_space.then(|| topic_key::routing_key_to_topic(key));
            message.topic = translate::internal_topic(exchange, key).into();
            let message = Arc::new(message);
            for queue in &route.queues {
                push(queue, &message);
            }
            match topic {
                Some(Ok(topic)) if !topic.starts_with(INTERNAL_TOPIC_PREFIX) => {
                    let mut bridged = (*message).clone();
                    bridged.topic = topic.into();
                    let outcome = ctx.core.publish_into(Arc::new(bridged), &mut durable);
                    if outcome.not_authorized {
                        return Err(not_authorized(&format!("topic '{key}' through exchange '{exchange}'")));
                    }
                    routed |= outcome.matched > 0;
                    refused += outcome.refused;
                }
                Some(_) => counters.dropped(DropReason::Untranslatable, 1),
                None => {}
            }
        }
    }
    if !routed && publish.mandatory {
        counters.dropped(DropReason::NoRoute, 1);
        let ret = basic::Return {
            reply_code: code::NO_ROUTE,
            reply_text: "NO_ROUTE".into(),
            exchange: ShortString::try_new(exchange).unwrap_or_default(),
            routing_key: ShortString::try_new(key).unwrap_or_default(),
        };
        let returned = AMQPClass::Basic(basic::AMQPMethod::Return(ret));
        if let Err(e) = out.method_with_content(ch.id, returned, header.properties.clone(), &body, ctx.frame_max) {
            debug!(error = %e, "could not return an unroutable message");
        }
    }
    let stored = durable.map(|commit| ctx.core.await_durable(commit)).is_some();
    let confirm = ch.confirms.map(|seq| {
        ch.confirms = Some(seq + 1);
        Confirm { channel: ch.id, seq, nack: refused > 0 }
    });
    if !stored && confirm.is_none() {
        return Ok(());
    }
    // A persistent message is confirmed once it is on disk (see `settle_stored`).
    if let Some(Some(confirm)) = ctx.confirms.place(&ctx.core, stored, confirm) {
        send_confirm(out, ch, confirm, false);
    }
    Ok(())
}

/// Sends `basic.ack`, or `basic.nack` when the message was refused or could not be stored.
fn send_confirm(out: &mut Output, ch: &Channel, confirm: Confirm, unstored: bool) {
    let tag = confirm.seq;
    let m = if confirm.nack || unstored {
        basic::AMQPMethod::Nack(basic::Nack { delivery_tag: tag, multiple: false, requeue: false })
    } else {
        basic::AMQPMethod::Ack(basic::Ack { delivery_tag: tag, multiple: false })
    };
    reply(out, ch, m);
}

/// The oldest store commit of this connection's publishes ended: its confirm goes out, a nack
/// if the store could not keep the message (a publish without confirms is only logged; the
/// client was never going to be told).
pub(crate) fn settle_stored(
    ctx: &mut Ctx,
    channels: &HashMap<u16, Channel>,
    out: &mut Output,
    result: Result<(), StoreError>,
) {
    let waiting = ctx.confirms.settled();
    if let Err(error) = &result {
        warn!(client_id = %ctx.client_id, %error, "a published message could not be stored");
    }
    let Some(Some(confirm)) = waiting else { return };
    // A channel closed meanwhile takes its confirms with it.
    if let Some(ch) = channels.get(&confirm.channel).filter(|ch| ch.confirms.is_some()) {
        send_confirm(out, ch, confirm, result.is_err());
    }
}

fn get(ctx: &mut Ctx, ch: &mut Channel, out: &mut Output, m: basic::Get, now: Instant) -> Result<(), AmqpError> {
    let queue = find(ctx, ch, m.queue.as_str())?;
    authorize(ctx, queue.name(), &[Right::Read])?;
    let limit = ctx.shared.config.max_unacked_gets_per_channel;
    if !m.no_ack && ch.get_unacked >= limit {
        return Err(AmqpError::precondition_failed(format!(
            "channel {} holds {limit} unacknowledged basic.get deliveries; acknowledge some first",
            ch.id
        )));
    }
    let puller = queue.pull_consumer();
    while let Some((message, redelivered, ack)) = queue.get(puller, !m.no_ack) {
        let (exchange, key) = translate::delivery_address(&message);
        let tag = ch.next_delivery_tag;
        let (Ok(exchange), Ok(routing_key)) = (ShortString::try_new(exchange), ShortString::try_new(key)) else {
            drop_untranslatable(ctx, ack, "routing key longer than 255 bytes");
            continue;
        };
        let ok = basic::GetOk {
            delivery_tag: tag,
            redelivered,
            exchange,
            routing_key,
            message_count: u32::try_from(queue.ready_len()).unwrap_or(u32::MAX),
        };
        let props = translate::properties_for_delivery(&message, now);
        let method = AMQPClass::Basic(basic::AMQPMethod::GetOk(ok));
        if let Err(e) = out.method_with_content(ch.id, method, props, &message.payload, ctx.frame_max) {
            drop_untranslatable(ctx, ack, &e.to_string());
            continue;
        }
        ch.next_delivery_tag += 1;
        let qos = message.qos;
        let record = Delivery { redelivered, ..Delivery::new(message, qos, now) };
        out.record_when_written(&record, now, None);
        if let Some(ack) = ack {
            ch.get_unacked += 1;
            ch.unacked.insert(tag, Unacked { ack, consumer: None });
        }
        return Ok(());
    }
    reply(out, ch, basic::AMQPMethod::GetEmpty(basic::GetEmpty {}));
    Ok(())
}

fn drop_untranslatable(ctx: &Ctx, ack: Option<tolk_core::QueueAck>, why: &str) {
    debug!(why, "dropping a message this AMQP client cannot be given");
    ctx.metrics.protocol(Protocol::Amqp).dropped(DropReason::Untranslatable, 1);
    if let Some(ack) = ack {
        ack.nack(false);
    }
}

/// One delivery from the outbox: written, held back (flow, global prefetch), or given back.
pub(crate) fn deliver(
    ctx: &mut Ctx,
    channels: &mut std::collections::HashMap<u16, Channel>,
    out: &mut Output,
    delivery: Delivery,
    taken_at: Instant,
    now: Instant,
) {
    let give_back = |d: &Delivery| {
        if let Some(ack) = &d.ack {
            ack.nack(true);
        }
    };
    let Some(ch) = ctx.consumers.get(&delivery.tag).and_then(|id| channels.get_mut(id)) else {
        // The consumer was cancelled after the core queued this: back to the queue.
        give_back(&delivery);
        return;
    };
    let no_ack = match ch.consumers.get(&delivery.tag) {
        Some(c) if !c.cancelled && !ch.closing => c.no_ack,
        _ => {
            give_back(&delivery);
            return;
        }
    };
    if ch.must_hold(no_ack) {
        ch.held.push_back(delivery);
        return;
    }
    write_delivery(ctx, ch, out, delivery, taken_at, now);
}

/// Writes held deliveries once flow and the global prefetch allow.
pub(crate) fn release_held(ctx: &mut Ctx, ch: &mut Channel, out: &mut Output, now: Instant) {
    while let Some(front) = ch.held.front() {
        let Some(no_ack) = ch.consumers.get(&front.tag).map(|c| c.no_ack) else {
            if let Some(d) = ch.held.pop_front()
                && let Some(ack) = &d.ack
            {
                ack.nack(true);
            }
            continue;
        };
        if !ch.flow || (!no_ack && ch.global_prefetch > 0 && ch.consumer_unacked >= usize::from(ch.global_prefetch)) {
            return;
        }
        if let Some(d) = ch.held.pop_front() {
            write_delivery(ctx, ch, out, d, now, now);
        }
    }
}

fn write_delivery(ctx: &mut Ctx, ch: &mut Channel, out: &mut Output, mut d: Delivery, taken_at: Instant, now: Instant) {
    let ack = d.ack.take();
    if d.message.is_expired(now) {
        ctx.metrics.protocol(Protocol::Amqp).dropped(DropReason::Expired, 1);
        if let Some(ack) = ack {
            ack.nack(false);
        }
        return;
    }
    let Some(consumer) = ch.consumers.get_mut(&d.tag) else {
        if let Some(ack) = ack {
            ack.nack(true);
        }
        return;
    };
    let (exchange, key) = translate::delivery_address(&d.message);
    let (Ok(exchange), Ok(routing_key)) = (ShortString::try_new(exchange), ShortString::try_new(key)) else {
        drop_untranslatable(ctx, ack, "routing key longer than 255 bytes");
        return;
    };
    let tag = ch.next_delivery_tag;
    let deliver = basic::Deliver {
        consumer_tag: consumer.tag.clone(),
        delivery_tag: tag,
        redelivered: d.redelivered,
        exchange,
        routing_key,
    };
    let props = translate::properties_for_delivery(&d.message, now);
    let method = AMQPClass::Basic(basic::AMQPMethod::Deliver(deliver));
    if let Err(e) = out.method_with_content(ch.id, method, props, &d.message.payload, ctx.frame_max) {
        drop_untranslatable(ctx, ack, &e.to_string());
        return;
    }
    ch.next_delivery_tag += 1;
    let mut settle = None;
    if let Some(ack) = ack {
        if consumer.no_ack {
            // Settled once written: a connection that dies first puts it back.
            settle = Some(ack);
        } else {
            consumer.unacked += 1;
            ch.consumer_unacked += 1;
            ch.unacked.insert(tag, Unacked { ack, consumer: Some(d.tag) });
        }
    }
    out.record_when_written(&d, taken_at, settle);
}
