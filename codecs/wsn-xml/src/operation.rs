//! The WS-N operations tolk serves and their WS-Addressing actions. The WSDLs (bw-2, brw-2)
//! declare no explicit actions, so these are the defaults of WS-Addressing 1.0 Metadata
//! §4.4.4: `{targetNamespace}/{portType}/{input or output name}`, and for faults
//! `{targetNamespace}/{portType}/{operation}/Fault/{fault name}`.

use crate::ns::{WSN_BR, WSN_BR_WSDL, WSNT, WSNT_WSDL};

/// A WS-BaseNotification or WS-BrokeredNotification operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// NotificationConsumer::Notify (one-way).
    Notify,
    /// NotificationProducer::Subscribe.
    Subscribe,
    /// NotificationProducer::GetCurrentMessage.
    GetCurrentMessage,
    /// SubscriptionManager::Renew.
    Renew,
    /// SubscriptionManager::Unsubscribe.
    Unsubscribe,
    /// PausableSubscriptionManager::PauseSubscription.
    PauseSubscription,
    /// PausableSubscriptionManager::ResumeSubscription.
    ResumeSubscription,
    /// CreatePullPoint::CreatePullPoint.
    CreatePullPoint,
    /// PullPoint::GetMessages.
    GetMessages,
    /// PullPoint::DestroyPullPoint.
    DestroyPullPoint,
    /// RegisterPublisher::RegisterPublisher (WS-BrokeredNotification).
    RegisterPublisher,
    /// PublisherRegistrationManager::DestroyRegistration (WS-BrokeredNotification).
    DestroyRegistration,
}

/// Action of the outgoing Notify to consumers (WS-BaseNotification 1.3 §3.2).
pub const NOTIFY_ACTION: &str = "http://docs.oasis-open.org/wsn/bw-2/NotificationConsumer/Notify";

impl Operation {
    /// Every operation, for tables and tests.
    pub const ALL: [Operation; 12] = [
        Operation::Notify,
        Operation::Subscribe,
        Operation::GetCurrentMessage,
        Operation::Renew,
        Operation::Unsubscribe,
        Operation::PauseSubscription,
        Operation::ResumeSubscription,
        Operation::CreatePullPoint,
        Operation::GetMessages,
        Operation::DestroyPullPoint,
        Operation::RegisterPublisher,
        Operation::DestroyRegistration,
    ];

    /// `(WSDL namespace, port type, operation name)`.
    fn wsdl(self) -> (&'static str, &'static str, &'static str) {
        use Operation::*;
        match self {
            Notify => (WSNT_WSDL, "NotificationConsumer", "Notify"),
            Subscribe => (WSNT_WSDL, "NotificationProducer", "Subscribe"),
            GetCurrentMessage => (WSNT_WSDL, "NotificationProducer", "GetCurrentMessage"),
            Renew => (WSNT_WSDL, "SubscriptionManager", "Renew"),
            Unsubscribe => (WSNT_WSDL, "SubscriptionManager", "Unsubscribe"),
            PauseSubscription => (WSNT_WSDL, "PausableSubscriptionManager", "PauseSubscription"),
            ResumeSubscription => (WSNT_WSDL, "PausableSubscriptionManager", "ResumeSubscription"),
            CreatePullPoint => (WSNT_WSDL, "CreatePullPoint", "CreatePullPoint"),
            GetMessages => (WSNT_WSDL, "PullPoint", "GetMessages"),
            DestroyPullPoint => (WSNT_WSDL, "PullPoint", "DestroyPullPoint"),
            RegisterPublisher => (WSN_BR_WSDL, "RegisterPublisher", "RegisterPublisher"),
            DestroyRegistration => (WSN_BR_WSDL, "PublisherRegistrationManager", "DestroyRegistration"),
        }
    }

    /// The operation's name, which is also its request element's local name.
    pub fn name(self) -> &'static str {
        self.wsdl().2
    }

    /// Namespace of the request and response elements.
    pub fn element_namespace(self) -> &'static str {
        match self {
            Operation::RegisterPublisher | Operation::DestroyRegistration => WSN_BR,
            _ => WSNT,
        }
    }

    /// The operation whose request element is `{ns}local`.
    pub fn from_request_element(ns: &str, local: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|op| op.element_namespace() == ns && op.name() == local)
    }

    /// Action of the request message.
    pub fn request_action(self) -> String {
        let (ns, port, op) = self.wsdl();
        if self == Operation::Notify { format!("{ns}/{port}/{op}") } else { format!("{ns}/{port}/{op}Request") }
    }

    /// Action of the response message; `None` for one-way Notify.
    pub fn response_action(self) -> Option<String> {
        let (ns, port, op) = self.wsdl();
        (self != Operation::Notify).then(|| format!("{ns}/{port}/{op}Response"))
    }

    /// Local name of the response element; `None` for one-way Notify.
    pub fn response_element(self) -> Option<String> {
        (self != Operation::Notify).then(|| format!("{}Response", self.name()))
    }

    /// Action of a WSDL-declared fault of this operation.
    pub fn fault_action(self, fault_name: &str) -> String {
        let (ns, port, op) = self.wsdl();
        format!("{ns}/{port}/{op}/Fault/{fault_name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_follow_the_wsdl_defaults() {
        assert_eq!(Operation::Notify.request_action(), NOTIFY_ACTION);
        assert_eq!(Operation::Notify.response_action(), None);
        assert_eq!(
            Operation::Subscribe.request_action(),
            "http://docs.oasis-open.org/wsn/bw-2/NotificationProducer/SubscribeRequest"
        );
        assert_eq!(
            Operation::PauseSubscription.response_action().unwrap(),
            "http://docs.oasis-open.org/wsn/bw-2/PausableSubscriptionManager/PauseSubscriptionResponse"
        );
        assert_eq!(
            Operation::GetMessages.request_action(),
            "http://docs.oasis-open.org/wsn/bw-2/PullPoint/GetMessagesRequest"
        );
        assert_eq!(
            Operation::Subscribe.fault_action("InvalidFilterFault"),
            "http://docs.oasis-open.org/wsn/bw-2/NotificationProducer/Subscribe/Fault/InvalidFilterFault"
        );
        assert_eq!(
            Operation::RegisterPublisher.request_action(),
            "http://docs.oasis-open.org/wsn/brw-2/RegisterPublisher/RegisterPublisherRequest"
        );
        for op in Operation::ALL {
            assert_eq!(Operation::from_request_element(op.element_namespace(), op.name()), Some(op));
        }
    }
}
