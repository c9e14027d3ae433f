//! Both Length forms (§5.2.1) and one test per class of malformed datagram, each checking the error variant
//! and its evidence.

use bytes::{Bytes, BytesMut};
use mqttsn_codec::{
    DecodeError, Encapsulated, EncodeError, MAX_MESSAGE_LEN, Message, Publish, PublishTopic, QoS, ReturnCode, decode,
    decode_stream, encode, encoded_len,
};

fn publish(data_len: usize) -> Message {
    Message::Publish(Publish {
        dup: false,
        qos: QoS::Zero,
        retain: false,
        topic: PublishTopic::Normal(1),
        msg_id: 0,
        data: Bytes::from(vec![0xA5; data_len]),
    })
}

fn encoded(message: &Message) -> BytesMut {
    let mut out = BytesMut::new();
    encode(message, &mut out).expect("encodable");
    out
}

// --- Length field: both forms -------------------------------------------------------------------------

#[test]
fn a_2_kib_publish_uses_the_three_octet_length() {
    let message = publish(2048);
    let out = encoded(&message);
    // 0x01, then 16-bit total: 3 (Length) + 1 (MsgType) + 1 (Flags) + 2 (TopicId) + 2 (MsgId) + 2048.
    assert_eq!(out.len(), 2057);
    assert_eq!(&out[..4], &[0x01, 0x08, 0x09, 0x0C]);
    assert_eq!(encoded_len(&message), 2057);
    assert_eq!(decode(&out), Ok(message));
}

#[test]
fn the_short_form_is_used_up_to_255_octets_and_the_long_form_from_256() {
    // PUBLISH header without data is 7 octets in the short form.
    let largest_short = encoded(&publish(255 - 7));
    assert_eq!(largest_short.len(), 255);
    assert_eq!(largest_short[0], 0xFF);

    // One more data octet: 256 in the short form does not fit, so 3 + 1 + 5 + 249 = 258.
    let smallest_long = encoded(&publish(255 - 7 + 1));
    assert_eq!(smallest_long.len(), 258);
    assert_eq!(&smallest_long[..3], &[0x01, 0x01, 0x02]);
    assert_eq!(decode(&smallest_long), Ok(publish(249)));
}

#[test]
fn the_long_form_is_accepted_for_a_message_that_would_fit_the_short_form() {
    // PUBCOMP MsgId 3 (§5.4.14) with Length 0x01 0x00 0x06.
    assert_eq!(decode(&[0x01, 0x00, 0x06, 0x0E, 0x00, 0x03]), Ok(Message::PubComp { msg_id: 3 }));
    // The smallest long-form message: 4 octets, header only.
    assert_eq!(decode(&[0x01, 0x00, 0x04, 0x17]), Ok(Message::PingResp));
}

#[test]
fn the_largest_message_fits_exactly_and_one_more_octet_is_refused_by_the_encoder() {
    let largest = publish(MAX_MESSAGE_LEN - 9);
    let out = encoded(&largest);
    assert_eq!(out.len(), MAX_MESSAGE_LEN);
    assert_eq!(&out[..3], &[0x01, 0xFF, 0xFF]);
    assert_eq!(decode(&out), Ok(largest));

    let mut out = BytesMut::from(&b"keep"[..]);
    assert_eq!(
        encode(&publish(MAX_MESSAGE_LEN - 8), &mut out),
        Err(EncodeError::TooLarge { message: "PUBLISH", length: MAX_MESSAGE_LEN + 1 })
    );
    assert_eq!(&out[..], b"keep", "nothing written on error");
}

// --- Bad Length values ----------------------------------------------------------------------------------

#[test]
fn an_empty_datagram_is_truncated_at_the_length_field() {
    assert_eq!(
        decode(&[]),
        Err(DecodeError::Truncated { message: "header", field: "Length", offset: 0, needed: 1, available: 0 })
    );
}

#[test]
fn length_zero_is_rejected() {
    assert_eq!(decode(&[0x00, 0x17]), Err(DecodeError::LengthTooSmall { offset: 0, declared: 0, minimum: 2 }));
}

#[test]
fn the_long_form_marker_without_its_two_octets_is_truncated() {
    for datagram in [&[0x01][..], &[0x01, 0x00][..]] {
        assert_eq!(
            decode(datagram),
            Err(DecodeError::Truncated {
                message: "header",
                field: "Length (3-octet form)",
                offset: 0,
                needed: 3,
                available: datagram.len()
            })
        );
    }
}

#[test]
fn a_long_form_length_smaller_than_its_own_header_is_rejected() {
    for declared in 0..4u8 {
        assert_eq!(
            decode(&[0x01, 0x00, declared, 0x17]),
            Err(DecodeError::LengthTooSmall { offset: 0, declared: usize::from(declared), minimum: 4 })
        );
    }
}

#[test]
fn a_length_of_two_without_the_msgtype_octet_exceeds_the_datagram() {
    assert_eq!(decode(&[0x02]), Err(DecodeError::LengthExceedsDatagram { offset: 0, declared: 2, received: 1 }));
}

#[test]
fn a_length_larger_than_the_datagram_is_rejected() {
    assert_eq!(
        decode(&[0x05, 0x18, 0x00, 0x10]),
        Err(DecodeError::LengthExceedsDatagram { offset: 0, declared: 5, received: 4 })
    );
}

#[test]
fn octets_after_the_declared_length_are_rejected() {
    assert_eq!(decode(&[0x02, 0x17, 0x00]), Err(DecodeError::TrailingBytes { offset: 0, declared: 2, received: 3 }));
}

#[test]
fn a_length_too_small_for_the_fields_is_truncated_at_the_field() {
    // ADVERTISE (§5.4.1) declaring 4 octets: Duration needs 2 but only 1 is inside the message.
    assert_eq!(
        decode(&[0x04, 0x00, 0x01, 0x03]),
        Err(DecodeError::Truncated { message: "ADVERTISE", field: "Duration", offset: 3, needed: 2, available: 1 })
    );
}

#[test]
fn a_fixed_size_message_with_extra_octets_inside_its_length_is_rejected() {
    // CONNACK (§5.4.5) is 3 octets; this one declares and carries 4.
    assert_eq!(
        decode(&[0x04, 0x05, 0x00, 0x00]),
        Err(DecodeError::UnexpectedBytes { message: "CONNACK", offset: 3, extra: 1 })
    );
}

#[test]
fn a_one_octet_disconnect_duration_is_truncated() {
    assert!(matches!(
        decode(&[0x03, 0x18, 0x0E]),
        Err(DecodeError::Truncated { message: "DISCONNECT", field: "Duration", .. })
    ));
}

// --- Types, flags, strings --------------------------------------------------------------------------------

#[test]
fn reserved_message_types_are_unknown_and_carry_the_type_octet() {
    for msg_type in [0x03, 0x11, 0x19, 0x1E, 0x80, 0xFD, 0xFF] {
        assert_eq!(decode(&[0x02, msg_type]), Err(DecodeError::UnknownMessageType { msg_type, offset: 1 }));
    }
    // In the long form the MsgType octet is at offset 3.
    assert_eq!(decode(&[0x01, 0x00, 0x04, 0x03]), Err(DecodeError::UnknownMessageType { msg_type: 0x03, offset: 3 }));
}

#[test]
fn reserved_topic_id_type_is_rejected_where_the_field_is_used() {
    // PUBLISH, SUBSCRIBE and UNSUBSCRIBE with TopicIdType 0b11.
    for (message, datagram) in [
        ("PUBLISH", vec![0x07, 0x0C, 0x03, 0x00, 0x01, 0x00, 0x00]),
        ("SUBSCRIBE", vec![0x07, 0x12, 0x03, 0x00, 0x01, 0x00, 0x01]),
        ("UNSUBSCRIBE", vec![0x07, 0x14, 0x03, 0x00, 0x01, 0x00, 0x01]),
    ] {
        assert_eq!(decode(&datagram), Err(DecodeError::ReservedTopicIdType { message, offset: 2 }));
    }
}

#[test]
fn topic_id_type_bits_are_ignored_where_the_spec_says_not_used() {
    // CONNECT (§5.4.4: TopicIdType not used) with 0b11 in bits 1-0.
    let connect = decode(&[0x07, 0x04, 0x07, 0x01, 0x00, 0x3C, b'c']).unwrap();
    let Message::Connect(c) = connect else { panic!("not a CONNECT") };
    assert!(c.clean_session && !c.will);
}

#[test]
fn reserved_return_codes_are_kept() {
    assert_eq!(decode(&[0x03, 0x05, 0x07]), Ok(Message::ConnAck { return_code: ReturnCode::Reserved(0x07) }));
    for value in 0..=u8::MAX {
        assert_eq!(ReturnCode::from_u8(value).to_u8(), value);
    }
}

#[test]
fn invalid_utf8_in_a_topic_name_or_client_id_is_rejected_with_its_position() {
    // REGISTER (§5.4.10) TopicName "a" + 0xFF.
    assert_eq!(
        decode(&[0x08, 0x0A, 0x00, 0x00, 0x00, 0x01, b'a', 0xFF]),
        Err(DecodeError::InvalidUtf8 { message: "REGISTER", field: "TopicName", offset: 6, bad_octet: 7 })
    );
    // CONNECT ClientId, PINGREQ ClientId, SUBSCRIBE TopicName, WILLTOPIC WillTopic.
    for datagram in [
        &[0x07, 0x04, 0x04, 0x01, 0x00, 0x3C, 0xC0][..],
        &[0x03, 0x16, 0xFE][..],
        &[0x06, 0x12, 0x00, 0x00, 0x01, 0x80][..],
        &[0x04, 0x07, 0x00, 0xFF][..],
    ] {
        assert!(matches!(decode(datagram), Err(DecodeError::InvalidUtf8 { .. })), "{datagram:02X?}");
    }
}

#[test]
fn a_short_topic_name_must_be_exactly_two_octets() {
    // SUBSCRIBE with TopicIdType short and a 1-octet name, then a 3-octet name.
    assert!(matches!(
        decode(&[0x06, 0x12, 0x02, 0x00, 0x01, b'x']),
        Err(DecodeError::Truncated { field: "TopicId", .. })
    ));
    assert!(matches!(
        decode(&[0x08, 0x12, 0x02, 0x00, 0x01, b'x', b'y', b'z']),
        Err(DecodeError::UnexpectedBytes { extra: 1, .. })
    ));
}

// --- Encapsulation (§5.5) -----------------------------------------------------------------------------

#[test]
fn an_encapsulation_without_an_inner_message_is_truncated() {
    assert_eq!(
        decode(&[0x04, 0xFE, 0x00, 0x01]),
        Err(DecodeError::Truncated { message: "header", field: "Length", offset: 4, needed: 1, available: 0 })
    );
}

#[test]
fn errors_inside_an_encapsulated_message_report_datagram_offsets() {
    // Inner PINGRESP followed by a stray octet.
    assert_eq!(
        decode(&[0x03, 0xFE, 0x00, 0x02, 0x17, 0x00]),
        Err(DecodeError::TrailingBytes { offset: 3, declared: 2, received: 3 })
    );
}

#[test]
fn nested_encapsulation_is_rejected_both_ways() {
    assert_eq!(
        decode(&[0x03, 0xFE, 0x00, 0x03, 0xFE, 0x00, 0x02, 0x17]),
        Err(DecodeError::NestedEncapsulation { offset: 3 })
    );
    let nested = Message::Encapsulated(Encapsulated {
        ctrl: 0,
        wireless_node_id: Bytes::new(),
        message: Box::new(Message::Encapsulated(Encapsulated {
            ctrl: 0,
            wireless_node_id: Bytes::new(),
            message: Box::new(Message::PingResp),
        })),
    });
    let mut out = BytesMut::new();
    assert_eq!(encode(&nested, &mut out), Err(EncodeError::NestedEncapsulation));
    assert!(out.is_empty());
}

#[test]
fn deeply_nested_encapsulations_are_refused_at_the_second_level_without_recursion() {
    // 20 000 encapsulation headers, then a PINGRESP: the decoders look at two levels, whatever
    // the input's depth (decoding recurses once for the relayed message, never more).
    let mut datagram = [0x03, 0xFE, 0x00].repeat(20_000);
    datagram.extend_from_slice(&[0x02, 0x17]);
    assert_eq!(decode(&datagram), Err(DecodeError::NestedEncapsulation { offset: 3 }));
    let mut stream = BytesMut::from(&datagram[..]);
    assert_eq!(decode_stream(&mut stream, 1024), Err(DecodeError::NestedEncapsulation { offset: 3 }));
}

#[test]
fn encapsulation_radius_is_bits_1_0_of_ctrl() {
    let Ok(Message::Encapsulated(e)) = decode(&[0x03, 0xFE, 0xFE, 0x02, 0x17]) else { panic!("not an encapsulation") };
    assert_eq!(e.radius(), 2);
    assert_eq!(e.ctrl, 0xFE, "reserved bits kept");
}

// --- Stream framing limits ----------------------------------------------------------------------------

#[test]
fn the_stream_limit_is_enforced_from_the_length_field_alone() {
    // Only the three Length octets of a 2057-octet message have arrived.
    let mut buf = BytesMut::from(&[0x01, 0x08, 0x09][..]);
    assert_eq!(
        decode_stream(&mut buf, 1024),
        Err(DecodeError::MessageTooLarge { offset: 0, declared: 2057, limit: 1024 })
    );
}

#[test]
fn the_stream_limit_applies_to_the_relayed_message_of_an_encapsulation() {
    let mut buf = BytesMut::from(&[0x03, 0xFE, 0x00, 0x01, 0x08, 0x09][..]);
    assert!(matches!(decode_stream(&mut buf, 1024), Err(DecodeError::MessageTooLarge { offset: 3, .. })));
}

#[test]
fn a_zero_length_in_a_stream_is_rejected_at_once() {
    let mut buf = BytesMut::from(&[0x00][..]);
    assert!(matches!(decode_stream(&mut buf, 1024), Err(DecodeError::LengthTooSmall { declared: 0, .. })));
}
