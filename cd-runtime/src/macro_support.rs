//! Support for the `#[cd::strict(preserve(..))]` attribute (crate `cd-macros`): how a
//! preserved argument is preserved, chosen by its type. Not for direct use.

use bytemuck::Pod;

use crate::cd::{Cd, Preservable};

/// A value the `#[cd::strict]` attribute can preserve: any [`Preservable`] (by copy, with
/// [`Cd::preserve`]) or a slice of plain-old-data (as raw bytes, with [`Cd::preserve_slice`]).
/// The two implementations do not overlap: the first is for sized types only.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be preserved by #[cd::strict]",
    label = "this parameter cannot be preserved",
    note = "a preserved parameter must be `&mut T` or `T` with T: Clone + PartialEq + Serialize + DeserializeOwned + 'static (preserved by copy), or `&mut [T]` with T: bytemuck::Pod (preserved as raw bytes)"
)]
pub trait PreserveArg {
    /// Preserves `self` as `name` in `cd` (restores it in a re-execution).
    fn preserve_arg(&mut self, cd: &Cd, name: &str);
}

impl<T: Preservable> PreserveArg for T {
    fn preserve_arg(&mut self, cd: &Cd, name: &str) {
        cd.preserve(name, self);
    }
}

impl<T: Pod> PreserveArg for [T] {
    fn preserve_arg(&mut self, cd: &Cd, name: &str) {
        cd.preserve_slice(name, self);
    }
}

/// Preserves the argument `value` as `name` in `cd`; what `#[cd::strict(preserve(..))]`
/// expands to.
#[doc(hidden)]
pub fn __preserve_arg<T: PreserveArg + ?Sized>(cd: &Cd, name: &str, value: &mut T) {
    value.preserve_arg(cd, name);
}
