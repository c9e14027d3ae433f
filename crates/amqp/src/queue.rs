//! The `queue` class (spec §1.8.2 queue methods): declare, bind, unbind, purge, delete. Queues
//! are the core's named queues, shared with STOMP `/queue/…` and MQTT `$share` groups; this
//! module adds AMQP's naming rules, server-named queues, exclusivity checks, the argument
//! table, and bindings (router bindings on `amq.topic`, registry bindings elsewhere).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use amq_protocol::protocol::{AMQPClass, queue};
use amq_protocol::types::{AMQPValue, FieldTable, ShortString};
use tolk_core::access::{Right, SubscribeError};
use tolk_core::{Queue, QueueError, QueueOptions};

use crate::access::{ANY_RIGHT, authorize, authorize_exchange, not_authorized};
use crate::channel::Channel;
use crate::context::Ctx;
use crate::error::AmqpError;
use crate::exchange::BindingTarget;
use crate::output::Output;
use crate::topic_key;
use crate::translate::TOPIC_BRIDGE;

fn not_found(name: &str) -> AmqpError {
    AmqpError::not_found(format!("no queue '{name}' in vhost '/'"))
}

fn locked(name: &str) -> AmqpError {
    AmqpError::resource_locked(format!(
        "cannot obtain exclusive access to locked queue '{name}' in vhost '/': it is exclusive to another connection"
    ))
}

/// The queue name to use: the given one, or for an empty name the last queue declared on the
/// channel (spec §1.8.3, "queue-name" domain rule on empty names).
pub(crate) fn resolve_name(ch: &Channel, name: &str) -> Result<String, AmqpError> {
    if !name.is_empty() {
        return Ok(name.to_owned());
    }
    ch.last_queue
        .clone()
        .ok_or_else(|| AmqpError::not_found("no queue name given and no queue declared on this channel"))
}

/// Looks a queue up and checks this connection may use it.
pub(crate) fn find(ctx: &Ctx, ch: &Channel, name: &str) -> Result<Arc<Queue>, AmqpError> {
    let name = resolve_name(ch, name)?;
    let queue = ctx.shared.router.queue(&name).ok_or_else(|| not_found(&name))?;
    check_access(ctx, &queue)?;
    Ok(queue)
}

fn check_access(ctx: &Ctx, queue: &Queue) -> Result<(), AmqpError> {
    if queue.options().exclusive_owner.is_some_and(|owner| owner != ctx.core.id()) {
        return Err(locked(queue.name()));
    }
    Ok(())
}

/// A name no client chose: `amq.gen-` and 22 URL-safe base64 characters (128 bits) from the
/// process's random hash keys and a counter, as RabbitMQ does.
pub(crate) fn unique_name(prefix: &str, counter: u64) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let random = RandomState::new();
    let mut bits = 0u128;
    for salt in 0..2u64 {
        let mut h = random.build_hasher();
        h.write_u64(counter);
        h.write_u64(salt);
        bits = (bits << 64) | u128::from(h.finish());
    }
    let mut name = String::with_capacity(prefix.len() + 22);
    name.push_str(prefix);
    for _ in 0..22 {
        name.push(ALPHABET[(bits & 63) as usize] as char);
        bits >>= 6;
    }
    name
}

/// The queue options asked for by `x-` arguments. Unknown arguments are refused rather than
/// ignored, so that a client relying on one (TTL, dead-lettering…) learns it has no effect.
/// `x-max-length` and `x-max-length-bytes` (RabbitMQ's names; 0 = the broker's default).
fn queue_options(arguments: &FieldTable) -> Result<(usize, usize), AmqpError> {
    let (mut max_length, mut max_length_bytes) = (0usize, 0usize);
    for (key, value) in arguments {
        match (key.as_str(), value) {
            ("x-max-length", v) => max_length = positive(key.as_str(), v)?,
            ("x-max-length-bytes", v) => max_length_bytes = positive(key.as_str(), v)?,
            ("x-queue-type", AMQPValue::LongString(s)) if s.as_bytes() == b"classic" => {}
            (other, _) => {
                return Err(AmqpError::not_implemented(format!(
                    "queue argument '{other}' is not supported \
                     (supported: x-max-length, x-max-length-bytes, x-queue-type=classic)"
                )));
            }
        }
    }
    Ok((max_length, max_length_bytes))
}

/// A queue argument that must be a positive integer, of any AMQP integer type.
fn positive(name: &str, v: &AMQPValue) -> Result<usize, AmqpError> {
    let n = match v {
        AMQPValue::ShortShortInt(n) => i64::from(*n),
        AMQPValue::ShortShortUInt(n) => i64::from(*n),
        AMQPValue::ShortInt(n) => i64::from(*n),
        AMQPValue::ShortUInt(n) => i64::from(*n),
        AMQPValue::LongInt(n) => i64::from(*n),
        AMQPValue::LongUInt(n) => i64::from(*n),
        AMQPValue::LongLongInt(n) => *n,
        _ => -1,
    };
    if n < 1 {
        return Err(AmqpError::precondition_failed(format!("invalid arg '{name}' {v:?}: must be a positive integer")));
    }
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// Dispatches one queue-class method.
pub(crate) fn handle(
    ctx: &mut Ctx,
    ch: &mut Channel,
    out: &mut Output,
    method: queue::AMQPMethod,
) -> Result<(), AmqpError> {
    use queue::AMQPMethod as M;
    let reply = |out: &mut Output, m: M| out.method(ch.id, AMQPClass::Queue(m));
    match method {
        M::Declare(m) => {
            let (name, queue) = declare(ctx, ch, &m)?;
            ch.last_queue = Some(name.clone());
            if !m.nowait {
                let ok = queue::DeclareOk {
                    queue: ShortString::try_new(name).unwrap_or_default(),
                    message_count: u32::try_from(queue.ready_len()).unwrap_or(u32::MAX),
                    consumer_count: u32::try_from(queue.consumer_count()).unwrap_or(u32::MAX),
                };
                reply(out, M::DeclareOk(ok));
            }
        }
        M::Bind(m) => {
            let queue = find(ctx, ch, m.queue.as_str())?;
            bind(ctx, &queue, m.exchange.as_str(), m.routing_key.as_str(), &m.arguments, true)?;
            if !m.nowait {
                reply(out, M::BindOk(queue::BindOk {}));
            }
        }
        M::Unbind(m) => {
            let queue = find(ctx, ch, m.queue.as_str())?;
            bind(ctx, &queue, m.exchange.as_str(), m.routing_key.as_str(), &m.arguments, false)?;
            reply(out, M::UnbindOk(queue::UnbindOk {}));
        }
        M::Purge(m) => {
            let queue = find(ctx, ch, m.queue.as_str())?;
            authorize(ctx, queue.name(), &[Right::Read])?;
            let n = queue.purge();
            if !m.nowait {
                reply(out, M::PurgeOk(queue::PurgeOk { message_count: u32::try_from(n).unwrap_or(u32::MAX) }));
            }
        }
        M::Delete(m) => {
            let n = delete(ctx, ch, m.queue.as_str(), m.if_unused, m.if_empty)?;
            if !m.nowait {
                reply(out, M::DeleteOk(queue::DeleteOk { message_count: u32::try_from(n).unwrap_or(u32::MAX) }));
            }
        }
        M::DeclareOk(_) | M::BindOk(_) | M::UnbindOk(_) | M::PurgeOk(_) | M::DeleteOk(_) => {
            return Err(AmqpError::command_invalid("queue.*-ok methods are sent by servers, not clients"));
        }
    }
    Ok(())
}

fn declare(ctx: &mut Ctx, ch: &Channel, m: &queue::Declare) -> Result<(String, Arc<Queue>), AmqpError> {
    if m.passive {
        let queue = find(ctx, ch, m.queue.as_str())?;
        authorize(ctx, queue.name(), ANY_RIGHT)?;
        return Ok((queue.name().to_owned(), queue));
    }
    let (max_length, max_length_bytes) = queue_options(&m.arguments)?;
    let options = QueueOptions {
        max_length,
        max_length_bytes,
        auto_delete: m.auto_delete,
        durable: m.durable,
        exclusive_owner: m.exclusive.then(|| ctx.core.id()),
        ..QueueOptions::default()
    };
    let given = m.queue.as_str();
    if given.starts_with("amq.") {
        return Err(AmqpError::access_refused(format!("queue name '{given}' contains reserved prefix 'amq.*'")));
    }
    let router = ctx.shared.router.clone();
    let (name, queue, created) = if given.is_empty() {
        // A collision with an existing queue is astronomically unlikely; retry anyway.
        loop {
            let name = unique_name("amq.gen-", router.next_session_id().0);
            let (queue, created) =
                router.declare_queue(&name, options.clone()).map_err(|e| declare_error(e, &options, &name, &router))?;
            if created {
                break (name, queue, true);
            }
        }
    } else {
        // Declaring is how AMQP clients open a queue they mean to use: any right will do.
        if !m.exclusive {
            authorize(ctx, given, ANY_RIGHT)?;
        }
        let (queue, created) =
            router.declare_queue(given, options.clone()).map_err(|e| declare_error(e, &options, given, &router))?;
        (given.to_owned(), queue, created)
    };
    if created && m.exclusive {
        ctx.exclusive_queues.push(queue.clone());
    }
    if !created && m.exclusive && !ctx.exclusive_queues.iter().any(|q| Arc::ptr_eq(q, &queue)) {
        authorize(ctx, &name, ANY_RIGHT)?;
    }
    Ok((name, queue))
}

fn declare_error(e: QueueError, wanted: &QueueOptions, name: &str, router: &tolk_core::Router) -> AmqpError {
    match e {
        QueueError::Locked(_) => locked(name),
        QueueError::NotAuthorized(_) => not_authorized(&format!("queue '{name}'")),
        QueueError::OptionsDiffer(_) => {
            let Some(existing) = router.queue(name) else { return not_found(name) };
            let have = existing.options();
            let (arg, got, current) = if have.durable != wanted.durable {
                ("durable", wanted.durable, have.durable)
            } else if have.auto_delete != wanted.auto_delete {
                ("auto_delete", wanted.auto_delete, have.auto_delete)
            } else {
                ("exclusive", wanted.exclusive_owner.is_some(), have.exclusive_owner.is_some())
            };
            AmqpError::precondition_failed(format!(
                "inequivalent arg '{arg}' for queue '{name}' in vhost '/': received '{got}' but current is '{current}'"
            ))
        }
    }
}

/// `queue.bind` / `queue.unbind` (§1.8.2.3, §1.8.2.5).
fn bind(
    ctx: &Ctx,
    queue: &Arc<Queue>,
    exchange: &str,
    key: &str,
    arguments: &FieldTable,
    bind: bool,
) -> Result<(), AmqpError> {
    if exchange.is_empty() {
        return Err(AmqpError::access_refused("operation not permitted on the default exchange"));
    }
    let registry = &ctx.shared.registry;
    registry.require(exchange)?;
    if exchange == TOPIC_BRIDGE {
        let filter = topic_key::binding_key_to_filter(key).map_err(AmqpError::precondition_failed)?;
        if bind {
            // The core checks both the queue (write) and the topics the key reads.
            ctx.core.bind_queue(queue, &filter, 0).map_err(|e| match e {
                SubscribeError::NotAuthorized(what) if what == queue.name() => {
                    not_authorized(&format!("queue '{what}'"))
                }
                SubscribeError::NotAuthorized(_) => {
                    not_authorized(&format!("topic filter '{filter}' (binding key '{key}')"))
                }
                SubscribeError::Topic(e) => AmqpError::precondition_failed(format!("binding key '{key}': {e}")),
            })?;
        } else {
            authorize(ctx, queue.name(), &[Right::Write])?;
            ctx.shared.router.unbind_queue(queue, &filter, 0);
        }
        return Ok(());
    }
    authorize(ctx, queue.name(), &[Right::Write])?;
    authorize_exchange(ctx, exchange, &[Right::Read])?;
    if bind {
        registry.bind(exchange, BindingTarget::Queue(queue.clone()), key, arguments)
    } else {
        registry.unbind(exchange, &BindingTarget::Queue(queue.clone()), key, arguments);
        Ok(())
    }
}

/// `queue.delete` (§1.8.2.9). A missing queue is deleted already (RabbitMQ's answer).
fn delete(ctx: &mut Ctx, ch: &Channel, name: &str, if_unused: bool, if_empty: bool) -> Result<usize, AmqpError> {
    let name = resolve_name(ch, name)?;
    let router = ctx.shared.router.clone();
    let Some(queue) = router.queue(&name) else { return Ok(0) };
    check_access(ctx, &queue)?;
    authorize(ctx, &name, &[Right::Configure])?;
    if if_unused && queue.consumer_count() > 0 {
        return Err(AmqpError::precondition_failed(format!("queue '{name}' in vhost '/' in use")));
    }
    if if_empty && queue.ready_len() > 0 {
        return Err(AmqpError::precondition_failed(format!("queue '{name}' in vhost '/' is not empty")));
    }
    let n = router.delete_queue(&name).unwrap_or(0);
    ctx.shared.registry.forget_queue(&queue);
    ctx.exclusive_queues.retain(|q| !Arc::ptr_eq(q, &queue));
    ctx.shared.registry.announce_queue_deleted();
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_look_like_rabbitmqs_and_differ() {
        let a = unique_name("amq.gen-", 1);
        let b = unique_name("amq.gen-", 2);
        assert_eq!(a.len(), "amq.gen-".len() + 22);
        assert!(a.starts_with("amq.gen-"));
        assert_ne!(a, b);
    }

    #[test]
    fn arguments_are_checked_not_ignored() {
        let mut t = FieldTable::default();
        t.insert("x-max-length".into(), AMQPValue::LongInt(10));
        assert_eq!(queue_options(&t).unwrap(), (10, 0));
        t.insert("x-message-ttl".into(), AMQPValue::LongInt(10));
        assert_eq!(queue_options(&t).unwrap_err().code, 540);
        let mut t = FieldTable::default();
        t.insert("x-max-length".into(), AMQPValue::LongInt(0));
        assert_eq!(queue_options(&t).unwrap_err().code, 406);
    }
}
