//! Shared helpers for the fuzz targets: how an input picks its split points, the one tokio
//! runtime per process, and the harness that runs a real TCP front end against one client
//! connection per input.
//!
//! Panics anywhere in the process (a connection task included) abort it: `libfuzzer-sys`
//! installs a panic hook that calls `abort`, so a panic in a spawned task is a crash even
//! though tokio would otherwise catch it.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;
use tolk_core::frontend::{FrontEnd, FrontEndContext};
use tolk_core::{Metrics, Protocol, Router, RouterConfig};

/// Longest time one input may take to run to its end: the client's bytes written, the server
/// closing the connection after the client's EOF, and the front end stopping. Generous: a
/// healthy run takes milliseconds; exceeding it is reported as a hang (a panic).
pub const DEADLINE: Duration = Duration::from_secs(5);

/// Chunk lengths for feeding `len` bytes to an incremental decoder, chosen by `seed` (the
/// input's split byte): `0` feeds everything at once, `1` byte by byte, any other value chunks
/// of 1 to `seed` bytes drawn from a generator seeded by it, so that every split has a seed
/// the fuzzer can find and the same input always splits the same way.
pub fn chunks(seed: u8, len: usize) -> Vec<usize> {
    if seed == 0 {
        return vec![len];
    }
    let mut state = u32::from(seed).wrapping_mul(0x9E37_79B9) | 1;
    let mut out = Vec::new();
    let mut left = len;
    while left > 0 {
        // xorshift32: cheap and deterministic.
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let n = (1 + state as usize % usize::from(seed)).min(left);
        out.push(n);
        left -= n;
    }
    out
}

/// Feeds `wire` to an incremental decoder in `chunks` (see [`chunks`]): after each chunk is
/// appended to the buffer, `decode` runs until it asks for more (`Ok(None)`); it also sees what
/// was decoded so far. Stops at the first error, which is returned beside the items.
pub fn feed<T, E>(
    wire: &[u8],
    chunks: &[usize],
    mut decode: impl FnMut(&mut BytesMut, &[T]) -> Result<Option<T>, E>,
) -> (Vec<T>, Option<E>) {
    let mut items = Vec::new();
    let mut buf = BytesMut::new();
    let mut at = 0;
    for &n in chunks {
        buf.extend_from_slice(&wire[at..at + n]);
        at += n;
        loop {
            match decode(&mut buf, &items) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => break,
                Err(e) => return (items, Some(e)),
            }
        }
    }
    (items, None)
}

/// The process's runtime. Current-thread, so that one input runs the same way every time (no
/// scheduling between worker threads), and created once, not per input.
pub fn runtime() -> &'static Runtime {
    static RUNTIME: LazyLock<Runtime> =
        LazyLock::new(|| tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime"));
    &RUNTIME
}

/// A fresh router for one input. Short slow-consumer grace: a client that congests itself is
/// closed in a fraction of [`DEADLINE`] instead of after the default 5 s.
pub fn router() -> Router {
    let config = RouterConfig { slow_consumer_grace: Duration::from_millis(200), ..RouterConfig::default() };
    Router::new(config, Arc::new(Metrics::new()))
}

/// A per-process scratch directory for front ends that keep state on disk.
pub fn data_dir() -> PathBuf {
    static DIR: LazyLock<PathBuf> = LazyLock::new(|| {
        let dir = std::env::temp_dir().join(format!("tolk-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("fuzz data dir");
        dir
    });
    DIR.clone()
}

/// Awaits `future` or panics after [`DEADLINE`] naming `what`.
pub async fn within<F: Future>(what: &str, future: F) -> F::Output {
    match tokio::time::timeout(DEADLINE, future).await {
        Ok(output) => output,
        Err(_) => panic!("hang: {what} did not finish within {DEADLINE:?}"),
    }
}

/// Cancels the context, then checks that every task it tracks stops.
pub async fn stop(ctx: &FrontEndContext, what: &str) {
    ctx.shutdown.cancel();
    ctx.tracker.close();
    within(&format!("{what} shutdown"), ctx.tracker.wait()).await;
}

/// Runs one input against a real TCP front end: starts it on 127.0.0.1 (port 0) with a fresh
/// router, connects one client that writes `input` and then shuts its write side (EOF) while
/// reading everything the server sends, and checks that the server closes the connection, that
/// its handler has finished on its own (connection gauge back to 0) and that the front end stops
/// at shutdown, each within [`DEADLINE`].
pub fn run_tcp_session(protocol: Protocol, front_end: Box<dyn FrontEnd>, input: &[u8]) {
    runtime().block_on(async {
        let router = router();
        let ctx = FrontEndContext::new(router.clone(), data_dir());
        let addrs = front_end.start(ctx.clone()).await.expect("front end starts").addrs;
        let addr: SocketAddr = addrs[0];

        within("client connection", client(addr, input)).await;

        let gauge = &router.metrics().protocol(protocol).connections_open;
        within("connection handler", async {
            // Yield first: the handler usually ends within a few turns of the runtime, and a
            // 1 ms timer per input would leave the fuzzer idle most of the time (an MQTT
            // campaign ran at a quarter of a core). Then the timer, for handlers that wait.
            let mut turns = 0u32;
            while gauge.load(std::sync::atomic::Ordering::Relaxed) != 0 {
                if turns < 1000 {
                    turns += 1;
                    tokio::task::yield_now().await;
                } else {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        })
        .await;

        stop(&ctx, "front end").await;
    });
}

/// One client: writes `input`, half-closes, and reads until the server closes. Write errors
/// (the server closed first) and resets are normal outcomes.
async fn client(addr: SocketAddr, input: &[u8]) {
    let stream = TcpStream::connect(addr).await.expect("connect to the front end");
    let _ = stream.set_nodelay(true);
    let (mut read, mut write) = stream.into_split();
    let writer = async move {
        let _ = write.write_all(input).await;
        let _ = write.shutdown().await;
        // Keep the write half until the reader is done: dropping it early is harmless, but
        // holding it keeps the socket's state simple to reason about.
        write
    };
    let reader = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    };
    let (_write, ()) = tokio::join!(writer, reader);
}
