//! Support for the `#[cd::strict(..)]` and `#[cd::relaxed(..)]` attributes (crate
//! `cd-macros`): how a preserved argument is preserved, chosen by its type, the refusal of a
//! preserved argument that holds a global pointer, and how a region argument is declared. Not
//! for direct use.

use std::collections::{BTreeMap, HashMap, VecDeque};

use bytemuck::Pod;
use pgas::{GlobalPtr, ViewPtr};

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

/// A type that holds a [`GlobalPtr`]: `#[cd::strict(preserve(x))]` and
/// `#[cd::relaxed(preserve(x))]` refuse to preserve it at compile time, because preserving a
/// pointer restores the pointer, not the cells it points to (write `preserve(x = len)` for
/// the cells).
///
/// Implemented for `GlobalPtr<T>`, `ViewPtr<T>` (viewable memory) and for the standard containers of such types. A struct or
/// tuple holding a pointer is refused only if it implements this trait:
/// `impl cd_runtime::HoldsGlobalPtr for MyState {}`.
pub trait HoldsGlobalPtr {}

impl<T: 'static> HoldsGlobalPtr for GlobalPtr<T> {}
impl<T: 'static> HoldsGlobalPtr for ViewPtr<T> {}
impl<T: HoldsGlobalPtr> HoldsGlobalPtr for [T] {}
impl<T: HoldsGlobalPtr, const N: usize> HoldsGlobalPtr for [T; N] {}
impl<T: HoldsGlobalPtr> HoldsGlobalPtr for Vec<T> {}
impl<T: HoldsGlobalPtr> HoldsGlobalPtr for VecDeque<T> {}
impl<T: HoldsGlobalPtr> HoldsGlobalPtr for Option<T> {}
impl<T: HoldsGlobalPtr + ?Sized> HoldsGlobalPtr for Box<T> {}
impl<K, V: HoldsGlobalPtr, S> HoldsGlobalPtr for HashMap<K, V, S> {}
impl<K, V: HoldsGlobalPtr> HoldsGlobalPtr for BTreeMap<K, V> {}

/// The value a preserved argument's type is probed through (autoref specialization: method
/// resolution prefers [`__ProbeHoldsPointer`], implemented on the probe itself when the type
/// holds a pointer, to [`__ProbeNoPointer`], implemented on a reference to it for any type).
#[doc(hidden)]
pub struct __Probe<'a, T: ?Sized>(pub &'a T);

/// The probe's answer for a type that holds a global pointer; the attribute's check refuses it.
#[doc(hidden)]
pub struct __HoldsPointer;

/// The probe's answer for any other type; the attribute's check accepts it.
#[doc(hidden)]
pub struct __NoPointer;

/// The probe's preferred method, for a type that holds a global pointer.
#[doc(hidden)]
pub trait __ProbeHoldsPointer {
    /// Says the probed type holds a pointer.
    fn __pointer_kind(&self) -> __HoldsPointer {
        __HoldsPointer
    }
}

impl<T: HoldsGlobalPtr + ?Sized> __ProbeHoldsPointer for __Probe<'_, T> {}

/// The probe's fallback method, for any type.
#[doc(hidden)]
pub trait __ProbeNoPointer {
    /// Says the probed type holds no pointer (as far as [`HoldsGlobalPtr`] tells).
    fn __pointer_kind(&self) -> __NoPointer {
        __NoPointer
    }
}

impl<T: ?Sized> __ProbeNoPointer for &__Probe<'_, T> {}

/// Preserves `len` elements at the pointer `ptr` as `name` in `cd` (restores them in a
/// re-execution); what `preserve(x = len)` expands to.
#[doc(hidden)]
pub fn __preserve_cells<P: CellsArg>(cd: &Cd, name: &str, ptr: P, len: usize) {
    ptr.preserve_cells(cd, name, len);
}

/// A pointer argument of `preserve(x = len)`: a `GlobalPtr<T>` (cells of the segment, with
/// [`Cd::preserve_global`]) or a `ViewPtr<T>` (viewable memory, with [`Cd::preserve_view`]).
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a pointer: `x = len` in #[cd::strict] and #[cd::relaxed] names a `GlobalPtr<T>` or `ViewPtr<T>` parameter",
    label = "expected a `pgas::GlobalPtr<T>` or `pgas::ViewPtr<T>`",
    note = "preserve(x = len) names a parameter of type `GlobalPtr<T>` or `ViewPtr<T>` (T: bytemuck::Pod) and a length in elements of `T`"
)]
pub trait CellsArg {
    /// Preserves `len` elements from here as `name` in `cd`.
    fn preserve_cells(&self, cd: &Cd, name: &str, len: usize);
}

impl<T: Pod> CellsArg for GlobalPtr<T> {
    fn preserve_cells(&self, cd: &Cd, name: &str, len: usize) {
        cd.preserve_global(name, *self, len);
    }
}

impl<T: Pod> CellsArg for ViewPtr<T> {
    fn preserve_cells(&self, cd: &Cd, name: &str, len: usize) {
        cd.preserve_view(name, *self, len);
    }
}

/// A pointer argument of the attributes' `x = len` forms (`preserve(..)`, and
/// `#[cd::relaxed]`'s `private(..)`, `privatized(..)`): a pointer to `len` elements.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a global pointer: `x = len` in #[cd::strict] and #[cd::relaxed] names a `GlobalPtr<T>` parameter",
    label = "expected a `pgas::GlobalPtr<T>`",
    note = "preserve(x = len), private(x = len) and privatized(x = len) name a parameter of type `GlobalPtr<T>` and a length in elements of `T`"
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
