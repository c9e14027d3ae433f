//! The access-control list's verdicts on AMQP's named resources, as AMQP's 403 in RabbitMQ's
//! wording. Topics going through `amq.topic` are checked by the core session; queues and
//! exchanges, which only AMQP declares, are checked here with [`tolk_core::Session::may_use`].

use tolk_core::access::{Resource, Right};

use crate::context::Ctx;
use crate::error::AmqpError;
use crate::translate::TOPIC_BRIDGE;

/// Declaring a queue or an exchange takes any right on it: it is how AMQP clients open what
/// they mean to use.
pub(crate) const ANY_RIGHT: &[Right] = &[Right::Read, Right::Write, Right::Configure];

/// RabbitMQ's wording for an access-list refusal.
pub(crate) fn not_authorized(what: &str) -> AmqpError {
    AmqpError::access_refused(format!("access to {what} in vhost '/' refused"))
}

/// Whether the connection may do any of `rights` to a queue. Its own exclusive queues need no
/// rule: nobody else can reach them, and their names (`amq.gen-…`) cannot be known in advance.
pub(crate) fn authorize(ctx: &Ctx, queue: &str, rights: &[Right]) -> Result<(), AmqpError> {
    let own = ctx.exclusive_queues.iter().any(|q| q.name() == queue);
    if own || ctx.core.may_use(Resource::Queue(queue), rights) {
        return Ok(());
    }
    Err(not_authorized(&format!("queue '{queue}'")))
}

/// Whether the connection may do any of `rights` to an exchange. `amq.topic` is the topic
/// space: the topic rules govern what goes through it, so it needs no exchange rule.
pub(crate) fn authorize_exchange(ctx: &Ctx, exchange: &str, rights: &[Right]) -> Result<(), AmqpError> {
    if exchange == TOPIC_BRIDGE || ctx.core.may_use(Resource::Exchange(exchange), rights) {
        return Ok(());
    }
    Err(not_authorized(&format!("exchange '{exchange}'")))
}
