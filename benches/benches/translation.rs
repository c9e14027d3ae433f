//! Translation cost for every front end, wire bytes to wire bytes, with the codec and the
//! `translate` functions the broker uses:
//!
//! * `inbound/<p>`: a publish frame (MQTT 5 PUBLISH, STOMP SEND, AMQP basic.publish + header +
//!   body, MQTT-SN PUBLISH by registered topic id, WS-N Notify) decoded and turned into a core
//!   `Message`.
//! * `outbound/<p>`: a core `Message` turned into the delivery frame (PUBLISH, MESSAGE,
//!   basic.deliver + header + body, PUBLISH, Notify) and encoded.
//! * `hop/<a>_to_<b>`: both, as one message crossing the broker from protocol `a` to `b`.
//!
//! The message is [`sample_message`]: 64 bytes of JSON on `site/7/building/3/floor/2/temp`,
//! at most once, with a content type and one user property where the protocol carries them.
//! Copying the frame into the read buffer happens outside the timed region (it is the socket's
//! cost, not translation's); dropping the message and the frames is inside. Routing is not
//! measured (see `routing.rs`), nor what a session does around a frame (acks, topic aliases,
//! destination checks, size limits). Each benchmark first checks, untimed, that its output
//! carries the input's topic and payload.

use std::hint::black_box;
use std::num::NonZeroU16;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use amq_protocol::protocol::{AMQPClass, BasicProperties, basic};
use amq_protocol::types::{AMQPValue, FieldTable, LongString, ShortString};
use amqp_codec::{Encoder as AmqpEncoder, Frame as AmqpFrame};
use bytes::{Bytes, BytesMut};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use mqtt_codec::{PacketCodec, Version as MqttVersion};
use mqttsn_codec::{Message as SnMessage, PublishTopic, QoS as SnQoS};
use rmqtt_codec::types::{Publish, QoS as WireQoS};
use rmqtt_codec::v5::{Packet, PublishProperties};
use tolk_amqp::topic_key::{routing_key_to_topic, topic_to_routing_key};
use tolk_benches::HOT_TOPIC;
use tolk_benches::translation_fixtures::{CLIENT_ID, CONTENT_TYPE, PAYLOAD, USER_PROPERTY, sample_message};
use tolk_core::{Delivery, Message, Origin, Protocol, QoS, SessionId};
use tolk_mqttsn::translate::{OutboundTopic, PredefinedTopics, SubscriptionForm, TopicRegistry};
use tolk_stomp::translate::{Envelope, SendTarget};
use wsn_xml::{
    AddressingVersion, EndpointReference, Limits, NotificationMessage, Request, SoapVersion, TopicExpression,
    XmlElement, parse_request, write_notify,
};

/// MQTT's default maximum packet size in tolk's config is larger than anything sent here.
const MQTT_MAX_PACKET: u32 = 1024 * 1024;
/// tolk's default AMQP `frame_max` (RabbitMQ's).
const AMQP_FRAME_MAX: u32 = 131_072;
/// AMQP channel carrying the publish and the delivery.
const AMQP_CHANNEL: u16 = 1;
/// STOMP destinations of the topic space.
const STOMP_TOPIC_PREFIX: &str = "/topic/";
/// Namespace of the WS-N topic expressions (the subscription filter's, on delivery).
const WSN_NAMESPACE: &str = "urn:site";

/// One protocol's translation, from and to wire bytes, holding what its connection would hold
/// (codec state, output buffer, topic registry). `now` is fixed per front end so that the clock
/// is not part of the measurement.
trait FrontEnd {
    /// Name in benchmark ids.
    fn name(&self) -> &'static str;
    /// Whether the protocol carries (content type, user properties).
    fn carries(&self) -> (bool, bool);
    /// The publish frame a client sends for the sample message.
    fn publish_frame(&mut self) -> Bytes;
    /// Decodes one whole publish frame and translates it into a core message.
    fn inbound(&mut self, wire: BytesMut) -> Message;
    /// Translates a delivery and encodes its frame into the front end's output buffer.
    fn outbound(&mut self, delivery: &Delivery) -> &[u8];
    /// Topic and payload of an encoded delivery frame (for the untimed checks).
    fn read_delivery(&self, wire: &[u8]) -> (String, Bytes);
}

fn origin(protocol: Protocol) -> Origin {
    Origin { protocol, session: SessionId(7), client_id: CLIENT_ID.into() }
}

/// What the router hands a session for one matching subscription.
fn delivery_of(message: &Arc<Message>, now: Instant) -> Delivery {
    Delivery::new(message.clone(), message.qos, now)
}

/// MQTT 5 through tolk's `PacketCodec` (rmqtt-codec underneath).
struct Mqtt {
    codec: PacketCodec,
    now: Instant,
    out: BytesMut,
}

impl Mqtt {
    fn new() -> Self {
        Mqtt { codec: PacketCodec::new(MqttVersion::V5, MQTT_MAX_PACKET), now: Instant::now(), out: BytesMut::new() }
    }

    fn decode_publish(codec: &mut PacketCodec, wire: &mut BytesMut) -> Publish {
        match codec.decode(wire).expect("MQTT frame decodes") {
            Some(Packet::Publish(publish)) => *publish,
            other => panic!("expected a PUBLISH, got {other:?}"),
        }
    }
}

impl FrontEnd for Mqtt {
    fn name(&self) -> &'static str {
        "mqtt"
    }

    fn carries(&self) -> (bool, bool) {
        (true, true)
    }

    fn publish_frame(&mut self) -> Bytes {
        let properties = PublishProperties {
            content_type: Some(CONTENT_TYPE.into()),
            is_utf8_payload: true,
            user_properties: vec![(USER_PROPERTY.0.into(), USER_PROPERTY.1.into())],
            ..PublishProperties::default()
        };
        let publish = Publish {
            dup: false,
            retain: false,
            qos: WireQoS::AtMostOnce,
            topic: HOT_TOPIC.into(),
            packet_id: None,
            payload: Bytes::from_static(PAYLOAD),
            properties: Some(properties),
        };
        let mut wire = BytesMut::new();
        self.codec.encode(Packet::Publish(Box::new(publish)), &mut wire).expect("MQTT PUBLISH encodes");
        wire.freeze()
    }

    fn inbound(&mut self, mut wire: BytesMut) -> Message {
        let mut publish = Self::decode_publish(&mut self.codec, &mut wire);
        // No topic alias: the session takes the topic as is, shared with the frame.
        let topic = std::mem::take(&mut publish.topic);
        tolk_mqtt::translate::inbound(&mut publish, topic, origin(Protocol::Mqtt), self.now)
    }

    fn outbound(&mut self, delivery: &Delivery) -> &[u8] {
        self.out.clear();
        let packet_id = (delivery.qos > QoS::AtMostOnce).then_some(NonZeroU16::MIN);
        let publish = tolk_mqtt::translate::outbound(delivery, MqttVersion::V5, packet_id, false, self.now)
            .expect("the sample message does not expire");
        self.codec.encode_publish(publish, &mut self.out).expect("MQTT PUBLISH encodes");
        &self.out
    }

    fn read_delivery(&self, wire: &[u8]) -> (String, Bytes) {
        let mut codec = PacketCodec::new(MqttVersion::V5, MQTT_MAX_PACKET);
        let publish = Self::decode_publish(&mut codec, &mut BytesMut::from(wire));
        (String::from(&*publish.topic), publish.payload)
    }
}

/// STOMP 1.2 through `stomp-codec`, `/topic/` destinations.
struct Stomp {
    decoder: stomp_codec::Decoder,
    encoder: stomp_codec::Encoder,
    subscription: stomp_codec::Utf8Bytes,
    now: Instant,
    wall: SystemTime,
    out: BytesMut,
}

impl Stomp {
    fn new() -> Self {
        Stomp {
            decoder: Self::decoder(),
            encoder: Self::encoder(),
            subscription: stomp_codec::Utf8Bytes::from_static("sub-0"),
            now: Instant::now(),
            wall: SystemTime::now(),
            out: BytesMut::new(),
        }
    }

    fn decoder() -> stomp_codec::Decoder {
        let mut decoder = stomp_codec::Decoder::default();
        decoder.set_version(stomp_codec::Version::V1_2);
        decoder
    }

    fn encoder() -> stomp_codec::Encoder {
        let mut encoder = stomp_codec::Encoder::new();
        encoder.set_version(stomp_codec::Version::V1_2);
        encoder
    }

    fn decode_frame(decoder: &mut stomp_codec::Decoder, wire: &mut BytesMut) -> stomp_codec::Frame {
        match decoder.decode(wire).expect("STOMP frame decodes") {
            Some(stomp_codec::Decoded::Frame(frame)) => frame,
            other => panic!("expected a frame, got {other:?}"),
        }
    }

    fn topic_of(frame: &stomp_codec::Frame) -> &str {
        frame.header("destination").and_then(|d| d.strip_prefix(STOMP_TOPIC_PREFIX)).expect("a /topic/ destination")
    }
}

impl FrontEnd for Stomp {
    fn name(&self) -> &'static str {
        "stomp"
    }

    fn carries(&self) -> (bool, bool) {
        (true, true)
    }

    fn publish_frame(&mut self) -> Bytes {
        let frame = stomp_codec::Frame::new(stomp_codec::Command::Send)
            .with_header("destination", format!("{STOMP_TOPIC_PREFIX}{HOT_TOPIC}"))
            .with_header("content-type", CONTENT_TYPE)
            .with_header(USER_PROPERTY.0, USER_PROPERTY.1)
            .with_body(Bytes::from_static(PAYLOAD));
        let mut wire = BytesMut::new();
        self.encoder.encode(&frame, &mut wire).expect("STOMP SEND encodes");
        wire.freeze()
    }

    fn inbound(&mut self, mut wire: BytesMut) -> Message {
        let frame = Self::decode_frame(&mut self.decoder, &mut wire);
        // The session's destination check (`destination::for_send`) is private; this takes the
        // `/topic/` form it accepts.
        let target = SendTarget::Topic(Self::topic_of(&frame));
        tolk_stomp::translate::message_from_send(&frame, target, origin(Protocol::Stomp), self.now, self.wall)
            .expect("SEND translates")
    }

    fn outbound(&mut self, delivery: &Delivery) -> &[u8] {
        self.out.clear();
        let message = &delivery.message;
        let destination = tolk_stomp::translate::topic_destination(&message.topic);
        let envelope = Envelope {
            destination: &destination,
            message_id: 1,
            subscription: &self.subscription,
            ack: false,
            redelivered: delivery.redelivered,
            version: stomp_codec::Version::V1_2,
        };
        let frame = tolk_stomp::translate::message_frame(message, &envelope, self.now, self.wall);
        self.encoder.encode(&frame, &mut self.out).expect("STOMP MESSAGE encodes");
        &self.out
    }

    fn read_delivery(&self, wire: &[u8]) -> (String, Bytes) {
        let frame = Self::decode_frame(&mut Self::decoder(), &mut BytesMut::from(wire));
        (Self::topic_of(&frame).to_owned(), frame.body)
    }
}

/// AMQP 0-9-1 through tolk's `frame` module (amq-protocol underneath), via `amq.topic`.
struct Amqp {
    encoder: AmqpEncoder,
    consumer_tag: ShortString,
    now: Instant,
    out: Vec<u8>,
}

/// The three frames of one message: its method, the content header's properties, the body.
type Content = (basic::AMQPMethod, BasicProperties, Bytes);

impl Amqp {
    fn new() -> Self {
        Amqp { encoder: AmqpEncoder::default(), consumer_tag: "ctag-1".into(), now: Instant::now(), out: Vec::new() }
    }

    fn decode_content(wire: &mut BytesMut) -> Content {
        let mut next = || amqp_codec::decode(wire, AMQP_FRAME_MAX).expect("AMQP frame decodes");
        let (Some(AmqpFrame::Method(_, method)), Some(AmqpFrame::Header(_, header)), Some(AmqpFrame::Body(_, body))) =
            (next(), next(), next())
        else {
            panic!("expected method, content header and body frames");
        };
        let AMQPClass::Basic(method) = *method else { panic!("expected a basic-class method") };
        (method, header.properties, body)
    }

    fn encode_content(&mut self, method: basic::AMQPMethod, properties: BasicProperties, body: &[u8]) {
        let encoded = self
            .encoder
            .method(&mut self.out, AMQP_CHANNEL, AMQPClass::Basic(method))
            .and_then(|()| self.encoder.content(&mut self.out, AMQP_CHANNEL, properties, body, AMQP_FRAME_MAX));
        encoded.expect("AMQP content encodes");
    }
}

impl FrontEnd for Amqp {
    fn name(&self) -> &'static str {
        "amqp"
    }

    fn carries(&self) -> (bool, bool) {
        (true, true)
    }

    fn publish_frame(&mut self) -> Bytes {
        let mut headers = FieldTable::default();
        headers.insert(USER_PROPERTY.0.into(), AMQPValue::LongString(LongString::from(USER_PROPERTY.1)));
        let properties = BasicProperties::default().with_content_type(CONTENT_TYPE.into()).with_headers(headers);
        let publish = basic::Publish {
            exchange: tolk_amqp::translate::TOPIC_BRIDGE.into(),
            routing_key: ShortString::try_new(topic_to_routing_key(HOT_TOPIC)).expect("short routing key"),
            mandatory: false,
            immediate: false,
        };
        self.out.clear();
        self.encode_content(basic::AMQPMethod::Publish(publish), properties, PAYLOAD);
        Bytes::copy_from_slice(&self.out)
    }

    fn inbound(&mut self, mut wire: BytesMut) -> Message {
        let (basic::AMQPMethod::Publish(publish), properties, body) = Self::decode_content(&mut wire) else {
            panic!("expected basic.publish");
        };
        let topic = routing_key_to_topic(publish.routing_key.as_str()).expect("routing key maps to a topic");
        tolk_amqp::translate::message_from_publish(topic, body, &properties, origin(Protocol::Amqp), self.now)
            .expect("publish translates")
    }

    fn outbound(&mut self, delivery: &Delivery) -> &[u8] {
        self.out.clear();
        let message = &delivery.message;
        let (exchange, key) = tolk_amqp::translate::delivery_address(message);
        let deliver = basic::Deliver {
            consumer_tag: self.consumer_tag.clone(),
            delivery_tag: 1,
            redelivered: delivery.redelivered,
            exchange: ShortString::try_new(exchange).expect("short exchange name"),
            routing_key: ShortString::try_new(key).expect("short routing key"),
        };
        let properties = tolk_amqp::translate::properties_for_delivery(message, self.now);
        self.encode_content(basic::AMQPMethod::Deliver(deliver), properties, &message.payload);
        &self.out
    }

    fn read_delivery(&self, wire: &[u8]) -> (String, Bytes) {
        let (basic::AMQPMethod::Deliver(deliver), _, body) = Self::decode_content(&mut BytesMut::from(wire)) else {
            panic!("expected basic.deliver");
        };
        (routing_key_to_topic(deliver.routing_key.as_str()).expect("routing key maps to a topic"), body)
    }
}

/// MQTT-SN 1.2 through `mqttsn-codec`; the topic is registered (a normal topic id), as after a
/// REGISTER, and the subscriber knows its id.
struct MqttSn {
    registry: TopicRegistry,
    predefined: PredefinedTopics,
    topic_id: u16,
    client_id: Arc<str>,
    now: Instant,
    out: BytesMut,
}

impl MqttSn {
    fn new() -> Self {
        let mut registry = TopicRegistry::new(tolk_mqttsn::MAX_TOPIC_IDS);
        let predefined = PredefinedTopics::default();
        let registered = tolk_mqttsn::translate::outbound_topic(
            HOT_TOPIC,
            SubscriptionForm::Name,
            &predefined,
            &mut registry,
            |_| false,
        );
        let OutboundTopic::Register { id: topic_id, .. } = registered else {
            panic!("a new topic is registered, got {registered:?}");
        };
        MqttSn {
            registry,
            predefined,
            topic_id,
            client_id: CLIENT_ID.into(),
            now: Instant::now(),
            out: BytesMut::new(),
        }
    }

    fn decode_publish(wire: Bytes) -> mqttsn_codec::Publish {
        match mqttsn_codec::decode_bytes(wire).expect("MQTT-SN datagram decodes") {
            SnMessage::Publish(publish) => publish,
            other => panic!("expected a PUBLISH, got {other:?}"),
        }
    }

    fn topic_name(&self, topic: PublishTopic) -> Arc<str> {
        tolk_mqttsn::translate::inbound_topic(topic, &self.predefined, &self.registry).expect("a known topic id")
    }
}

impl FrontEnd for MqttSn {
    fn name(&self) -> &'static str {
        "mqttsn"
    }

    fn carries(&self) -> (bool, bool) {
        (false, false)
    }

    fn publish_frame(&mut self) -> Bytes {
        let publish = mqttsn_codec::Publish {
            dup: false,
            qos: SnQoS::Zero,
            retain: false,
            topic: PublishTopic::Normal(self.topic_id),
            msg_id: 0,
            data: Bytes::from_static(PAYLOAD),
        };
        let mut wire = BytesMut::new();
        mqttsn_codec::encode(&SnMessage::Publish(publish), &mut wire).expect("MQTT-SN PUBLISH encodes");
        wire.freeze()
    }

    fn inbound(&mut self, wire: BytesMut) -> Message {
        let publish = Self::decode_publish(wire.freeze());
        let topic = self.topic_name(publish.topic);
        tolk_mqttsn::translate::core_message(
            &topic,
            publish.data,
            publish.qos,
            publish.retain,
            SessionId(7),
            &self.client_id,
            self.now,
        )
    }

    fn outbound(&mut self, delivery: &Delivery) -> &[u8] {
        self.out.clear();
        let known = self.topic_id;
        let form = SubscriptionForm::Name;
        let target = tolk_mqttsn::translate::outbound_topic(
            &delivery.message.topic,
            form,
            &self.predefined,
            &mut self.registry,
            |id| id == known,
        );
        let OutboundTopic::Ready(topic) = target else { panic!("the subscriber knows the topic id, got {target:?}") };
        let qos = tolk_mqttsn::translate::sn_qos(delivery.qos);
        let publish = mqttsn_codec::Publish {
            dup: false,
            qos,
            retain: delivery.retain,
            topic,
            msg_id: if qos == SnQoS::Zero { 0 } else { 1 },
            data: delivery.message.payload.clone(),
        };
        mqttsn_codec::encode(&SnMessage::Publish(publish), &mut self.out).expect("MQTT-SN PUBLISH encodes");
        &self.out
    }

    fn read_delivery(&self, wire: &[u8]) -> (String, Bytes) {
        let publish = Self::decode_publish(Bytes::copy_from_slice(wire));
        (self.topic_name(publish.topic).to_string(), publish.data)
    }
}

/// WS-Notification through `wsn-xml`: SOAP 1.2 Notify with one NotificationMessage, the
/// payload in a `tolk:Payload` wrapper (it has a content type); push delivery to a consumer.
struct Wsn {
    limits: Limits,
    subscription: EndpointReference,
    consumer: EndpointReference,
    now: Instant,
    out: Bytes,
}

impl Wsn {
    fn new() -> Self {
        Wsn {
            limits: Limits::default(),
            subscription: EndpointReference::new("http://gw.local:8080/wsn/subscriptions/s-1"),
            consumer: EndpointReference::new("http://consumer.local:9000/notify"),
            now: Instant::now(),
            out: Bytes::new(),
        }
    }

    fn notification(&self, wire: &[u8]) -> NotificationMessage {
        let envelope = parse_request(wire, &self.limits).expect("SOAP envelope parses");
        let Request::Notify(mut messages) = envelope.request else { panic!("expected a Notify") };
        assert_eq!(messages.len(), 1, "one NotificationMessage");
        messages.swap_remove(0)
    }
}

impl FrontEnd for Wsn {
    fn name(&self) -> &'static str {
        "wsn"
    }

    fn carries(&self) -> (bool, bool) {
        (true, false)
    }

    fn publish_frame(&mut self) -> Bytes {
        // Levels like `7` are not NCNames: the expression escapes them (`_x0037_`), as tolk's
        // own writer does.
        let topic = TopicExpression::from_topic(HOT_TOPIC, Some(WSN_NAMESPACE)).expect("a concrete topic");
        let notification = NotificationMessage {
            subscription_reference: None,
            topic: Some(topic),
            producer_reference: Some(EndpointReference::new("http://sensor-7.local/producer")),
            message: XmlElement::wrap_payload(PAYLOAD, Some(CONTENT_TYPE)),
        };
        let broker = EndpointReference::new("http://gw.local:8080/wsn");
        write_notify(SoapVersion::V12, AddressingVersion::W3c, &broker, Some("urn:uuid:1"), &[notification])
    }

    fn inbound(&mut self, wire: BytesMut) -> Message {
        let notification = self.notification(&wire);
        tolk_wsn::translate::message_from_notification(&notification, &origin(Protocol::Wsn), &self.limits, self.now)
            .expect("Notify translates")
    }

    fn outbound(&mut self, delivery: &Delivery) -> &[u8] {
        let notification = tolk_wsn::translate::notification_of(
            &delivery.message,
            Some(&self.subscription),
            Some(WSN_NAMESPACE),
            &self.limits,
        )
        .expect("the topic has a WS-N form");
        self.out = write_notify(
            SoapVersion::V12,
            AddressingVersion::W3c,
            &self.consumer,
            Some("urn:uuid:2"),
            std::slice::from_ref(&notification),
        );
        &self.out
    }

    fn read_delivery(&self, wire: &[u8]) -> (String, Bytes) {
        let notification = self.notification(wire);
        let topic = notification.topic.expect("a topic").to_topic().expect("a mappable topic").topic;
        (topic, notification.message.to_payload(&self.limits).bytes)
    }
}

fn front_ends() -> Vec<Box<dyn FrontEnd>> {
    vec![
        Box::new(Mqtt::new()),
        Box::new(Stomp::new()),
        Box::new(Amqp::new()),
        Box::new(MqttSn::new()),
        Box::new(Wsn::new()),
    ]
}

/// Fails the run when an inbound translation lost the topic, payload or metadata.
fn check_message(front: &dyn FrontEnd, message: &Message) {
    let name = front.name();
    assert_eq!(message.topic, HOT_TOPIC, "{name}: topic");
    assert_eq!(&message.payload[..], PAYLOAD, "{name}: payload");
    let (content_type, user) = front.carries();
    if content_type {
        assert_eq!(message.props.content_type.as_deref(), Some(CONTENT_TYPE), "{name}: content type");
    }
    if user {
        let expected = (USER_PROPERTY.0.to_owned(), USER_PROPERTY.1.to_owned());
        assert!(message.props.user.contains(&expected), "{name}: user property in {:?}", message.props.user);
    }
}

/// Fails the run when an encoded delivery lost the topic or payload.
fn check_delivery(front: &dyn FrontEnd, wire: &[u8], what: &str) {
    let (topic, payload) = front.read_delivery(wire);
    assert_eq!(topic, HOT_TOPIC, "{what}: topic");
    assert_eq!(&payload[..], PAYLOAD, "{what}: payload");
}

fn inbound(c: &mut Criterion) {
    let mut group = c.benchmark_group("inbound");
    group.throughput(Throughput::Elements(1));
    for mut front in front_ends() {
        let wire = front.publish_frame();
        let message = front.inbound(BytesMut::from(&wire[..]));
        check_message(front.as_ref(), &message);
        group.bench_function(front.name(), |b| {
            b.iter_batched(
                || BytesMut::from(&wire[..]),
                |buf| drop(black_box(front.inbound(buf))),
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();
}

fn outbound(c: &mut Criterion) {
    let mut group = c.benchmark_group("outbound");
    group.throughput(Throughput::Elements(1));
    let message = Arc::new(sample_message(Protocol::Mqtt));
    for mut front in front_ends() {
        let now = Instant::now();
        let wire = front.outbound(&delivery_of(&message, now)).to_vec();
        check_delivery(front.as_ref(), &wire, front.name());
        group.bench_function(front.name(), |b| {
            b.iter(|| black_box(front.outbound(&delivery_of(&message, now)).len()));
        });
    }
    group.finish();
}

/// One message across the broker: `wire` in `from`'s protocol out as `to`'s delivery frame
/// (routing left out: the message is shared as the router shares it, in an `Arc`).
fn cross<'a>(from: &mut dyn FrontEnd, to: &'a mut dyn FrontEnd, wire: BytesMut, now: Instant) -> &'a [u8] {
    let message = Arc::new(from.inbound(wire));
    to.outbound(&delivery_of(&message, now))
}

fn hop(c: &mut Criterion) {
    let mut group = c.benchmark_group("hop");
    group.throughput(Throughput::Elements(1));
    for mut from in front_ends() {
        let wire = from.publish_frame();
        for mut to in front_ends() {
            let name = format!("{}_to_{}", from.name(), to.name());
            let now = Instant::now();
            let out = cross(from.as_mut(), to.as_mut(), BytesMut::from(&wire[..]), now).to_vec();
            check_delivery(to.as_ref(), &out, &name);
            group.bench_function(&name, |b| {
                b.iter_batched(
                    || BytesMut::from(&wire[..]),
                    |buf| black_box(cross(from.as_mut(), to.as_mut(), buf, now).len()),
                    BatchSize::SmallInput,
                );
            });
        }
    }
    group.finish();
}

/// Short warm-up and measurement: 35 benchmarks in about two minutes (command-line flags win).
fn config() -> Criterion {
    Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = inbound, outbound, hop
}
criterion_main!(benches);
