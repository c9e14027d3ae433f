//! The exchange class (§1.7.2): `exchange.declare`, `delete`, `bind` and `unbind` against the
//! shared [`ExchangeRegistry`](crate::exchange::ExchangeRegistry).

use amq_protocol::protocol::{AMQPClass, exchange as x};
use tolk_core::access::Right;

use crate::access::authorize_exchange;
use crate::channel::Channel;
use crate::context::Ctx;
use crate::error::AmqpError;
use crate::exchange::{BindingTarget, ExchangeKind, ExchangeOptions, ExchangeRegistry};
use crate::output::Output;
use crate::translate::TOPIC_BRIDGE;

/// Dispatches one exchange-class method (§1.7.2).
pub(crate) fn handle(
    ctx: &mut Ctx,
    ch: &mut Channel,
    out: &mut Output,
    method: amq_protocol::protocol::exchange::AMQPMethod,
) -> Result<(), AmqpError> {
    let registry = &ctx.shared.registry;
    let reply = |out: &mut Output, m: x::AMQPMethod| out.method(ch.id, AMQPClass::Exchange(m));
    match method {
        x::AMQPMethod::Declare(m) => {
            let name = m.exchange.as_str();
            let kind = if m.passive {
                ExchangeKind::parse(m.kind.as_str()).unwrap_or(ExchangeKind::Direct)
            } else {
                let kind = ExchangeKind::parse(m.kind.as_str()).ok_or_else(|| {
                    AmqpError::command_invalid(format!(
                        "unknown exchange type '{}' (supported: direct, fanout, topic, headers)",
                        m.kind
                    ))
                })?;
                if let Some((arg, _)) = m.arguments.inner().iter().next() {
                    return Err(AmqpError::not_implemented(format!("exchange argument '{arg}' is not supported")));
                }
                kind
            };
            let options =
                ExchangeOptions { kind, durable: m.durable, auto_delete: m.auto_delete, internal: m.internal };
            let needed: &[Right] =
                if m.passive { &[Right::Read, Right::Write, Right::Configure] } else { &[Right::Configure] };
            authorize_exchange(ctx, name, needed)?;
            registry.declare(name, options, m.passive)?;
            if !m.nowait {
                reply(out, x::AMQPMethod::DeclareOk(x::DeclareOk {}));
            }
        }
        x::AMQPMethod::Delete(m) => {
            authorize_exchange(ctx, m.exchange.as_str(), &[Right::Configure])?;
            registry.delete(m.exchange.as_str(), m.if_unused)?;
            if !m.nowait {
                reply(out, x::AMQPMethod::DeleteOk(x::DeleteOk {}));
            }
        }
        x::AMQPMethod::Bind(m) => {
            check_exchange_binding(registry, m.source.as_str(), m.destination.as_str())?;
            authorize_exchange(ctx, m.source.as_str(), &[Right::Read])?;
            authorize_exchange(ctx, m.destination.as_str(), &[Right::Write])?;
            registry.bind(
                m.source.as_str(),
                BindingTarget::Exchange(m.destination.to_string()),
                m.routing_key.as_str(),
                &m.arguments,
            )?;
            if !m.nowait {
                reply(out, x::AMQPMethod::BindOk(x::BindOk {}));
            }
        }
        x::AMQPMethod::Unbind(m) => {
            check_exchange_binding(registry, m.source.as_str(), m.destination.as_str())?;
            authorize_exchange(ctx, m.destination.as_str(), &[Right::Write])?;
            let target = BindingTarget::Exchange(m.destination.to_string());
            registry.unbind(m.source.as_str(), &target, m.routing_key.as_str(), &m.arguments);
            if !m.nowait {
                reply(out, x::AMQPMethod::UnbindOk(x::UnbindOk {}));
            }
        }
        _ => return Err(AmqpError::command_invalid("exchange.*-ok methods are sent by servers, not clients")),
    }
    Ok(())
}

/// Rules for exchange-to-exchange bindings: not with the default exchange (spec), and not from
/// `amq.topic`, whose traffic lives in the router and cannot feed an AMQP-only exchange.
fn check_exchange_binding(registry: &ExchangeRegistry, source: &str, destination: &str) -> Result<(), AmqpError> {
    if source.is_empty() || destination.is_empty() {
        return Err(AmqpError::access_refused("operation not permitted on the default exchange"));
    }
    if source == TOPIC_BRIDGE {
        return Err(AmqpError::not_implemented(
            "exchange-to-exchange bindings from amq.topic are not supported: bind a queue to amq.topic instead",
        ));
    }
    registry.require(source)?;
    registry.require(destination)?;
    Ok(())
}
