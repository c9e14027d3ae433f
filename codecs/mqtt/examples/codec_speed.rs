//! Decode/encode timing of the three MQTT codec candidates on the same wire bytes (the figures
//! in the README came from this). Run: `cargo run --release -p mqtt-codec --example codec_speed`.
//! A PUBLISH of 64 bytes on a 38-byte topic, QoS 1; the MQTT 5 one also carries content type,
//! response topic, correlation data, message expiry, a payload format indicator and a user
//! property. Encoding builds the packet from `&str` + `Bytes` each time, as a server does per
//! delivery.
use bytes::{Bytes, BytesMut};
use std::time::Instant;
use tokio_util::codec::{Decoder, Encoder};

const BATCH: usize = 1000;
const ROUNDS: usize = 500;
const TOPIC: &str = "sensors/building-7/room-12/temperature";

fn payload() -> Bytes {
    Bytes::from(vec![0x5a; 64])
}

fn v4_frame() -> BytesMut {
    use rumqttc::mqttbytes::{QoS, v4::Publish};
    let mut p = Publish::new(TOPIC, QoS::AtLeastOnce, payload().to_vec());
    p.pkid = 7;
    let mut b = BytesMut::new();
    p.write(&mut b).unwrap();
    b
}

fn v5_frame() -> BytesMut {
    use rumqttc::v5::mqttbytes::{QoS, v5::Publish};
    let mut p = Publish::new(TOPIC, QoS::AtLeastOnce, payload(), Some(v5_props()));
    p.pkid = 7;
    let mut b = BytesMut::new();
    p.write(&mut b).unwrap();
    b
}

fn v5_props() -> rumqttc::v5::mqttbytes::v5::PublishProperties {
    rumqttc::v5::mqttbytes::v5::PublishProperties {
        payload_format_indicator: Some(1),
        message_expiry_interval: Some(60),
        topic_alias: None,
        response_topic: Some("replies/abc".into()),
        correlation_data: Some(Bytes::from_static(b"corr-1234")),
        user_properties: vec![("unit".into(), "celsius".into())],
        subscription_identifiers: vec![],
        content_type: Some("application/json".into()),
    }
}

fn batch(frame: &BytesMut) -> BytesMut {
    let mut b = BytesMut::new();
    for _ in 0..BATCH {
        b.extend_from_slice(frame);
    }
    b
}

fn report(name: &str, start: Instant) {
    let n = (BATCH * ROUNDS) as f64;
    let ns = start.elapsed().as_nanos() as f64 / n;
    println!("{name:<44} {ns:>8.1} ns/packet  {:>6.2} M/s", 1000.0 / ns);
}

fn main() {
    let f4 = batch(&v4_frame());
    let f5 = batch(&v5_frame());
    println!("v4 frame {} bytes, v5 frame {} bytes", f4.len() / BATCH, f5.len() / BATCH);
    for _pass in 0..2 {
        // ---- decode v4
        let t = Instant::now();
        for _ in 0..ROUNDS {
            let mut b = f4.clone();
            while !b.is_empty() {
                let p = rumqttc::mqttbytes::v4::Packet::read(&mut b, 1 << 20).unwrap();
                std::hint::black_box(p);
            }
        }
        report("decode v4 rumqttc::mqttbytes::v4", t);
        let t = Instant::now();
        for _ in 0..ROUNDS {
            let mut b = f4.clone();
            while !b.is_empty() {
                let p = mqttbytes::v4::read(&mut b, 1 << 20).unwrap();
                std::hint::black_box(p);
            }
        }
        report("decode v4 mqttbytes 0.6", t);
        let t = Instant::now();
        for _ in 0..ROUNDS {
            let mut c = rmqtt_codec::v3::Codec::new(1 << 20);
            let mut b = f4.clone();
            while let Some(p) = c.decode(&mut b).unwrap() {
                std::hint::black_box(p);
            }
        }
        report("decode v4 rmqtt-codec v3", t);
        // ---- decode v5
        let t = Instant::now();
        for _ in 0..ROUNDS {
            let mut b = f5.clone();
            while !b.is_empty() {
                let p = rumqttc::v5::mqttbytes::v5::Packet::read(&mut b, Some(1 << 20)).unwrap();
                std::hint::black_box(p);
            }
        }
        report("decode v5 rumqttc::v5::mqttbytes", t);
        let t = Instant::now();
        for _ in 0..ROUNDS {
            let mut b = f5.clone();
            while !b.is_empty() {
                let p = mqttbytes::v5::read(&mut b, 1 << 20).unwrap();
                std::hint::black_box(p);
            }
        }
        report("decode v5 mqttbytes 0.6", t);
        let t = Instant::now();
        for _ in 0..ROUNDS {
            let mut c = rmqtt_codec::v5::Codec::new(1 << 20, 0);
            let mut b = f5.clone();
            while let Some(p) = c.decode(&mut b).unwrap() {
                std::hint::black_box(p);
            }
        }
        report("decode v5 rmqtt-codec v5", t);
        // ---- encode v4 (build from &str + Bytes per packet, as a server does per delivery)
        let pl = payload();
        let mut out = BytesMut::with_capacity(BATCH * 128);
        let t = Instant::now();
        for _ in 0..ROUNDS {
            out.clear();
            for _ in 0..BATCH {
                let mut p = rumqttc::mqttbytes::v4::Publish {
                    dup: false,
                    qos: rumqttc::mqttbytes::QoS::AtLeastOnce,
                    retain: false,
                    topic: TOPIC.to_owned(),
                    pkid: 7,
                    payload: pl.clone(),
                };
                p.pkid = 7;
                p.write(&mut out).unwrap();
            }
            std::hint::black_box(&out);
        }
        report("encode v4 rumqttc::mqttbytes::v4", t);
        let t = Instant::now();
        for _ in 0..ROUNDS {
            out.clear();
            for _ in 0..BATCH {
                let p = mqttbytes::v4::Publish {
                    dup: false,
                    qos: mqttbytes::QoS::AtLeastOnce,
                    retain: false,
                    topic: TOPIC.to_owned(),
                    pkid: 7,
                    payload: pl.clone(),
                };
                p.write(&mut out).unwrap();
            }
            std::hint::black_box(&out);
        }
        report("encode v4 mqttbytes 0.6", t);
        let t = Instant::now();
        for _ in 0..ROUNDS {
            out.clear();
            let mut c = rmqtt_codec::v3::Codec::new(0);
            for _ in 0..BATCH {
                let p = rmqtt_codec::types::Publish {
                    dup: false,
                    retain: false,
                    qos: rmqtt_codec::types::QoS::AtLeastOnce,
                    topic: TOPIC.into(),
                    packet_id: std::num::NonZeroU16::new(7),
                    payload: pl.clone(),
                    properties: None,
                };
                c.encode(rmqtt_codec::v3::Packet::Publish(Box::new(p)), &mut out).unwrap();
            }
            std::hint::black_box(&out);
        }
        report("encode v4 rmqtt-codec v3", t);
        // ---- encode v5
        let t = Instant::now();
        for _ in 0..ROUNDS {
            out.clear();
            for _ in 0..BATCH {
                let p = rumqttc::v5::mqttbytes::v5::Publish {
                    dup: false,
                    qos: rumqttc::v5::mqttbytes::QoS::AtLeastOnce,
                    retain: false,
                    topic: Bytes::copy_from_slice(TOPIC.as_bytes()),
                    pkid: 7,
                    payload: pl.clone(),
                    properties: Some(v5_props()),
                };
                p.write(&mut out).unwrap();
            }
            std::hint::black_box(&out);
        }
        report("encode v5 rumqttc::v5::mqttbytes", t);
        let t = Instant::now();
        for _ in 0..ROUNDS {
            out.clear();
            for _ in 0..BATCH {
                let p = mqttbytes::v5::Publish {
                    dup: false,
                    qos: mqttbytes::QoS::AtLeastOnce,
                    retain: false,
                    topic: TOPIC.to_owned(),
                    pkid: 7,
                    payload: pl.clone(),
                    properties: Some(mqttbytes::v5::PublishProperties {
                        payload_format_indicator: Some(1),
                        message_expiry_interval: Some(60),
                        topic_alias: None,
                        response_topic: Some("replies/abc".into()),
                        correlation_data: Some(Bytes::from_static(b"corr-1234")),
                        user_properties: vec![("unit".into(), "celsius".into())],
                        subscription_identifiers: vec![],
                        content_type: Some("application/json".into()),
                    }),
                };
                p.write(&mut out).unwrap();
            }
            std::hint::black_box(&out);
        }
        report("encode v5 mqttbytes 0.6", t);
        let t = Instant::now();
        for _ in 0..ROUNDS {
            out.clear();
            let mut c = rmqtt_codec::v5::Codec::new(0, 0);
            for _ in 0..BATCH {
                let props = rmqtt_codec::v5::PublishProperties {
                    topic_alias: None,
                    correlation_data: Some(Bytes::from_static(b"corr-1234")),
                    message_expiry_interval: std::num::NonZeroU32::new(60),
                    content_type: Some("application/json".into()),
                    user_properties: vec![("unit".into(), "celsius".into())],
                    is_utf8_payload: true,
                    response_topic: Some("replies/abc".into()),
                    subscription_ids: vec![],
                };
                let p = rmqtt_codec::types::Publish {
                    dup: false,
                    retain: false,
                    qos: rmqtt_codec::types::QoS::AtLeastOnce,
                    topic: TOPIC.into(),
                    packet_id: std::num::NonZeroU16::new(7),
                    payload: pl.clone(),
                    properties: Some(props),
                };
                c.encode(rmqtt_codec::v5::Packet::Publish(Box::new(p)), &mut out).unwrap();
            }
            std::hint::black_box(&out);
        }
        report("encode v5 rmqtt-codec v5", t);
        println!("--");
    }
}
