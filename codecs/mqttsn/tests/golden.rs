//! Golden messages written octet by octet from the field tables of MQTT-SN 1.2 §5.4 and §5.5: each one must
//! decode to the expected message, encode back to the same octets, and fail to decode when cut short.

use bytes::{Bytes, BytesMut};
use mqttsn_codec::{
    Advertise, Connect, DEFAULT_MAX_MESSAGE_LEN, DecodeError, Encapsulated, GwInfo, Message, PubAck, Publish,
    PublishTopic, QoS, RegAck, Register, ReturnCode, SubAck, Subscribe, SubscribeTopic, Unsubscribe, WillTopic, decode,
    decode_bytes, decode_stream, encode, encoded_len,
};

/// (what, octets, message). Octet comments follow the "(octet n)" columns of each table.
fn golden() -> Vec<(&'static str, Vec<u8>, Message)> {
    vec![
        (
            // §5.4.1 Table 6: Length, MsgType, GwId, Duration (900 s).
            "ADVERTISE",
            vec![0x05, 0x00, 0x01, 0x03, 0x84],
            Message::Advertise(Advertise { gw_id: 1, duration: 900 }),
        ),
        (
            // §5.4.2 Table 7: Length, MsgType, Radius.
            "SEARCHGW",
            vec![0x03, 0x01, 0x01],
            Message::SearchGw { radius: 1 },
        ),
        (
            // §5.4.3 Table 8, sent by a gateway: no GwAdd.
            "GWINFO from a gateway",
            vec![0x03, 0x02, 0x07],
            Message::GwInfo(GwInfo { gw_id: 7, gw_add: None }),
        ),
        (
            // §5.4.3 Table 8, sent by a client: GwAdd (3:n), here an IPv4 address.
            "GWINFO from a client",
            vec![0x07, 0x02, 0x07, 192, 168, 0, 1],
            Message::GwInfo(GwInfo { gw_id: 7, gw_add: Some(Bytes::from_static(&[192, 168, 0, 1])) }),
        ),
        (
            // §5.4.4 Table 9: Flags (Will | CleanSession), ProtocolId 0x01, Duration 60, ClientId.
            "CONNECT",
            vec![0x0A, 0x04, 0x0C, 0x01, 0x00, 0x3C, b't', b'o', b'l', b'k'],
            Message::Connect(Connect {
                will: true,
                clean_session: true,
                protocol_id: 0x01,
                duration: 60,
                client_id: "tolk".into(),
            }),
        ),
        (
            // §5.4.5 Table 10: ReturnCode accepted.
            "CONNACK",
            vec![0x03, 0x05, 0x00],
            Message::ConnAck { return_code: ReturnCode::Accepted },
        ),
        (
            // §5.4.5 with a reserved ReturnCode (§5.3.10): kept, not rejected.
            "CONNACK reserved rc",
            vec![0x03, 0x05, 0x07],
            Message::ConnAck { return_code: ReturnCode::Reserved(0x07) },
        ),
        (
            // §5.4.6 Table 11: header only.
            "WILLTOPICREQ",
            vec![0x02, 0x06],
            Message::WillTopicReq,
        ),
        (
            // §5.4.7 Table 12: Flags (QoS 1, Retain), WillTopic.
            "WILLTOPIC",
            vec![0x06, 0x07, 0x30, b'w', b'/', b't'],
            Message::WillTopic(Some(WillTopic { qos: QoS::One, retain: true, topic: "w/t".into() })),
        ),
        (
            // §5.4.7: "An empty WILLTOPIC message is a WILLTOPIC message without Flags and WillTopic field".
            "empty WILLTOPIC",
            vec![0x02, 0x07],
            Message::WillTopic(None),
        ),
        (
            // §5.4.8 Table 11: header only.
            "WILLMSGREQ",
            vec![0x02, 0x08],
            Message::WillMsgReq,
        ),
        (
            // §5.4.9 Table 13: WillMsg (2:n).
            "WILLMSG",
            vec![0x05, 0x09, b'b', b'y', b'e'],
            Message::WillMsg { will_msg: Bytes::from_static(b"bye") },
        ),
        (
            // §5.4.10 Table 14: TopicId 0x0000 (from a client), MsgId 1, TopicName.
            "REGISTER",
            vec![0x09, 0x0A, 0x00, 0x00, 0x00, 0x01, b'a', b'/', b'b'],
            Message::Register(Register { topic_id: 0, msg_id: 1, topic_name: "a/b".into() }),
        ),
        (
            // §5.4.11 Table 15: TopicId 42, MsgId 1, ReturnCode accepted.
            "REGACK",
            vec![0x07, 0x0B, 0x00, 0x2A, 0x00, 0x01, 0x00],
            Message::RegAck(RegAck { topic_id: 42, msg_id: 1, return_code: ReturnCode::Accepted }),
        ),
        (
            // §5.4.12 Table 16: Flags QoS 1 + normal topic id, TopicId 42, MsgId 2, Data.
            "PUBLISH normal",
            vec![0x09, 0x0C, 0x20, 0x00, 0x2A, 0x00, 0x02, b'h', b'i'],
            Message::Publish(Publish {
                dup: false,
                qos: QoS::One,
                retain: false,
                topic: PublishTopic::Normal(42),
                msg_id: 2,
                data: Bytes::from_static(b"hi"),
            }),
        ),
        (
            // §5.4.12 with TopicIdType short (0b10) and QoS -1 (0b11): TopicId holds the two-octet name.
            "PUBLISH short QoS -1",
            vec![0x08, 0x0C, 0x62, b'a', b'b', 0x00, 0x00, 0x7F],
            Message::Publish(Publish {
                dup: false,
                qos: QoS::MinusOne,
                retain: false,
                topic: PublishTopic::Short(*b"ab"),
                msg_id: 0,
                data: Bytes::from_static(&[0x7F]),
            }),
        ),
        (
            // §5.4.12 with DUP, QoS 2, Retain, TopicIdType pre-defined (0b01), empty Data.
            "PUBLISH predefined",
            vec![0x07, 0x0C, 0xD1, 0x00, 0x05, 0x12, 0x34],
            Message::Publish(Publish {
                dup: true,
                qos: QoS::Two,
                retain: true,
                topic: PublishTopic::Predefined(5),
                msg_id: 0x1234,
                data: Bytes::new(),
            }),
        ),
        (
            // §5.4.13 Table 17: TopicId 42, MsgId 2, ReturnCode invalid topic id.
            "PUBACK",
            vec![0x07, 0x0D, 0x00, 0x2A, 0x00, 0x02, 0x02],
            Message::PubAck(PubAck { topic_id: 42, msg_id: 2, return_code: ReturnCode::InvalidTopicId }),
        ),
        (
            // §5.4.14 Table 18: MsgId.
            "PUBCOMP",
            vec![0x04, 0x0E, 0x00, 0x03],
            Message::PubComp { msg_id: 3 },
        ),
        ("PUBREC", vec![0x04, 0x0F, 0x00, 0x03], Message::PubRec { msg_id: 3 }),
        ("PUBREL", vec![0x04, 0x10, 0x00, 0x03], Message::PubRel { msg_id: 3 }),
        (
            // §5.4.15 Table 19: Flags QoS 1 + topic name, MsgId 4, TopicName (5:n).
            "SUBSCRIBE name",
            vec![0x08, 0x12, 0x20, 0x00, 0x04, b's', b'/', b'#'],
            Message::Subscribe(Subscribe {
                dup: false,
                qos: QoS::One,
                msg_id: 4,
                topic: SubscribeTopic::Name("s/#".into()),
            }),
        ),
        (
            // §5.4.15 with TopicIdType pre-defined: TopicId (5-6).
            "SUBSCRIBE predefined",
            vec![0x07, 0x12, 0x01, 0x00, 0x05, 0x00, 0x07],
            Message::Subscribe(Subscribe {
                dup: false,
                qos: QoS::Zero,
                msg_id: 5,
                topic: SubscribeTopic::Predefined(7),
            }),
        ),
        (
            // §5.4.15 with DUP, QoS 2, TopicIdType short: the short name in (5-6).
            "SUBSCRIBE short",
            vec![0x07, 0x12, 0xC2, 0x00, 0x06, b'x', b'y'],
            Message::Subscribe(Subscribe { dup: true, qos: QoS::Two, msg_id: 6, topic: SubscribeTopic::Short(*b"xy") }),
        ),
        (
            // §5.4.16 Table 20: Flags (granted QoS 1), TopicId 42, MsgId 4, ReturnCode.
            "SUBACK",
            vec![0x08, 0x13, 0x20, 0x00, 0x2A, 0x00, 0x04, 0x00],
            Message::SubAck(SubAck { qos: QoS::One, topic_id: 42, msg_id: 4, return_code: ReturnCode::Accepted }),
        ),
        (
            // §5.4.17 (Table 19 layout): Flags topic name, MsgId 7, TopicName.
            "UNSUBSCRIBE name",
            vec![0x08, 0x14, 0x00, 0x00, 0x07, b's', b'/', b'#'],
            Message::Unsubscribe(Unsubscribe { msg_id: 7, topic: SubscribeTopic::Name("s/#".into()) }),
        ),
        (
            // §5.4.17 with TopicIdType short.
            "UNSUBSCRIBE short",
            vec![0x07, 0x14, 0x02, 0x00, 0x08, b'x', b'y'],
            Message::Unsubscribe(Unsubscribe { msg_id: 8, topic: SubscribeTopic::Short(*b"xy") }),
        ),
        (
            // §5.4.18 Table 21: MsgId.
            "UNSUBACK",
            vec![0x04, 0x15, 0x00, 0x07],
            Message::UnsubAck { msg_id: 7 },
        ),
        (
            // §5.4.19 Table 22 without the optional ClientId.
            "PINGREQ",
            vec![0x02, 0x16],
            Message::PingReq { client_id: None },
        ),
        (
            // §5.4.19 with ClientId: a sleeping client checking for buffered messages.
            "PINGREQ with ClientId",
            vec![0x06, 0x16, b't', b'o', b'l', b'k'],
            Message::PingReq { client_id: Some("tolk".into()) },
        ),
        (
            // §5.4.20 Table 23: header only.
            "PINGRESP",
            vec![0x02, 0x17],
            Message::PingResp,
        ),
        (
            // §5.4.21 Table 24 without the optional Duration.
            "DISCONNECT",
            vec![0x02, 0x18],
            Message::Disconnect { duration: None },
        ),
        (
            // §5.4.21 with Duration 3600 s: the client goes to sleep.
            "DISCONNECT with Duration",
            vec![0x04, 0x18, 0x0E, 0x10],
            Message::Disconnect { duration: Some(3600) },
        ),
        (
            // §5.4.22 Table 25: Flags (QoS 1, Retain), WillTopic.
            "WILLTOPICUPD",
            vec![0x06, 0x1A, 0x30, b'w', b'/', b't'],
            Message::WillTopicUpd(Some(WillTopic { qos: QoS::One, retain: true, topic: "w/t".into() })),
        ),
        (
            // §5.4.22: the empty WILLTOPICUPD deletes the will topic and will message.
            "empty WILLTOPICUPD",
            vec![0x02, 0x1A],
            Message::WillTopicUpd(None),
        ),
        (
            // §5.4.24 Table 27: ReturnCode.
            "WILLTOPICRESP",
            vec![0x03, 0x1B, 0x00],
            Message::WillTopicResp { return_code: ReturnCode::Accepted },
        ),
        (
            // §5.4.23 Table 26: WillMsg.
            "WILLMSGUPD",
            vec![0x05, 0x1C, b'n', b'e', b'w'],
            Message::WillMsgUpd { will_msg: Bytes::from_static(b"new") },
        ),
        (
            // §5.4.25 Table 27: ReturnCode not supported.
            "WILLMSGRESP",
            vec![0x03, 0x1D, 0x03],
            Message::WillMsgResp { return_code: ReturnCode::NotSupported },
        ),
        (
            // §5.5 Table 28: Length (up to the end of Wireless Node Id), 0xFE, Ctrl (radius 1),
            // Wireless Node Id 0x1234, then a whole PINGREQ.
            "Encapsulated PINGREQ",
            vec![0x05, 0xFE, 0x01, 0x12, 0x34, 0x02, 0x16],
            Message::Encapsulated(Encapsulated {
                ctrl: 0x01,
                wireless_node_id: Bytes::from_static(&[0x12, 0x34]),
                message: Box::new(Message::PingReq { client_id: None }),
            }),
        ),
        (
            // §5.5 relaying a CONNECT, with an empty Wireless Node Id.
            "Encapsulated CONNECT",
            vec![0x03, 0xFE, 0x00, 0x0A, 0x04, 0x04, 0x01, 0x00, 0x3C, b't', b'o', b'l', b'k'],
            Message::Encapsulated(Encapsulated {
                ctrl: 0,
                wireless_node_id: Bytes::new(),
                message: Box::new(Message::Connect(Connect {
                    will: false,
                    clean_session: true,
                    protocol_id: 1,
                    duration: 60,
                    client_id: "tolk".into(),
                })),
            }),
        ),
    ]
}

#[test]
fn every_message_type_of_table_3_has_a_golden_message() {
    let mut seen: Vec<u8> = golden().iter().map(|(_, _, m)| m.msg_type().to_u8()).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 28, "types covered: {seen:02X?}");
}

#[test]
fn golden_messages_decode_from_slices_and_from_bytes() {
    for (what, octets, expected) in golden() {
        assert_eq!(decode(&octets).as_ref(), Ok(&expected), "{what}");
        assert_eq!(decode_bytes(Bytes::from(octets.clone())).as_ref(), Ok(&expected), "{what}");
    }
}

#[test]
fn golden_messages_encode_to_the_same_octets() {
    for (what, octets, message) in golden() {
        let mut out = BytesMut::new();
        encode(&message, &mut out).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(&out[..], &octets[..], "{what}");
        assert_eq!(encoded_len(&message), octets.len(), "{what}");
    }
}

#[test]
fn encode_appends_after_existing_content() {
    let mut out = BytesMut::from(&b"xx"[..]);
    encode(&Message::PingResp, &mut out).unwrap();
    assert_eq!(&out[..], b"xx\x02\x17");
}

#[test]
fn every_strict_prefix_of_every_golden_message_is_rejected() {
    for (what, octets, _) in golden() {
        for cut in 0..octets.len() {
            let result = decode(&octets[..cut]);
            assert!(result.is_err(), "{what} cut at {cut} decoded as {result:?}");
        }
    }
}

#[test]
fn a_truncated_datagram_reports_declared_and_received_lengths() {
    // PUBLISH normal cut after 5 of its 9 octets.
    let octets = [0x09, 0x0C, 0x20, 0x00, 0x2A];
    assert_eq!(decode(&octets), Err(DecodeError::LengthExceedsDatagram { offset: 0, declared: 9, received: 5 }));
}

#[test]
fn decode_bytes_shares_the_payload_with_the_datagram() {
    let datagram = Bytes::from(vec![0x09, 0x0C, 0x20, 0x00, 0x2A, 0x00, 0x02, b'h', b'i']);
    let Ok(Message::Publish(p)) = decode_bytes(datagram.clone()) else {
        panic!("not a PUBLISH");
    };
    assert_eq!(p.data.as_ptr(), datagram[7..].as_ptr());
}

#[test]
fn stream_decoding_of_every_golden_message_split_at_every_offset() {
    for (what, octets, expected) in golden() {
        for split in 0..octets.len() {
            let mut buf = BytesMut::from(&octets[..split]);
            assert_eq!(decode_stream(&mut buf, DEFAULT_MAX_MESSAGE_LEN), Ok(None), "{what} first {split} octets");
            assert_eq!(buf.len(), split, "{what}: nothing consumed while incomplete");
            buf.extend_from_slice(&octets[split..]);
            assert_eq!(
                decode_stream(&mut buf, DEFAULT_MAX_MESSAGE_LEN).as_ref(),
                Ok(&Some(expected.clone())),
                "{what} split at {split}"
            );
            assert!(buf.is_empty(), "{what}: consumed exactly one message");
        }
    }
}

#[test]
fn stream_decoding_takes_back_to_back_messages_one_at_a_time() {
    let mut buf = BytesMut::new();
    let all = golden();
    for (_, octets, _) in &all {
        buf.extend_from_slice(octets);
    }
    for (what, _, expected) in all {
        assert_eq!(decode_stream(&mut buf, DEFAULT_MAX_MESSAGE_LEN), Ok(Some(expected)), "{what}");
    }
    assert!(buf.is_empty());
}
