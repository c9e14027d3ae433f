//! The MQTT-SN gateway fed the fuzz input as datagrams from two clients over loopback UDP,
//! against a fresh `tolk_core::Router`.
//!
//! Input: a sequence of datagrams, each introduced by one byte: bit 7 picks the client socket
//! (0 or 1), bits 0-6 are the datagram's length, 127 meaning "the next two bytes, big-endian".
//! A length past the end of the input takes what is left. Every 32 datagrams, and at the end, a
//! third socket sends SEARCHGW and must get GWINFO back: the gateway's single task is alive and
//! has handled everything sent before it (it reads its socket in order), and its receive buffer
//! never overflows, so an input always runs the same way. Then the gateway must stop at
//! shutdown.
#![no_main]

use std::net::SocketAddr;

use libfuzzer_sys::fuzz_target;
use tokio::net::UdpSocket;
use tolk_core::frontend::{FrontEnd, FrontEndContext};
use tolk_fuzz::{data_dir, router, runtime, stop, within};
use tolk_mqttsn::{MqttSnConfig, MqttSnFrontEnd, REGISTRY_FILE};

/// SEARCHGW with radius 0 (MQTT-SN 1.2 §5.4.2).
const SEARCHGW: [u8; 3] = [3, 0x01, 0];
/// Datagrams sent between two liveness probes.
const PROBE_EVERY: usize = 32;

fn datagrams(mut data: &[u8]) -> Vec<(usize, &[u8])> {
    let mut out = Vec::new();
    while let Some((&head, rest)) = data.split_first() {
        let client = usize::from(head >> 7);
        let (len, rest) = match head & 0x7f {
            0x7f => match rest {
                [hi, lo, tail @ ..] => (usize::from(u16::from_be_bytes([*hi, *lo])), tail),
                _ => (rest.len(), rest),
            },
            n => (usize::from(n), rest),
        };
        let (datagram, tail) = rest.split_at(len.min(rest.len()));
        out.push((client, datagram));
        data = tail;
    }
    out
}

async fn probe(socket: &UdpSocket, gateway: SocketAddr) {
    within("MQTT-SN gateway answering SEARCHGW", async {
        socket.send_to(&SEARCHGW, gateway).await.expect("send SEARCHGW");
        let mut buf = [0u8; 64];
        let (len, from) = socket.recv_from(&mut buf).await.expect("receive GWINFO");
        assert_eq!(from, gateway);
        // GWINFO (0x02) from the gateway: Length, MsgType, GwId.
        assert_eq!(buf.get(..2), Some(&[3u8, 0x02][..]), "answer to SEARCHGW: {:02x?}", &buf[..len]);
    })
    .await;
}

fuzz_target!(|data: &[u8]| {
    let datagrams = datagrams(data);
    runtime().block_on(async {
        let dir = data_dir();
        // Topic ids persist in the data directory: start every input from none.
        let _ = std::fs::remove_file(dir.join(REGISTRY_FILE));
        let ctx = FrontEndContext::new(router(), dir);
        let config =
            MqttSnConfig { bind: "127.0.0.1:0".parse().unwrap(), receive_buffer_bytes: 0, ..MqttSnConfig::default() };
        let addrs = Box::new(MqttSnFrontEnd::new(config)).start(ctx.clone()).await.expect("gateway starts").addrs;
        let gateway = addrs[0];

        let mut clients = Vec::new();
        for _ in 0..2 {
            clients.push(UdpSocket::bind("127.0.0.1:0").await.expect("bind client"));
        }
        let prober = UdpSocket::bind("127.0.0.1:0").await.expect("bind prober");

        for (i, (client, datagram)) in datagrams.iter().enumerate() {
            // Sending can fail for an empty datagram on some systems; that is not the gateway's doing.
            let _ = clients[*client].send_to(datagram, gateway).await;
            if (i + 1) % PROBE_EVERY == 0 {
                probe(&prober, gateway).await;
            }
        }
        probe(&prober, gateway).await;

        stop(&ctx, "MQTT-SN gateway").await;
    });
});
