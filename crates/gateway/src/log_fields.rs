//! The fields of every log line, followed by the label of the connection it comes from.
//!
//! Connections keep no `tracing` span (see `tolk_core::listener`'s `labelled` module): a line
//! written while a connection's task runs ends with ` protocol=… peer=… client_id=…` instead
//! of starting with a `conn{…}:` span.

use std::fmt;

use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::{DefaultFields, Writer};

/// `DefaultFields`, then the current connection's label.
#[derive(Default)]
pub struct ConnectionFields(DefaultFields);

impl<'writer> FormatFields<'writer> for ConnectionFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'writer>, fields: R) -> fmt::Result {
        self.0.format_fields(writer.by_ref(), fields)?;
        tolk_core::listener::write_current_label(&mut writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll};
    use tolk_core::Protocol;
    use tolk_core::drive::TransportKind;
    use tolk_core::listener::{Label, Labelled, name_client};
    use tracing_subscriber::layer::SubscriberExt;

    /// Log lines written to a shared buffer.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_connections_lines_end_with_its_label_and_others_do_not() {
        let lines = Lines::default();
        let layer = tracing_subscriber::fmt::layer()
            .fmt_fields(ConnectionFields::default())
            .without_time()
            .with_ansi(false)
            .with_writer({
                let lines = lines.clone();
                move || lines.clone()
            });
        let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
        let peer = "192.0.2.1:4000".parse().unwrap();
        let connection = std::future::poll_fn(|_| {
            tracing::info!(reason = "protocol_error", "connection refused");
            name_client("sensor-7".into());
            tracing::info!("connection closed");
            Poll::Ready(())
        });
        let mut task = Box::pin(Labelled::new(connection, Label::new(Protocol::Mqtt, peer, TransportKind::Tcp)));
        assert!(task.as_mut().poll(&mut Context::from_waker(std::task::Waker::noop())).is_ready());
        tracing::info!("tolk ready");
        let written = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let target = "tolk_gateway::log_fields::tests";
        assert_eq!(
            written,
            format!(
                " INFO {target}: connection refused reason=\"protocol_error\" protocol=mqtt peer=192.0.2.1:4000\n \
                 INFO {target}: connection closed protocol=mqtt peer=192.0.2.1:4000 client_id=sensor-7\n \
                 INFO {target}: tolk ready\n"
            )
        );
    }
}
