//! Codec cost per frame: decode and encode of the frames each protocol carries on tolk's hot
//! path, with the codec its front end uses (rmqtt-codec for MQTT 3.1.1 and 5, stomp-codec,
//! mqttsn-codec, amq-protocol behind tolk-amqp's framing checks, wsn-xml).
//!
//! Names read `protocol/operation/case`; throughput is the frame's bytes on the wire. Decoding
//! starts from a fresh read buffer holding the whole frame, made outside the timer (as after a
//! socket read), and what it decoded is dropped outside the timer too. Encoding appends to a
//! reused output buffer; an encoder that consumes its input gets a clone made outside the timer.
//! Before timing, every case decodes what was encoded and compares the fields, so a bench that
//! measures the wrong thing fails instead.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use criterion::measurement::WallTime;
use criterion::{BatchSize, BenchmarkGroup, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use tolk_benches::HOT_TOPIC;

/// Payload sizes of a small sensor reading and of a larger document.
const SIZES: [usize; 2] = [64, 1024];

/// A deterministic payload of `len` bytes that is not UTF-8 (so WS-N has to base64 it).
fn payload(len: usize) -> Bytes {
    (0..len).map(|i| (i * 151 + 0x80) as u8).collect()
}

/// `64B`, `1KiB`: the case label of a payload size.
fn size_label(len: usize) -> String {
    if len.is_multiple_of(1024) { format!("{}KiB", len / 1024) } else { format!("{len}B") }
}

/// Times `decode` on a fresh buffer holding `wire`.
fn bench_decode<T>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    id: BenchmarkId,
    wire: &[u8],
    mut decode: impl FnMut(&mut BytesMut) -> T,
) {
    group.throughput(Throughput::Bytes(wire.len() as u64));
    group.bench_function(id, |b| b.iter_batched_ref(|| BytesMut::from(wire), &mut decode, BatchSize::SmallInput));
}

/// Times `encode` on a clone of `input`; `wire_len` is the size of what it writes.
fn bench_encode<I: Clone, T>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    id: BenchmarkId,
    wire_len: usize,
    input: &I,
    mut encode: impl FnMut(I) -> T,
) {
    group.throughput(Throughput::Bytes(wire_len as u64));
    group.bench_function(id, |b| b.iter_batched(|| input.clone(), &mut encode, BatchSize::SmallInput));
}

/// MQTT PUBLISH through rmqtt-codec's v3.1.1 and v5 codecs (the `tokio_util` Decoder/Encoder
/// that tolk-mqtt's `PacketCodec` wraps).
mod mqtt {
    use std::num::NonZeroU16;

    use rmqtt_codec::types::{Publish, QoS};
    use rmqtt_codec::{v3, v5};
    use tokio_util::codec::{Decoder, Encoder};

    use super::*;

    const MAX_PACKET: u32 = 1 << 20;

    /// The cases: QoS 0 at both sizes, QoS 1 at 64 bytes (QoS 1 adds only a 2-byte packet id,
    /// so its 1 KiB case would repeat QoS 0's).
    const CASES: [(QoS, usize); 3] = [(QoS::AtMostOnce, 64), (QoS::AtMostOnce, 1024), (QoS::AtLeastOnce, 64)];

    /// A sensor reading; for v5 with a content type and one user property.
    fn publish(qos: QoS, len: usize, v5: bool) -> Publish {
        Publish {
            dup: false,
            retain: false,
            qos,
            topic: HOT_TOPIC.into(),
            packet_id: (qos != QoS::AtMostOnce).then(|| NonZeroU16::new(42).unwrap()),
            payload: payload(len),
            properties: v5.then(|| v5::PublishProperties {
                content_type: Some("application/octet-stream".into()),
                user_properties: vec![("sensor".into(), "t-17".into())],
                ..Default::default()
            }),
        }
    }

    fn case_id(op: &str, qos: QoS, len: usize) -> BenchmarkId {
        BenchmarkId::new(op, format!("qos{}_{}", qos.value(), size_label(len)))
    }

    /// One protocol level's codec, so both levels share the bench code.
    trait Level {
        const GROUP: &'static str;
        const V5: bool;
        type Packet: Clone;
        type Codec: Decoder<Item = (Self::Packet, u32)> + Encoder<Self::Packet>;
        fn codec() -> Self::Codec;
        fn wrap(publish: Publish) -> Self::Packet;
        fn into_publish(packet: Self::Packet) -> Option<Publish>;
    }

    struct V3;
    impl Level for V3 {
        const GROUP: &'static str = "mqtt_v3";
        const V5: bool = false;
        type Packet = v3::Packet;
        type Codec = v3::Codec;
        fn codec() -> v3::Codec {
            v3::Codec::new(MAX_PACKET)
        }
        fn wrap(publish: Publish) -> v3::Packet {
            v3::Packet::Publish(Box::new(publish))
        }
        fn into_publish(packet: v3::Packet) -> Option<Publish> {
            if let v3::Packet::Publish(p) = packet { Some(*p) } else { None }
        }
    }

    struct V5;
    impl Level for V5 {
        const GROUP: &'static str = "mqtt_v5";
        const V5: bool = true;
        type Packet = v5::Packet;
        type Codec = v5::Codec;
        fn codec() -> v5::Codec {
            v5::Codec::new(MAX_PACKET, 0)
        }
        fn wrap(publish: Publish) -> v5::Packet {
            v5::Packet::Publish(Box::new(publish))
        }
        fn into_publish(packet: v5::Packet) -> Option<Publish> {
            if let v5::Packet::Publish(p) = packet { Some(*p) } else { None }
        }
    }

    fn level<L: Level>(c: &mut Criterion)
    where
        <L::Codec as Decoder>::Error: std::fmt::Debug,
        <L::Codec as Encoder<L::Packet>>::Error: std::fmt::Debug,
    {
        let mut group = c.benchmark_group(L::GROUP);
        for (qos, len) in CASES {
            let publish = publish(qos, len, L::V5);
            let packet = L::wrap(publish.clone());
            let mut codec = L::codec();
            let mut wire = BytesMut::new();
            codec.encode(packet.clone(), &mut wire).unwrap();
            let (back, _) = codec.decode(&mut wire.clone()).unwrap().expect("a whole packet");
            assert_eq!(L::into_publish(back).as_ref(), Some(&publish), "{} round trip", L::GROUP);

            bench_decode(&mut group, case_id("decode_publish", qos, len), &wire, |buf| codec.decode(buf).unwrap());
            let mut out = BytesMut::with_capacity(wire.len());
            bench_encode(&mut group, case_id("encode_publish", qos, len), wire.len(), &packet, |p| {
                out.clear();
                codec.encode(p, &mut out).unwrap();
            });
        }
        group.finish();
    }

    /// Both protocol levels.
    pub fn benches(c: &mut Criterion) {
        level::<V3>(c);
        level::<V5>(c);
    }
}

/// STOMP 1.2 through stomp-codec: SEND in, MESSAGE out (headers as tolk-stomp writes them).
mod stomp {
    use stomp_codec::{Command, Decoded, Decoder, Encoder, Frame, Version};

    use super::*;

    fn destination() -> String {
        format!("/topic/{HOT_TOPIC}")
    }

    /// What a client publishes.
    fn send(body: Bytes) -> Frame {
        Frame::new(Command::Send)
            .with_header("destination", destination())
            .with_header("content-type", "application/octet-stream")
            .with_body(body)
    }

    /// A delivery in the shape of tolk-stomp's `message_frame`: the required headers, the
    /// content type and an explicit content-length.
    fn message(body: Bytes) -> Frame {
        Frame::message(destination(), "1042", "sub-0", body.clone())
            .with_header("content-type", "application/octet-stream")
            .with_header("content-length", body.len().to_string())
    }

    /// Encodes `frame` and checks that decoding gives it back (the encoder adds content-length
    /// to a SEND, so headers are compared from the decoded side).
    fn wire(frame: &Frame, encoder: &Encoder, decoder: &mut Decoder) -> BytesMut {
        let mut wire = BytesMut::new();
        encoder.encode(frame, &mut wire).unwrap();
        let Some(Decoded::Frame(back)) = decoder.decode(&mut wire.clone()).unwrap() else { panic!("not a frame") };
        assert_eq!(back.command, frame.command);
        assert_eq!(back.body, frame.body);
        for (name, value) in frame.headers.iter() {
            assert_eq!(back.header(name), Some(&**value), "header {name}");
        }
        assert_eq!(back.header("content-length"), Some(&*frame.body.len().to_string()));
        wire
    }

    /// SEND decode and MESSAGE encode at each size.
    pub fn benches(c: &mut Criterion) {
        let mut group = c.benchmark_group("stomp");
        let mut decoder = Decoder::default();
        decoder.set_version(Version::V1_2);
        let mut encoder = Encoder::new();
        encoder.set_version(Version::V1_2);
        for len in SIZES {
            let send = wire(&send(payload(len)), &encoder, &mut decoder);
            bench_decode(&mut group, BenchmarkId::new("decode_send", size_label(len)), &send, |buf| {
                decoder.decode(buf).unwrap()
            });
            let message = message(payload(len));
            let wire_len = wire(&message, &encoder, &mut decoder).len();
            let mut out = BytesMut::with_capacity(wire_len);
            bench_encode(&mut group, BenchmarkId::new("encode_message", size_label(len)), wire_len, &&message, |f| {
                out.clear();
                encoder.encode(f, &mut out).unwrap();
            });
        }
        group.finish();
    }
}

/// MQTT-SN 1.2 through mqttsn-codec: PUBLISH to a registered topic id, and REGISTER.
mod mqttsn {
    use mqttsn_codec::{Message, Publish, PublishTopic, QoS, Register, decode_bytes, encode};

    use super::*;

    /// Encodes `message`, checks that it decodes back equal, and benches both directions.
    /// Decoding takes the datagram as `Bytes`, so the payload is sliced, not copied.
    fn case(group: &mut BenchmarkGroup<'_, WallTime>, op: &str, label: Option<&str>, message: &Message) {
        let mut wire = BytesMut::new();
        encode(message, &mut wire).unwrap();
        assert_eq!(&decode_bytes(wire.clone().freeze()).unwrap(), message, "MQTT-SN round trip");
        let id = |dir: &str| match label {
            Some(label) => BenchmarkId::new(format!("{dir}_{op}"), label),
            None => BenchmarkId::from_parameter(format!("{dir}_{op}")),
        };
        bench_decode(group, id("decode"), &wire, |buf| decode_bytes(buf.split().freeze()).unwrap());
        let mut out = BytesMut::with_capacity(wire.len());
        bench_encode(group, id("encode"), wire.len(), &message, |m| {
            out.clear();
            encode(m, &mut out).unwrap();
        });
    }

    /// PUBLISH at QoS 0 and 1 with a 64-byte reading, and a client's REGISTER of the topic.
    pub fn benches(c: &mut Criterion) {
        let mut group = c.benchmark_group("mqttsn");
        for (qos, label, msg_id) in [(QoS::Zero, "qos0_64B", 0), (QoS::One, "qos1_64B", 7)] {
            let publish = Message::Publish(Publish {
                dup: false,
                qos,
                retain: false,
                topic: PublishTopic::Normal(0x002A),
                msg_id,
                data: payload(64),
            });
            case(&mut group, "publish", Some(label), &publish);
        }
        let register = Message::Register(Register { topic_id: 0, msg_id: 3, topic_name: HOT_TOPIC.into() });
        case(&mut group, "register", None, &register);
        group.finish();
    }
}

/// AMQP 0-9-1 through tolk-amqp's framing (which parses and writes methods and content
/// headers with amq-protocol): basic.publish in, basic.deliver out, each with a content header
/// and one body frame.
mod amqp {
    use amq_protocol::protocol::basic::{self, AMQPMethod};
    use amq_protocol::protocol::{AMQPClass, BasicProperties};
    use amq_protocol::types::{AMQPValue, FieldTable, LongString};
    use amqp_codec::{Encoder, Frame, decode};
    use tolk_amqp::topic_key::topic_to_routing_key;

    use super::*;

    /// The frame_max RabbitMQ and tolk offer.
    const FRAME_MAX: u32 = 131_072;
    const CHANNEL: u16 = 1;

    /// Content type, persistent delivery, a timestamp and one header.
    fn properties() -> BasicProperties {
        let mut headers = FieldTable::default();
        headers.insert("sensor".into(), AMQPValue::LongString(LongString::from("t-17")));
        BasicProperties::default()
            .with_content_type("application/octet-stream".into())
            .with_delivery_mode(2)
            .with_timestamp(1_767_225_600)
            .with_headers(headers)
    }

    /// A method with its content, as frames and as bytes.
    struct Content {
        method: AMQPClass,
        properties: BasicProperties,
        body: Bytes,
    }

    impl Content {
        fn write(&self, encoder: &mut Encoder, out: &mut Vec<u8>) {
            encoder.method(out, CHANNEL, self.method.clone()).unwrap();
            encoder.content(out, CHANNEL, self.properties.clone(), &self.body, FRAME_MAX).unwrap();
        }

        /// Encodes, then checks that the three frames decode back to the same fields.
        fn wire(&self) -> Vec<u8> {
            let mut wire = Vec::new();
            self.write(&mut Encoder::default(), &mut wire);
            let mut buf = BytesMut::from(&wire[..]);
            let frames = decode_three(&mut buf);
            assert_eq!(frames[0], Frame::Method(CHANNEL, Box::new(self.method.clone())));
            let Frame::Header(CHANNEL, header) = &frames[1] else { panic!("not a content header") };
            assert_eq!((header.body_size, &header.properties), (self.body.len() as u64, &self.properties));
            assert_eq!(frames[2], Frame::Body(CHANNEL, self.body.clone()));
            assert!(buf.is_empty());
            wire
        }
    }

    fn decode_three(buf: &mut BytesMut) -> [Frame; 3] {
        std::array::from_fn(|_| decode(buf, FRAME_MAX).unwrap().expect("a whole frame"))
    }

    /// Publish decode and deliver encode at each size; the routing key is the hot topic's.
    pub fn benches(c: &mut Criterion) {
        let mut group = c.benchmark_group("amqp");
        let routing_key = topic_to_routing_key(HOT_TOPIC);
        for len in SIZES {
            let publish = Content {
                method: AMQPClass::Basic(AMQPMethod::Publish(basic::Publish {
                    exchange: "amq.topic".into(),
                    routing_key: routing_key.as_str().into(),
                    mandatory: false,
                    immediate: false,
                })),
                properties: properties(),
                body: payload(len),
            };
            let wire = publish.wire();
            bench_decode(&mut group, BenchmarkId::new("decode_publish", size_label(len)), &wire, decode_three);

            let deliver = Content {
                method: AMQPClass::Basic(AMQPMethod::Deliver(basic::Deliver {
                    consumer_tag: "amq.ctag-bench".into(),
                    delivery_tag: 1042,
                    redelivered: false,
                    exchange: "amq.topic".into(),
                    routing_key: routing_key.as_str().into(),
                })),
                properties: properties(),
                body: payload(len),
            };
            let wire_len = deliver.wire().len();
            let (mut encoder, mut out) = (Encoder::default(), Vec::with_capacity(wire_len));
            let input = (deliver.method.clone(), deliver.properties.clone());
            bench_encode(
                &mut group,
                BenchmarkId::new("encode_deliver", size_label(len)),
                wire_len,
                &input,
                |(m, p)| {
                    out.clear();
                    encoder.method(&mut out, CHANNEL, m).unwrap();
                    encoder.content(&mut out, CHANNEL, p, &deliver.body, FRAME_MAX).unwrap();
                },
            );
        }
        group.finish();
    }
}

/// WS-Notification through wsn-xml: a publisher's SOAP 1.2 Notify parsed down to topic and
/// payload, and the Notify tolk writes to a consumer built from topic and payload.
mod wsn {
    use wsn_xml::{
        AddressingVersion, EndpointReference, Limits, NotificationMessage, Payload, PayloadForm, Request,
        RequestHeaders, SoapVersion, TopicExpression, XmlElement, parse_request, write_notify, write_request,
    };

    use super::*;

    const TOPIC_NAMESPACE: &str = "urn:example:topics";
    /// A small XML reading, embedded in `wsnt:Message` as itself.
    const XML_READING: &[u8] = b"<m:reading xmlns:m=\"urn:example:meter\"><m:kwh>12.5</m:kwh></m:reading>";

    /// One core message: what the Notify carries, and the form wsn-xml gives it.
    struct Case {
        label: String,
        payload: Bytes,
        content_type: Option<&'static str>,
        form: PayloadForm,
    }

    fn cases() -> Vec<Case> {
        let xml = Case {
            label: format!("xml_{}", size_label(XML_READING.len())),
            payload: Bytes::from_static(XML_READING),
            content_type: None,
            form: PayloadForm::Xml,
        };
        let binary = SIZES.map(|len| Case {
            label: format!("base64_{}", size_label(len)),
            payload: payload(len),
            content_type: Some("application/octet-stream"),
            form: PayloadForm::Base64,
        });
        std::iter::once(xml).chain(binary).collect()
    }

    /// The inbound path: parse, then map the topic and recover the payload.
    fn parse(document: &[u8], limits: &Limits) -> (String, Payload) {
        let envelope = parse_request(document, limits).unwrap();
        let Request::Notify(messages) = envelope.request else { panic!("not a Notify") };
        let message = &messages[0];
        let topic = message.topic.as_ref().expect("a topic").to_topic().unwrap().topic;
        (topic, message.message.to_payload(limits))
    }

    /// The outbound path, as tolk-wsn's push does per delivery: payload to element, topic to
    /// expression, then the document.
    fn write(case: &Case, consumer: &EndpointReference, subscription: &EndpointReference, limits: &Limits) -> Bytes {
        let message = NotificationMessage {
            subscription_reference: Some(subscription.clone()),
            topic: Some(TopicExpression::from_topic(HOT_TOPIC, Some(TOPIC_NAMESPACE)).unwrap()),
            producer_reference: None,
            message: XmlElement::from_payload(&case.payload, case.content_type, limits),
        };
        let message_id = "urn:uuid:6f1c2a9e-0b7d-4c1e-9a55-3d2f8e4b7c10";
        write_notify(SoapVersion::V12, AddressingVersion::W3c, consumer, Some(message_id), &[message])
    }

    fn check(document: &[u8], case: &Case, limits: &Limits) {
        let (topic, payload) = parse(document, limits);
        assert_eq!(topic, HOT_TOPIC);
        assert_eq!((&payload.bytes, payload.form), (&case.payload, case.form));
    }

    /// Parse and write for an XML reading and binary payloads of each size.
    pub fn benches(c: &mut Criterion) {
        let mut group = c.benchmark_group("wsn");
        let limits = Limits::default();
        let broker = EndpointReference::new("http://127.0.0.1:8080/wsn");
        let consumer = EndpointReference::new("http://127.0.0.1:9090/consumer");
        let subscription = EndpointReference::new("http://127.0.0.1:8080/wsn/subscriptions/17");
        for case in cases() {
            let publisher = NotificationMessage {
                subscription_reference: None,
                topic: Some(TopicExpression::from_topic(HOT_TOPIC, Some(TOPIC_NAMESPACE)).unwrap()),
                producer_reference: None,
                message: XmlElement::from_payload(&case.payload, case.content_type, &limits),
            };
            let headers = RequestHeaders {
                message_id: Some("urn:uuid:0d4e5c8a-2f61-4b3a-8e77-91c0a2b3d4e5"),
                to: Some(&broker),
                ..RequestHeaders::default()
            };
            let notify = write_request(SoapVersion::V12, &headers, &Request::Notify(vec![publisher]));
            check(&notify, &case, &limits);
            bench_decode(&mut group, BenchmarkId::new("parse_notify", &case.label), &notify, |buf| parse(buf, &limits));

            let delivery = write(&case, &consumer, &subscription, &limits);
            check(&delivery, &case, &limits);
            bench_encode(&mut group, BenchmarkId::new("write_notify", &case.label), delivery.len(), &&case, |case| {
                write(case, &consumer, &subscription, &limits)
            });
        }
        group.finish();
    }
}

/// Short warm-up and measurement, and 10,000 bootstrap resamples instead of 100,000 (the default
/// costs about half a second of analysis per benchmark on a 2-core machine), so the 30 cases run
/// in about a minute and a half.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .nresamples(10_000)
}

criterion_group! {
    name = benches;
    config = config();
    targets = mqtt::benches, stomp::benches, mqttsn::benches, amqp::benches, wsn::benches
}
criterion_main!(benches);
