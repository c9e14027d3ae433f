//! The gateway's UDP socket: bound with the receive buffer the configuration asks for, and the
//! datagrams the kernel dropped because that buffer was full. Those drops never reach the
//! gateway, so on Linux they are read from `/proc/net/udp` and `/proc/net/udp6` by the
//! socket's inode; elsewhere they are not counted.

use std::io;
use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;

/// A bound, non-blocking UDP socket, and the receive buffer the kernel granted (Linux reports
/// twice the bytes asked for: half is its own bookkeeping).
pub(crate) fn bind(addr: SocketAddr, receive_buffer: usize) -> io::Result<(UdpSocket, usize)> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if receive_buffer > 0 {
        socket.set_recv_buffer_size(receive_buffer)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    let granted = socket.recv_buffer_size()?;
    Ok((UdpSocket::from_std(socket.into())?, granted))
}

/// Counts a socket's kernel drops between calls.
pub(crate) struct KernelDrops {
    inode: u64,
    seen: u64,
}

impl KernelDrops {
    /// For the socket behind `fd`; `None` where the kernel does not tell (not Linux, no /proc).
    pub(crate) fn for_socket(fd: std::os::fd::RawFd) -> Option<Self> {
        let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
        let inode = link.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()?;
        let mut drops = KernelDrops { inode, seen: 0 };
        drops.seen = drops.total()?;
        Some(drops)
    }

    /// Datagrams dropped since the last call (or since `for_socket`).
    pub(crate) fn new_drops(&mut self) -> u64 {
        let Some(total) = self.total() else { return 0 };
        let new = total.saturating_sub(self.seen);
        self.seen = total;
        new
    }

    fn total(&self) -> Option<u64> {
        ["/proc/net/udp", "/proc/net/udp6"]
            .iter()
            .filter_map(|path| std::fs::read_to_string(path).ok())
            .find_map(|table| drops_in(&table, self.inode))
    }
}

/// How often kernel drops are read and counted.
const DROPS_PERIOD: std::time::Duration = std::time::Duration::from_secs(1);

/// Counts kernel drops into `tolk_messages_dropped_total{protocol="mqttsn",
/// reason="receive_buffer_full"}` and logs them, once a period at most, until shutdown.
pub(crate) async fn count_drops(
    mut drops: KernelDrops,
    metrics: std::sync::Arc<tolk_core::Metrics>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut tick = tokio::time::interval(DROPS_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let new = drops.new_drops();
        if new > 0 {
            metrics.protocol(tolk_core::Protocol::MqttSn).dropped(tolk_core::DropReason::ReceiveBufferFull, new);
            tracing::warn!(
                dropped = new,
                "the kernel dropped MQTT-SN datagrams: the receive buffer was full; raise \
                 [mqttsn] receive_buffer_bytes (and net.core.rmem_max)"
            );
        }
    }
}

/// The `drops` column of the row for `inode` in a `/proc/net/udp` table (columns: sl,
/// local_address, rem_address, st, tx_queue:rx_queue, tr:tm->when, retrnsmt, uid, timeout,
/// inode, ref, pointer, drops).
fn drops_in(table: &str, inode: u64) -> Option<u64> {
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.get(9)?.parse::<u64>().ok()? == inode).then(|| fields.get(12)?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use super::*;

    #[test]
    fn the_drops_column_is_read_for_the_right_inode() {
        let table = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
            \x20 12: 0100007F:075C 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4711 2 0000000000000000 0\n\
            \x20 13: 0100007F:075D 00000000:0000 07 00000000:00033400 00:00000000 00000000     0        0 4712 2 0000000000000000 38\n";
        assert_eq!(drops_in(table, 4712), Some(38));
        assert_eq!(drops_in(table, 4711), Some(0));
        assert_eq!(drops_in(table, 9), None);
        assert_eq!(drops_in("garbage\nrow without enough fields", 1), None);
    }

    #[tokio::test]
    async fn a_full_receive_buffer_shows_as_kernel_drops() {
        let (socket, granted) = bind("127.0.0.1:0".parse().unwrap(), 4096).unwrap();
        assert!(granted >= 2048, "granted {granted}");
        let Some(mut drops) = KernelDrops::for_socket(socket.as_raw_fd()) else {
            eprintln!("no /proc/net/udp here: kernel drops are not counted");
            return;
        };
        assert_eq!(drops.new_drops(), 0);
        // Nobody reads: a few KiB of buffer cannot hold 200 datagrams of 1 KiB.
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..200 {
            sender.send_to(&[0u8; 1024], socket.local_addr().unwrap()).unwrap();
        }
        let dropped = drops.new_drops();
        assert!(dropped > 100, "only {dropped} of 200 dropped");
        assert_eq!(drops.new_drops(), 0, "counted once");
    }
}
