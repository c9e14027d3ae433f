//! The SubscriptionManager and PausableSubscriptionManager operations (WS-BaseNotification 1.3
//! §6): Renew, Unsubscribe, PauseSubscription, ResumeSubscription, each addressed by the
//! subscription's own URL and allowed to the user who subscribed ([`Endpoint::may_manage`]).

use tolk_core::CloseReason;
use wsn_xml::{ReplyContext, Response, write_response};

use crate::endpoint::{Endpoint, Reply};
use crate::fault::Refusal;
use crate::lifetime::{Ask, grant, now_unix_millis};
use crate::login::Caller;
use crate::subscription::Subscription;

impl Endpoint {
    /// Renew: a new termination time, granted as for Subscribe (`xsi:nil` = the maximum).
    pub(crate) fn renew(
        &self,
        subscription: &Subscription,
        termination_time: Option<&str>,
        ctx: &ReplyContext,
    ) -> Result<Reply, Refusal> {
        let now = now_unix_millis();
        let at = grant(
            Ask::Renew,
            termination_time,
            now,
            self.config.default_subscription_lifetime,
            self.config.max_subscription_lifetime,
        )?;
        subscription.set_terminates_at(at);
        self.registry.save(subscription);
        let body = write_response(ctx, &Response::Renew { termination_time: Some(at), current_time: Some(now) });
        Ok(Reply::Body(body))
    }

    /// Unsubscribe: the subscription ends now; notifications still queued for it are discarded.
    pub(crate) fn unsubscribe(&self, id: &str, caller: &Caller, ctx: &ReplyContext) -> Result<Reply, Refusal> {
        // An expired subscription not yet swept is unknown, as Renew would find it; so is
        // another user's.
        self.live_subscription(id, caller)?;
        self.registry
            .remove_subscription(id, CloseReason::ClientClosed)
            .ok_or_else(|| Refusal::resource_unknown("subscription", id))?;
        Ok(Reply::Body(write_response(ctx, &Response::Unsubscribe)))
    }

    /// PauseSubscription: nothing is routed to, or sent to, the consumer until resumed.
    pub(crate) fn pause(&self, subscription: &Subscription, ctx: &ReplyContext) -> Result<Reply, Refusal> {
        subscription.pause();
        self.registry.save(subscription);
        Ok(Reply::Body(write_response(ctx, &Response::PauseSubscription)))
    }

    /// ResumeSubscription: routing and delivery start again. Notifications published while
    /// paused are not delivered (the spec allows either; not buffering keeps memory bounded).
    pub(crate) fn resume(&self, subscription: &Subscription, ctx: &ReplyContext) -> Result<Reply, Refusal> {
        subscription.resume();
        self.registry.save(subscription);
        Ok(Reply::Body(write_response(ctx, &Response::ResumeSubscription)))
    }
}
