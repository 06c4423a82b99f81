//! What a conduit needs from the rank above it while it makes progress: a conduit takes
//! messages off its wire, but the handlers, the in-handler rule and the hang report's wording
//! belong to the endpoint. Conduits are generic over this trait, so the calls are direct.

use std::time::Duration;

use crate::message::MessageView;
use crate::sleep::Awaiting;

/// The rank's side of progress, as a conduit calls it.
pub(crate) trait HandlerContext {
    /// Runs the handler of `message`, then counts it as handled.
    fn run_handler(&self, message: MessageView<'_>);
    /// Prints the hang report of a wait for `awaiting` that has lasted `waited`.
    fn report_hang(&self, awaiting: Awaiting, waited: Duration);
}

/// Most messages one `poll` runs before returning, so a flood cannot starve the caller.
pub(crate) const POLL_BATCH: usize = 64;
