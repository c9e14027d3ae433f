//! STOMP destinations and their place in the core: `/topic/<t>` is topic `t` of the common
//! (MQTT-style) topic space, `/queue/<name>` is the core's named queue `name`. This module owns
//! that mapping and its validation; it knows nothing about frames or sessions.

use tolk_core::topic;

use crate::error::StompError;

/// Prefix of destinations in the common topic space.
pub(crate) const TOPIC_PREFIX: &str = "/topic/";
/// Prefix of destinations naming a core queue.
pub(crate) const QUEUE_PREFIX: &str = "/queue/";
/// Longest queue name, in bytes: AMQP 0.9.1 queue names are short strings, and STOMP and AMQP
/// share the queue namespace.
pub(crate) const MAX_QUEUE_NAME: usize = 255;

/// Where a SEND goes or what a SUBSCRIBE reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Destination<'a> {
    /// A topic name (SEND) or topic filter (SUBSCRIBE) in the common topic space.
    Topic(&'a str),
    /// A named queue.
    Queue(&'a str),
}

fn unsupported(destination: &str) -> StompError {
    let shown: String = destination.chars().take(128).collect();
    StompError::protocol(format!(
        "unsupported destination '{shown}': use /topic/<topic> (publish/subscribe, MQTT-style \
         wildcards + and # in SUBSCRIBE) or /queue/<name> (point to point)"
    ))
}

fn split(destination: &str) -> Result<Destination<'_>, StompError> {
    if let Some(topic) = destination.strip_prefix(TOPIC_PREFIX) {
        Ok(Destination::Topic(topic))
    } else if let Some(queue) = destination.strip_prefix(QUEUE_PREFIX) {
        check_queue_name(queue).map_err(|why| {
            StompError::protocol(format!("invalid queue destination '{}': {why}", truncate(destination)))
        })?;
        Ok(Destination::Queue(queue))
    } else {
        Err(unsupported(destination))
    }
}

/// Queue names must also be valid topic names, because a message sent to `/queue/x` carries
/// `x` as its topic (what an AMQP consumer sees as the routing key, as with AMQP's default
/// exchange). Names starting with `$` are the broker's (MQTT `$share/…` groups are queues).
fn check_queue_name(name: &str) -> Result<(), String> {
    if name.len() > MAX_QUEUE_NAME {
        return Err(format!("queue names are at most {MAX_QUEUE_NAME} bytes"));
    }
    if name.starts_with('$') {
        return Err("queue names starting with '$' are reserved for the broker".into());
    }
    topic::validate_name(name).map_err(|e| e.to_string())
}

fn truncate(text: &str) -> String {
    text.chars().take(128).collect()
}

/// The destination of a SEND: a topic name without wildcards, or a queue.
pub(crate) fn for_send(destination: &str) -> Result<Destination<'_>, StompError> {
    let parsed = split(destination)?;
    if let Destination::Topic(name) = parsed {
        topic::validate_name(name)
            .map_err(|e| StompError::protocol(format!("invalid topic destination '{}': {e}", truncate(destination))))?;
    }
    Ok(parsed)
}

/// The destination of a SUBSCRIBE: a topic filter (wildcards allowed), or a queue.
pub(crate) fn for_subscribe(destination: &str) -> Result<Destination<'_>, StompError> {
    let parsed = split(destination)?;
    if let Destination::Topic(filter) = parsed {
        topic::validate_filter(filter)
            .map_err(|e| StompError::protocol(format!("invalid topic destination '{}': {e}", truncate(destination))))?;
    }
    Ok(parsed)
}

/// The core [`tolk_core::Destination`] a `reply-to` header names.
pub(crate) fn to_core(destination: &str) -> Result<tolk_core::Destination, StompError> {
    Ok(match for_send(destination)? {
        Destination::Topic(t) => tolk_core::Destination::Topic(t.to_owned()),
        Destination::Queue(q) => tolk_core::Destination::Queue(q.to_owned()),
    })
}

/// The STOMP spelling of a core destination (for `reply-to` on MESSAGE frames).
pub(crate) fn from_core(destination: &tolk_core::Destination) -> String {
    match destination {
        tolk_core::Destination::Topic(t) => format!("{TOPIC_PREFIX}{t}"),
        tolk_core::Destination::Queue(q) => format!("{QUEUE_PREFIX}{q}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_map_to_the_common_space_and_back() {
        assert_eq!(for_send("/topic/a/b").unwrap(), Destination::Topic("a/b"));
        assert_eq!(for_send("/topic//a").unwrap(), Destination::Topic("/a"));
        assert_eq!(for_subscribe("/topic/sensors/+/temp").unwrap(), Destination::Topic("sensors/+/temp"));
        assert_eq!(for_subscribe("/topic/#").unwrap(), Destination::Topic("#"));
        let core = to_core("/topic/a/b").unwrap();
        assert_eq!(from_core(&core), "/topic/a/b");
    }

    #[test]
    fn wildcards_only_in_subscriptions() {
        assert!(for_send("/topic/a/+").is_err());
        assert!(for_subscribe("/topic/a+").is_err());
        assert!(for_subscribe("/topic/").is_err(), "empty topic");
    }

    #[test]
    fn queues_are_named() {
        assert_eq!(for_send("/queue/orders").unwrap(), Destination::Queue("orders"));
        assert_eq!(for_subscribe("/queue/a/b").unwrap(), Destination::Queue("a/b"));
        assert!(for_send("/queue/").is_err());
        assert!(for_send("/queue/$share/g/t").is_err());
        assert!(for_subscribe("/queue/a/#").is_err());
        assert!(for_send(&format!("/queue/{}", "q".repeat(256))).is_err());
        assert_eq!(from_core(&to_core("/queue/x").unwrap()), "/queue/x");
    }

    #[test]
    fn other_destinations_name_both_accepted_forms() {
        let e = for_send("/exchange/amq.topic/x").unwrap_err();
        assert!(e.message.contains("/exchange/amq.topic/x"), "{}", e.message);
        assert!(e.message.contains("/topic/<topic>") && e.message.contains("/queue/<name>"));
        assert!(for_subscribe("topic/a").is_err());
    }
}
