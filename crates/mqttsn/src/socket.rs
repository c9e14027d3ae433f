//! The gateway's UDP socket: bound with the receive buffer the configuration asks for, and the
//! datagrams the kernel dropped because that buffer was full. Those drops never reach the
//! gateway, so on Linux they are read from the socket itself (`SO_MEMINFO`, Linux 4.12);
//! elsewhere they are not counted.
//!
//! `/proc/net/udp` has the same counter, but reading it walks every UDP socket of the network
//! namespace: with 10,000 client sockets on the same host (a load test) that took a tenth of the
//! gateway's core, in bursts long enough to overflow the very buffer it was watching.

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
    /// A duplicate of the socket's descriptor: the same socket, kept open as long as this is.
    socket: std::os::fd::OwnedFd,
    seen: u32,
}

impl KernelDrops {
    /// For `socket`; `None` where the kernel does not tell (not Linux, or older than 4.12).
    pub(crate) fn for_socket(socket: &impl std::os::fd::AsFd) -> Option<Self> {
        let socket = socket.as_fd().try_clone_to_owned().ok()?;
        let seen = total(&socket)?;
        Some(KernelDrops { socket, seen })
    }

    /// Datagrams dropped since the last call (or since `for_socket`).
    pub(crate) fn new_drops(&mut self) -> u64 {
        let Some(total) = total(&self.socket) else { return 0 };
        // The kernel's counter is 32 bits and wraps.
        let new = total.wrapping_sub(self.seen);
        self.seen = total;
        u64::from(new)
    }
}

/// The socket's drop counter (`SK_MEMINFO_DROPS` of `SO_MEMINFO`).
#[cfg(target_os = "linux")]
fn total(socket: &std::os::fd::OwnedFd) -> Option<u32> {
    use std::os::fd::AsRawFd;
    const DROPS: usize = libc::SK_MEMINFO_DROPS as usize;
    let mut meminfo = [0u32; DROPS + 1];
    let mut len = std::mem::size_of_val(&meminfo) as libc::socklen_t;
    // SAFETY: `meminfo` is valid for writes of `len` bytes, the kernel writes at most `len` and
    // says how many in `len`, and the descriptor is open for as long as `socket` is borrowed.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::getsockopt(socket.as_raw_fd(), libc::SOL_SOCKET, libc::SO_MEMINFO, meminfo.as_mut_ptr().cast(), &mut len)
    };
    (rc == 0 && len as usize == std::mem::size_of_val(&meminfo)).then_some(meminfo[DROPS])
}

#[cfg(not(target_os = "linux"))]
fn total(_socket: &std::os::fd::OwnedFd) -> Option<u32> {
    None
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_receive_buffer_shows_as_kernel_drops() {
        let (socket, granted) = bind("127.0.0.1:0".parse().unwrap(), 4096).unwrap();
        assert!(granted >= 2048, "granted {granted}");
        let drops = KernelDrops::for_socket(&socket);
        if cfg!(not(target_os = "linux")) {
            assert!(drops.is_none());
            return;
        }
        let mut drops = drops.expect("SO_MEMINFO is read on Linux");
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
