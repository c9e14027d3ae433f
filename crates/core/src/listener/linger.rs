//! A clean close: after the last frame (an MQTT DISCONNECT with its reason, a STOMP ERROR),
//! half-close and read-and-discard for a moment before dropping the socket.
//!
//! Closing a socket with unread input makes the kernel send RST, which can destroy the last
//! frame before the client reads it: the client sees a broken pipe instead of the reason.
//! Half-closing and draining lets it read the frame, then EOF.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// How long the broker keeps reading and discarding after its last frame.
pub const LINGER: Duration = Duration::from_secs(1);
/// Most bytes discarded while lingering.
pub const LINGER_BYTES: usize = 1024 * 1024;

/// Half-closes `writer`, then discards what `reader` still brings until the client closes, for
/// at most [`LINGER`] or [`LINGER_BYTES`]. At shutdown it only half-closes.
pub async fn linger<R, W>(reader: &mut R, writer: &mut W, shutdown: &CancellationToken)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    if shutdown.is_cancelled() {
        let _ = tokio::time::timeout(Duration::from_millis(100), writer.shutdown()).await;
        return;
    }
    let drain = async {
        let _ = writer.shutdown().await;
        // On the heap: a buffer on the stack would be part of every connection's task.
        let mut sink = vec![0u8; 4096];
        let mut total = 0;
        while let Ok(n) = reader.read(&mut sink).await {
            total += n;
            if n == 0 || total > LINGER_BYTES {
                break;
            }
        }
    };
    tokio::select! {
        _ = shutdown.cancelled() => {}
        _ = tokio::time::timeout(LINGER, drain) => {}
    }
}
