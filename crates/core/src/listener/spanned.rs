//! A connection's log span, kept out of its task's memory while it is disabled.
//!
//! `tracing::Instrumented` keeps its span inline: 40 bytes in the task of every connection,
//! even below the log level (`[log] level = "warn"`), where the span records nothing. Here the
//! span is boxed, and left out when disabled: 8 bytes in the task.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tracing::Span;

pin_project_lite::pin_project! {
    /// `inner`, polled inside its span as `tracing::Instrumented` would poll it. Unlike
    /// `Instrumented`, it does not enter the span to drop an unfinished `inner`: a connection's
    /// task ends by finishing, and logs its close inside the span.
    pub struct Spanned<F> {
        span: Option<Box<Span>>,
        #[pin]
        inner: F,
    }
}

impl<F> Spanned<F> {
    /// `inner` run inside `span`.
    pub fn new(inner: F, span: Span) -> Self {
        let span = (!span.is_disabled()).then(|| Box::new(span));
        Spanned { span, inner }
    }
}

impl<F: Future> Future for Spanned<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _entered = this.span.as_deref().map(Span::enter);
        this.inner.poll(cx)
    }
}
