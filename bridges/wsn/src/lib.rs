//! The WS-N bridge: a remote OASIS WS-BaseNotification 1.3 NotificationBroker (another tolk,
//! Apache ServiceMix/CXF, OKSE).
//!
//! - **In.** For each `in` rule the bridge Subscribes at the remote with its own push
//!   consumer ([`consumer`]), served on this broker's HTTP port at an address made from
//!   `local_url`. Subscriptions last `keep_alive` and are renewed at half of it; one the
//!   remote no longer knows is made again. What the remote pushes is published here (WS-N
//!   notifications are at most once), and answered `202` only once it is.
//! - **Out.** Each message the spool holds is sent to the remote broker as a Notify, one at a
//!   time, and leaves the spool when the remote answers `2xx`. A failure or no answer within
//!   `ack_timeout` ends the session; the message is sent again after the reconnection.
//! - **Loops.** A Notify carries the path of the message in a `tolk:Path` SOAP header, which
//!   tolk's WS-N front end reads into the message's path and writes on its own pushes, so that
//!   two tolks bridged both ways deliver one copy.
//! - At stop, the bridge Unsubscribes (best effort).

#![warn(missing_docs)]

mod consumer;
mod remote;

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tolk_bridge::{Backoff, Inbound, Kind, Launch, Link, Refused, Runner};
use tolk_core::{Origin, Protocol, QoS, SessionId, path};
use wsn_xml::{EndpointReference, Limits, Reply, Request, Subscribe, TopicExpression};

use crate::consumer::Notified;
use crate::remote::{Failure, Remote};

/// The WS-N kind, for [`tolk_bridge::Bridges`].
pub fn runner() -> (Kind, Runner) {
    (Kind::Wsn, launch)
}

fn launch(link: Link) -> Launch {
    let key = tolk_wsn::IdSource::new().resource_id();
    let (to_task, inbox) = mpsc::channel(16);
    let routes = consumer::route(&link.config().name, &key, to_task);
    Launch::with_routes(run(link, key, inbox), routes)
}

/// The bridge's state across sessions.
struct Bridge {
    link: Link,
    remote: Remote,
    /// Where the remote pushes (`None` without `in` rules).
    consumer: Option<EndpointReference>,
    /// The remote filter of each `in` rule, and its subscription there once made.
    subscriptions: Vec<(String, Option<EndpointReference>)>,
    inbox: mpsc::Receiver<Notified>,
    limits: Limits,
}

async fn run(mut link: Link, key: String, inbox: mpsc::Receiver<Notified>) {
    let config = link.config();
    let remote = match Remote::new(&config.url, config.ack_timeout) {
        Ok(remote) => remote,
        // An url the configuration check let through but that is no usable address: shown in
        // the log and /api/bridges, and nothing more is tried.
        Err(reason) => return link.disconnected(&reason),
    };
    let config = link.config();
    let consumer = config
        .local_url
        .as_ref()
        .map(|base| EndpointReference::new(format!("{}/bridges/{}/{key}", base.trim_end_matches('/'), config.name)));
    let subscriptions = link.remote_subscriptions().into_iter().map(|(filter, _)| (filter, None)).collect();
    let mut backoff = link.backoff();
    let mut bridge = Bridge { link, remote, consumer, subscriptions, inbox, limits: Limits::default() };
    loop {
        let Some(reason) = bridge.session(&mut backoff).await else { break };
        bridge.link.disconnected(&reason);
        let wait = tokio::time::sleep(backoff.next_wait());
        tokio::pin!(wait);
        // The remote may still push while this side waits to reconnect: that is taken.
        loop {
            tokio::select! {
                _ = bridge.link.shutdown().cancelled() => return bridge.unsubscribe().await,
                _ = &mut wait => break,
                Some(notified) = bridge.inbox.recv() => bridge.take(notified),
            }
        }
    }
    bridge.unsubscribe().await;
}

impl Bridge {
    /// Subscribes (or renews), then moves messages until something fails (the reason) or the
    /// broker stops (`None`).
    async fn session(&mut self, backoff: &mut Backoff) -> Option<Failure> {
        let shutdown = self.link.shutdown().clone();
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            subscribed = self.subscribe_all() => if let Err(reason) = subscribed { return Some(reason) },
        }
        self.link.connected();
        backoff.reset();
        let keep_alive = self.link.config().keep_alive;
        let mut renew_at = Instant::now() + keep_alive / 2;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return None,
                out = self.link.next_outbound() => {
                    let notification = tolk_wsn::translate::notification_on(&out.topic, &out.message, None, None, &self.limits);
                    let Some(message) = notification else {
                        // A topic WS-N cannot write: settled, and logged.
                        tracing::debug!(bridge = %self.link.config().name, topic = %out.topic, "no WS-N form; not sent");
                        self.link.confirmed(out);
                        continue;
                    };
                    let path = out.user.iter().find(|(k, _)| k == path::PATH_PROPERTY).map(|(_, v)| v.clone());
                                        let notify = Request::Notify(vec![message]);
                    let sent = tokio::select! {
                        _ = shutdown.cancelled() => return None,
                        sent = self.remote.call(self.remote.broker(), &notify, path.as_deref()) => sent,
                    };
                    match sent {
                        Ok(_) => self.link.confirmed(out),
                        Err(reason) => return Some(format!("Notify failed: {reason}")),
                    }
                }
                Some(notified) = self.inbox.recv() => self.take(notified),
                _ = tokio::time::sleep_until(renew_at) => {
                    if let Err(reason) = self.subscribe_all().await {
                        return Some(reason);
                    }
                    renew_at = Instant::now() + keep_alive / 2;
                }
            }
        }
    }

    /// Renews every subscription made, and makes those that are missing (or that the remote
    /// no longer knows).
    async fn subscribe_all(&mut self) -> Result<(), Failure> {
        let Some(consumer) = &self.consumer else { return Ok(()) };
        let lifetime = termination(self.link.config().keep_alive);
        for (filter, subscription) in &mut self.subscriptions {
            if let Some(reference) = subscription {
                let renew = Request::Renew { termination_time: Some(lifetime.clone()) };
                match self.remote.call(reference, &renew, None).await {
                    Ok(Some(Reply::Renewed { .. })) => continue,
                    Ok(other) => tracing::debug!(?other, "unexpected answer to Renew"),
                    Err(reason) => tracing::info!(filter = %filter, reason, "renewal refused; subscribing again"),
                }
                *subscription = None;
            }
            // `#` is every topic: a Subscribe without a Filter.
            let topic_expressions = if filter == "#" {
                Vec::new()
            } else {
                let expression = TopicExpression::from_filter(filter, None)
                    .map_err(|e| format!("the in rule for {filter:?} has no WS-N form: {e}"))?;
                vec![expression]
            };
            let subscribe = Request::Subscribe(Subscribe {
                consumer_reference: consumer.clone(),
                topic_expressions,
                other_filters: Vec::new(),
                initial_termination_time: Some(lifetime.clone()),
                use_raw: false,
                other_policies: Vec::new(),
            });
            match self.remote.call(self.remote.broker(), &subscribe, None).await? {
                Some(Reply::Subscribed { subscription_reference, .. }) => *subscription = Some(subscription_reference),
                other => return Err(format!("Subscribe for {filter:?} was answered with {other:?}")),
            }
        }
        Ok(())
    }

    /// Publishes what the remote pushed, and answers it once that is done (on disk where it
    /// was kept).
    fn take(&self, notified: Notified) {
        let Notified { messages, path, done } = notified;
        let origin = Origin { protocol: Protocol::Bridge, session: SessionId(0), client_id: "".into() };
        let mut commits = Vec::new();
        for notification in &messages {
            let received_at = std::time::Instant::now();
            let message = match tolk_wsn::translate::message_from_notification(
                notification,
                &origin,
                &self.limits,
                received_at,
            ) {
                Ok(message) => message,
                Err(refusal) => {
                    tracing::debug!(bridge = %self.link.config().name, reason = %refusal.reason, "notification not taken");
                    continue;
                }
            };
            let mut props = message.props;
            if let Some(path) = &path {
                props.user.push((path::PATH_PROPERTY.to_owned(), path.clone()));
            }
            let inbound = Inbound { payload: message.payload, qos: QoS::AtMostOnce, retain: false, props };
            match self.link.publish_in(&message.topic, inbound) {
                Ok(commit) => commits.extend(commit),
                Err(Refused::Unmapped) => {}
                Err(Refused::Full) => {
                    let _ = done.send(Err("this broker is full (memory budget or queue limits)".into()));
                    return;
                }
            }
        }
        tokio::spawn(async move {
            for commit in commits {
                if let Err(e) = commit.await {
                    let _ = done.send(Err(format!("could not be stored here: {e}")));
                    return;
                }
            }
            let _ = done.send(Ok(()));
        });
    }

    /// Ends the subscriptions at the remote, best effort (the broker is stopping).
    async fn unsubscribe(&mut self) {
        for (_, subscription) in &mut self.subscriptions {
            if let Some(reference) = subscription.take() {
                let _ = tokio::time::timeout(
                    Duration::from_secs(2),
                    self.remote.call(&reference, &Request::Unsubscribe, None),
                )
                .await;
            }
        }
    }
}

/// A subscription lifetime as an `xsd:duration`.
fn termination(lifetime: Duration) -> String {
    format!("PT{}S", lifetime.as_secs().max(2))
}
