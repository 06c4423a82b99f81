//! Support for the `#[cd::strict(..)]` and `#[cd::relaxed(..)]` attributes (crate
//! `cd-macros`): how a preserved argument is preserved, chosen by its type, and how a region
//! argument is declared. Not for direct use.

use bytemuck::Pod;
use pgas::GlobalPtr;

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

/// A region argument of `#[cd::relaxed(private(..), privatized(..))]`: a pointer into this
/// rank's segment.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a region of shared memory: #[cd::relaxed] declares access classes of `GlobalPtr<T>` parameters",
    label = "expected a `pgas::GlobalPtr<T>`",
    note = "private(x = len) and privatized(x = len) name a parameter of type `GlobalPtr<T>` and the region's length in elements of `T`"
)]
pub trait RegionArg {
    /// The element type.
    type Elem: 'static;
    /// The pointer.
    fn region_ptr(&self) -> GlobalPtr<Self::Elem>;
}

impl<T: 'static> RegionArg for GlobalPtr<T> {
    type Elem = T;
    fn region_ptr(&self) -> GlobalPtr<T> {
        *self
    }
}

/// Declares `len` elements at `ptr` private in `cd`; what `#[cd::relaxed(private(..))]`
/// expands to.
#[doc(hidden)]
pub fn __private_arg<P: RegionArg>(cd: &Cd, name: &str, ptr: P, len: usize) {
    cd.private(name, ptr.region_ptr(), len);
}

/// Declares `len` elements at `ptr` privatized in `cd` and returns the pointer the body uses
/// (a shadow copy in a re-execution); what `#[cd::relaxed(privatized(..))]` expands to.
#[doc(hidden)]
pub fn __privatized_arg<P: RegionArg>(cd: &Cd, name: &str, ptr: P, len: usize) -> GlobalPtr<P::Elem>
where
    P::Elem: bytemuck::Pod,
{
    cd.privatized(name, ptr.region_ptr(), len)
}
