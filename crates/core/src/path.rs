//! The path a message has taken between brokers, so that bridged messages never loop.
//!
//! Every broker a message leaves through a bridge adds its node name to the message's path, a
//! user property that every protocol carries (an MQTT 5 user property, an AMQP header, a STOMP
//! header, a WS-N message property), as RabbitMQ federation does with `x-received-from`. The
//! router drops a message whose path already holds this node ([`Router::set_node_name`]), and a
//! bridge forwards only what has crossed fewer bridges than its hop limit.
//!
//! [`Router::set_node_name`]: crate::Router::set_node_name

use crate::message::Message;

/// The user property that carries the path: node names separated by commas, oldest first.
pub const PATH_PROPERTY: &str = "tolk-path";

/// The nodes a message has passed, oldest first (empty for a message published here).
pub fn nodes(message: &Message) -> impl Iterator<Item = &str> {
    message
        .props
        .user
        .iter()
        .filter(|(key, _)| key == PATH_PROPERTY)
        .flat_map(|(_, value)| value.split(','))
        .map(str::trim)
        .filter(|node| !node.is_empty())
}

/// How many bridges the message has crossed.
pub fn hops(message: &Message) -> usize {
    nodes(message).count()
}

/// Whether `node` is on the message's path.
pub fn has_passed(message: &Message, node: &str) -> bool {
    nodes(message).any(|n| n == node)
}

/// The message's user properties with `node` added to its path (one property, whatever the
/// message carried).
pub fn through(user: &[(String, String)], node: &str) -> Vec<(String, String)> {
    let mut path: Vec<&str> = Vec::new();
    let mut rest = Vec::with_capacity(user.len() + 1);
    for (key, value) in user {
        if key == PATH_PROPERTY {
            path.extend(value.split(',').map(str::trim).filter(|n| !n.is_empty()));
        } else {
            rest.push((key.clone(), value.clone()));
        }
    }
    path.push(node);
    rest.push((PATH_PROPERTY.to_owned(), path.join(",")));
    rest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Origin;
    use crate::{Protocol, SessionId};

    fn message(user: &[(&str, &str)]) -> Message {
        let origin = Origin { protocol: Protocol::Mqtt, session: SessionId(1), client_id: "c".into() };
        let mut m = Message::new("t", "x", origin);
        m.props.user = user.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        m
    }

    #[test]
    fn a_path_grows_by_one_node_per_bridge_and_is_read_back() {
        let fresh = message(&[("k", "v")]);
        assert_eq!(hops(&fresh), 0);
        let once = message(&[]);
        let user = through(&fresh.props.user, "a");
        assert_eq!(user, vec![("k".into(), "v".into()), (PATH_PROPERTY.into(), "a".into())]);
        let mut twice = once.clone();
        twice.props.user = through(&user, "b");
        assert_eq!(nodes(&twice).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(hops(&twice), 2);
        assert!(has_passed(&twice, "a") && !has_passed(&twice, "c"));
    }
}
