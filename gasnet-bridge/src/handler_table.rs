//! The handlers of a job: built before launch by the same code on every rank, so index `k`
//! names the same function everywhere and nothing on the wire is a function address.

use std::cell::Cell;
use std::sync::Arc;

use crate::endpoint::{Endpoint, RunHandlers};
use crate::message::{HandlerId, MessageView};
use crate::token::Token;

/// A handler: runs at the target with the message behind the token.
pub type Handler = Arc<dyn Fn(&Token<'_>) + Send + Sync>;

/// The handlers of a job, in registration order.
#[derive(Clone, Default)]
pub struct HandlerTable {
    entries: Vec<(&'static str, Handler)>,
}

impl HandlerTable {
    /// An empty table.
    pub fn new() -> Self {
        HandlerTable::default()
    }

    /// Adds a handler; every rank must register the same handlers in the same order.
    pub fn register(
        &mut self,
        name: &'static str,
        handler: impl Fn(&Token<'_>) + Send + Sync + 'static,
    ) -> HandlerId {
        let index = u16::try_from(self.entries.len()).expect("more than 65536 AM handlers");
        self.entries.push((name, Arc::new(handler)));
        HandlerId(index)
    }

    /// Number of registered handlers.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The name a handler was registered under.
    pub fn name(&self, id: HandlerId) -> Option<&'static str> {
        self.entries.get(id.index()).map(|(n, _)| *n)
    }

    pub(crate) fn get(&self, index: usize) -> Option<&Handler> {
        self.entries.get(index).map(|(_, h)| h)
    }
}

impl std::fmt::Debug for HandlerTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|(n, _)| n))
            .finish()
    }
}

impl RunHandlers for HandlerTable {
    fn run(&self, endpoint: &Endpoint, message: MessageView<'_>) {
        let Some(handler) = self.get(message.handler as usize) else {
            panic!(
                "malformed active message from rank {}: handler {} is not registered here ({} are)",
                message.source,
                message.handler,
                self.len()
            );
        };
        let token = Token {
            endpoint,
            message,
            replied: Cell::new(false),
        };
        handler(&token);
    }

    fn registered(&self) -> usize {
        self.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::BridgeError;

    #[test]
    fn table_indices_follow_registration_order() {
        let mut t = HandlerTable::new();
        let a = t.register("a", |_| {});
        let b = t.register("b", |_| {});
        assert_eq!((a.index(), b.index()), (0, 1));
        assert_eq!(t.name(b), Some("b"));
        assert!(b.check(t.len()).is_ok());
        let mut other = HandlerTable::new();
        let foreign = other.register("x", |_| {});
        let _ = other.register("y", |_| {});
        let c = other.register("z", |_| {});
        assert!(
            foreign.check(t.len()).is_ok(),
            "index 0 exists in both tables"
        );
        assert_eq!(
            c.check(t.len()),
            Err(BridgeError::UnknownHandler {
                index: 2,
                registered: 2
            })
        );
    }
}
