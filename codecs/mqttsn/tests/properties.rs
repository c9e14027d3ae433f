//! Property tests: encode → decode is the identity on arbitrary messages, and no input makes the decoders
//! panic.

use bytes::{Bytes, BytesMut};
use mqttsn_codec::{
    Advertise, Connect, Encapsulated, GwInfo, Message, PubAck, Publish, PublishTopic, QoS, RegAck, Register,
    ReturnCode, SubAck, Subscribe, SubscribeTopic, Unsubscribe, WillTopic, decode, decode_bytes, decode_stream, encode,
    encoded_len,
};
use proptest::prelude::*;

fn qos() -> impl Strategy<Value = QoS> {
    prop_oneof![Just(QoS::MinusOne), Just(QoS::Zero), Just(QoS::One), Just(QoS::Two)]
}

fn return_code() -> impl Strategy<Value = ReturnCode> {
    prop_oneof![
        Just(ReturnCode::Accepted),
        Just(ReturnCode::Congestion),
        Just(ReturnCode::InvalidTopicId),
        Just(ReturnCode::NotSupported),
        (4..=u8::MAX).prop_map(ReturnCode::Reserved),
    ]
}

/// Up to 300 octets so that both Length forms are exercised.
fn payload() -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..300).prop_map(Bytes::from)
}

fn non_empty_payload() -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 1..40).prop_map(Bytes::from)
}

fn text() -> impl Strategy<Value = String> {
    "\\PC{0,40}"
}

fn non_empty_text() -> impl Strategy<Value = String> {
    "\\PC{1,40}"
}

fn will_topic() -> impl Strategy<Value = Option<WillTopic>> {
    prop::option::of((qos(), any::<bool>(), text()).prop_map(|(qos, retain, topic)| WillTopic { qos, retain, topic }))
}

fn subscribe_topic() -> impl Strategy<Value = SubscribeTopic> {
    prop_oneof![
        text().prop_map(SubscribeTopic::Name),
        any::<u16>().prop_map(SubscribeTopic::Predefined),
        any::<[u8; 2]>().prop_map(SubscribeTopic::Short),
    ]
}

fn publish_topic() -> impl Strategy<Value = PublishTopic> {
    prop_oneof![
        any::<u16>().prop_map(PublishTopic::Normal),
        any::<u16>().prop_map(PublishTopic::Predefined),
        any::<[u8; 2]>().prop_map(PublishTopic::Short),
    ]
}

/// Every message type except the encapsulation.
fn plain_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (any::<u8>(), any::<u16>()).prop_map(|(gw_id, duration)| Message::Advertise(Advertise { gw_id, duration })),
        any::<u8>().prop_map(|radius| Message::SearchGw { radius }),
        (any::<u8>(), prop::option::of(non_empty_payload()))
            .prop_map(|(gw_id, gw_add)| Message::GwInfo(GwInfo { gw_id, gw_add })),
        (any::<bool>(), any::<bool>(), any::<u8>(), any::<u16>(), text()).prop_map(
            |(will, clean_session, protocol_id, duration, client_id)| {
                Message::Connect(Connect { will, clean_session, protocol_id, duration, client_id })
            }
        ),
        return_code().prop_map(|return_code| Message::ConnAck { return_code }),
        Just(Message::WillTopicReq),
        will_topic().prop_map(Message::WillTopic),
        Just(Message::WillMsgReq),
        payload().prop_map(|will_msg| Message::WillMsg { will_msg }),
        (any::<u16>(), any::<u16>(), text()).prop_map(|(topic_id, msg_id, topic_name)| {
            Message::Register(Register { topic_id, msg_id, topic_name })
        }),
        (any::<u16>(), any::<u16>(), return_code())
            .prop_map(|(topic_id, msg_id, return_code)| { Message::RegAck(RegAck { topic_id, msg_id, return_code }) }),
        (any::<bool>(), qos(), any::<bool>(), publish_topic(), any::<u16>(), payload()).prop_map(
            |(dup, qos, retain, topic, msg_id, data)| {
                Message::Publish(Publish { dup, qos, retain, topic, msg_id, data })
            }
        ),
        (any::<u16>(), any::<u16>(), return_code())
            .prop_map(|(topic_id, msg_id, return_code)| { Message::PubAck(PubAck { topic_id, msg_id, return_code }) }),
        any::<u16>().prop_map(|msg_id| Message::PubComp { msg_id }),
        any::<u16>().prop_map(|msg_id| Message::PubRec { msg_id }),
        any::<u16>().prop_map(|msg_id| Message::PubRel { msg_id }),
        (any::<bool>(), qos(), any::<u16>(), subscribe_topic())
            .prop_map(|(dup, qos, msg_id, topic)| Message::Subscribe(Subscribe { dup, qos, msg_id, topic })),
        (qos(), any::<u16>(), any::<u16>(), return_code()).prop_map(|(qos, topic_id, msg_id, return_code)| {
            Message::SubAck(SubAck { qos, topic_id, msg_id, return_code })
        }),
        (any::<u16>(), subscribe_topic())
            .prop_map(|(msg_id, topic)| Message::Unsubscribe(Unsubscribe { msg_id, topic })),
        any::<u16>().prop_map(|msg_id| Message::UnsubAck { msg_id }),
        prop::option::of(non_empty_text()).prop_map(|client_id| Message::PingReq { client_id }),
        Just(Message::PingResp),
        prop::option::of(any::<u16>()).prop_map(|duration| Message::Disconnect { duration }),
        will_topic().prop_map(Message::WillTopicUpd),
        return_code().prop_map(|return_code| Message::WillTopicResp { return_code }),
        payload().prop_map(|will_msg| Message::WillMsgUpd { will_msg }),
        return_code().prop_map(|return_code| Message::WillMsgResp { return_code }),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        4 => plain_message(),
        1 => (any::<u8>(), prop::collection::vec(any::<u8>(), 0..8), plain_message()).prop_map(
            |(ctrl, node, inner)| Message::Encapsulated(Encapsulated {
                ctrl,
                wireless_node_id: Bytes::from(node),
                message: Box::new(inner),
            })
        ),
    ]
}

proptest! {
    #[test]
    fn encode_then_decode_is_the_identity(message in message()) {
        let mut out = BytesMut::new();
        encode(&message, &mut out).expect("every generated message fits");
        prop_assert_eq!(out.len(), encoded_len(&message));
        prop_assert_eq!(decode(&out), Ok(message.clone()));
        prop_assert_eq!(decode_bytes(out.clone().freeze()), Ok(message.clone()));
        let mut stream = out.clone();
        prop_assert_eq!(decode_stream(&mut stream, usize::MAX), Ok(Some(message)));
        prop_assert!(stream.is_empty());
    }

    #[test]
    fn every_strict_prefix_of_an_encoded_message_is_rejected(message in message()) {
        let mut out = BytesMut::new();
        encode(&message, &mut out).expect("every generated message fits");
        for cut in 0..out.len() {
            prop_assert!(decode(&out[..cut]).is_err(), "cut at {}", cut);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(octets in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode(&octets);
        let _ = decode_bytes(Bytes::from(octets.clone()));
        let mut buf = BytesMut::from(&octets[..]);
        // Drain the stream until it needs more input or fails.
        while let Ok(Some(_)) = decode_stream(&mut buf, 512) {}
    }

    #[test]
    fn whatever_decodes_re_encodes_to_something_that_decodes_the_same(
        octets in prop::collection::vec(any::<u8>(), 0..64)
    ) {
        if let Ok(message) = decode(&octets) {
            let mut out = BytesMut::new();
            encode(&message, &mut out).expect("a decoded message is encodable");
            prop_assert_eq!(decode(&out), Ok(message));
        }
    }

    #[test]
    fn arbitrary_message_types_with_plausible_lengths_never_panic(
        msg_type in any::<u8>(),
        body in prop::collection::vec(any::<u8>(), 0..40),
        long_form in any::<bool>(),
    ) {
        // Random bytes rarely carry a consistent Length; build one so the body parsers are exercised too.
        let mut octets = Vec::with_capacity(body.len() + 4);
        if long_form {
            let total = u16::try_from(body.len() + 4).unwrap_or(u16::MAX);
            octets.push(0x01);
            octets.extend_from_slice(&total.to_be_bytes());
        } else {
            octets.push(u8::try_from(body.len() + 2).unwrap_or(u8::MAX));
        }
        octets.push(msg_type);
        octets.extend_from_slice(&body);
        let _ = decode(&octets);
    }
}
