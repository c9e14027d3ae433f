//! Closed label sets. Each enum maps to a dense index so registries can be plain arrays.

use serde::Serialize;

macro_rules! label_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $label:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        /// Serialised as [`Self::as_str`], so that JSON (`/api/latency`) and Prometheus use one
        /// spelling of every label.
        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl $name {
            /// Every variant, in index order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// Number of variants; the size of arrays indexed by this label.
            pub const COUNT: usize = Self::ALL.len();
            /// The label value as it appears in Prometheus output and JSON.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $label),+ }
            }
            /// Dense index for array-backed registries.
            pub const fn index(self) -> usize { self as usize }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

label_enum! {
    /// The wire protocol a message arrived on or leaves by.
    Protocol {
        /// MQTT 3.1.1 and 5.0.
        Mqtt => "mqtt",
        /// MQTT-SN 1.2 over UDP.
        MqttSn => "mqttsn",
        /// STOMP 1.0–1.2.
        Stomp => "stomp",
        /// AMQP 0.9.1.
        Amqp => "amqp",
        /// SOAP WS-Notification.
        Wsn => "wsn",
        /// MQTT over WebSocket (`/mqtt` on the HTTP port), told apart from MQTT over TCP.
        MqttWs => "mqtt-ws",
        /// STOMP over WebSocket (`/stomp` on the HTTP port).
        StompWs => "stomp-ws",
        /// Messages made by the broker itself (wills fired by timers, `$SYS`).
        Internal => "internal",
        /// Another broker, through a bridge (`[[bridge]]`): messages it brought in, or took out.
        Bridge => "bridge",
        /// Another node of this cluster (`[cluster]`), through NATS.
        Cluster => "cluster",
        /// XMPP publish-subscribe (XEP-0060). Last, because kept messages store a protocol's
        /// index (`tolk_core::store::record`): a new protocol must not renumber the others.
        Xmpp => "xmpp",
    }
}

label_enum! {
    /// One leg of a message's trip through the broker.
    Hop {
        /// Frame complete on the publisher's connection → routed into the subscriber's outbox.
        Ingress => "ingress",
        /// Waiting in the subscriber's outbox until its task takes it.
        Queue => "queue",
        /// Taken by the subscriber's task → bytes handed to the socket.
        Egress => "egress",
        /// Frame complete on the way in → bytes written on the way out.
        EndToEnd => "end_to_end",
        /// Frame complete on the way in → the remote broker's acknowledgement, through a bridge
        /// (its spool and its uplink included).
        Bridge => "bridge",
        /// Frame complete on the publishing node → taken from NATS on this node, by the two
        /// nodes' clocks (`[cluster]`).
        Cluster => "cluster",
        /// Re-encoding a payload for a subscriber's format (`[[transcode]]`): counted once per
        /// message and format, by the subscriber that needed it first.
        Transcode => "transcode",
    }
}

label_enum! {
    /// A payload format the broker re-encodes into (`[[transcode]]`).
    Encoding {
        /// JSON (RFC 8259).
        Json => "json",
        /// CBOR (RFC 8949).
        Cbor => "cbor",
        /// XML, JSON mapped through the W3C XPath 3.1 `json-to-xml` representation.
        Xml => "xml",
        /// SenML in JSON (RFC 8428).
        SenmlJson => "senml_json",
        /// SenML in CBOR (RFC 8428).
        SenmlCbor => "senml_cbor",
        /// Protobuf, from a user's `.proto` file.
        Protobuf => "protobuf",
    }
}

label_enum! {
    /// Why a message was not delivered to one subscriber or queue.
    DropReason {
        /// At-most-once delivery to a subscriber whose outbox was full.
        OutboxFull => "outbox_full",
        /// A named queue (or an offline session queue) was at its length limit.
        QueueFull => "queue_full",
        /// The message expired before it could be delivered.
        Expired => "expired",
        /// The subscriber's protocol cannot carry this message (size, topic or payload form).
        Untranslatable => "untranslatable",
        /// Nobody was subscribed; only counted for messages that asked to be routed somewhere.
        NoRoute => "no_route",
        /// The subscriber's endpoint stayed unreachable (a WS-N push consumer that failed every
        /// attempt for its give-up time) and what was waiting for it was discarded with it.
        ConsumerUnreachable => "consumer_unreachable",
        /// A datagram the kernel dropped because the receiving socket's buffer was full (an
        /// MQTT-SN gateway falling behind); counted per datagram, whatever it carried.
        ReceiveBufferFull => "receive_buffer_full",
        /// The broker's memory budget was full (see `[core] memory_budget_bytes`): at-most-once
        /// messages are dropped, at-least-once publishers refused.
        MemoryFull => "memory_full",
        /// Still queued for a session when it went away for good (a clean session closed, a
        /// persistent session expired or was taken over as clean).
        SessionEnded => "session_ended",
        /// Input that could not be decoded or was not allowed (an MQTT-SN datagram that is not
        /// a packet, a topic over the limits), counted where no connection can be closed.
        Malformed => "malformed",
        /// A message that came back to the broker that sent it (a WS-N consumer address that
        /// is the broker itself under another name, a bridged message whose path holds this
        /// node), or that has crossed as many bridges as it may.
        Loop => "loop",
        /// An at-most-once message for a bridge whose remote was down (at-least-once ones wait
        /// in its spool).
        RemoteDown => "remote_down",
    }
}

label_enum! {
    /// Why the broker closed a connection (or saw it closed).
    CloseReason {
        /// The client said goodbye (DISCONNECT, connection.close, EOF between frames).
        ClientClosed => "client_closed",
        /// The client broke the protocol: malformed frame, wrong order, invalid field.
        ProtocolError => "protocol_error",
        /// A frame, header or queue limit was exceeded.
        LimitExceeded => "limit_exceeded",
        /// The client stopped reading and its outbox overflowed at-least-once messages.
        SlowConsumer => "slow_consumer",
        /// No traffic within the negotiated keep-alive or heart-beat window.
        KeepAliveTimeout => "keepalive_timeout",
        /// Another connection took over the same session (same client id).
        SessionTakenOver => "session_taken_over",
        /// Login refused.
        AuthFailed => "auth_failed",
        /// The access-control list refused an operation, in a protocol whose refusal ends the
        /// connection (STOMP ERROR).
        NotAuthorized => "not_authorized",
        /// A read or write on the socket failed.
        IoError => "io_error",
        /// The broker is shutting down.
        Shutdown => "shutdown",
        /// No bytes from the client for the listener's longest allowed silence (asked-for
        /// keep-alive 0 or heart-beat 0 included), or no complete handshake in time.
        IdleTimeout => "idle_timeout",
        /// The broker's memory budget was full and the client's at-least-once publish could not
        /// be refused any other way (MQTT 3.1.1 has no negative PUBACK).
        MemoryFull => "memory_full",
    }
}

label_enum! {
    /// What a client was refused by the access-control list (`[auth] acl_file`).
    Denial {
        /// Publishing to a topic without `write` on it.
        Publish => "publish",
        /// Subscribing to a filter not inside the client's `read` rules.
        Subscribe => "subscribe",
        /// A message on a subscribed filter withheld because its topic is denied (a `deny`
        /// rule inside a wider `read` rule); counted per message.
        Read => "read",
        /// Declaring, consuming from, sending to, purging or deleting a named queue.
        Queue => "queue",
        /// Declaring, publishing to, binding or deleting an AMQP exchange.
        Exchange => "exchange",
    }
}

label_enum! {
    /// What holds bytes counted against the broker's memory budget.
    MemoryKind {
        /// Deliveries waiting in the outboxes of connected sessions.
        Outbox => "outbox",
        /// Deliveries kept for offline persistent sessions.
        Offline => "offline",
        /// Messages in named queues (AMQP queues, STOMP `/queue/`, MQTT `$share` groups).
        Queue => "queue",
        /// Retained messages.
        Retained => "retained",
        /// Messages waiting in WS-N pull points.
        PullPoint => "pullpoint",
    }
}
