//! A user active message as its sender gives it, before it is encoded for a ring or MPI.

/// Who handles a user AM and with which arguments, as the sender gives them (borrowed: a
/// message to another rank is encoded straight from them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct AmHead<'a> {
    pub(crate) handler: u16,
    pub(crate) is_reply: bool,
    pub(crate) args: &'a [u64],
}

/// What a user AM carries besides its arguments, as the sender gives it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum OutBody<'a> {
    Short,
    Medium(&'a [u8]),
    Long { payload: &'a [u8], offset: usize },
}
