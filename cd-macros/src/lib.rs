//! The `#[strict(...)]` and `#[relaxed(...)]` attributes of `cd-runtime`, used as
//! `#[cd::strict(...)]` and `#[cd::relaxed(...)]` after `use cd_runtime as cd;`. See
//! [`macro@strict`] and [`macro@relaxed`]. Both share one parser and one expansion: they differ
//! in the options they accept and in the runtime function the body is passed to.

#![forbid(unsafe_code)]

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::{
    AttrStyle, Error, Expr, ExprLit, FnArg, Ident, Item, ItemFn, Lit, LitStr, Pat, PatIdent,
    ReturnType, Token, Type, token,
};

/// Runs the function's body as a strict child CD of the caller's CD, named after the function,
/// preserving the listed arguments (and restoring them before each re-execution).
///
/// ```ignore
/// use cd_runtime as cd;
///
/// #[cd::strict(preserve(u, v))]
/// fn step(u: &mut Vec<f64>, v: &mut [f64], k: usize) -> Result<f64, cd::CdError> {
///     v[k] += 1.0;
///     u.push(v[k]);
///     Ok(u.iter().sum())
/// }
/// ```
///
/// expands to
///
/// ```ignore
/// fn step(u: &mut Vec<f64>, v: &mut [f64], k: usize) -> Result<f64, cd::CdError> {
///     ::cd_runtime::strict("step", |__cd| -> ::core::result::Result<_, ::cd_runtime::CdError> {
///         ::cd_runtime::__preserve_arg(__cd, "u", &mut *u);
///         ::cd_runtime::__preserve_arg(__cd, "v", &mut *v);
///         { v[k] += 1.0; u.push(v[k]); Ok(u.iter().sum()) }
///     })
/// }
/// ```
///
/// The body is the CD body itself: `return` and `?` end one execution of the CD with that
/// result (a returned `Err` is a detected error: the CD restores and re-executes), and
/// `cd_runtime::current()` is this CD inside it.
///
/// # Options
///
/// - `preserve(a, b, ...)`: parameters to preserve, each by its name as the preserved entry's
///   name. A parameter of type `&mut T` preserves the `T` it points to, one taken by value
///   preserves itself (the attribute makes its binding `mut`). `T` must be
///   `cd_runtime::Preservable` (preserved by copy), or a slice `[T]` of `bytemuck::Pod`
///   elements (preserved as raw bytes: take `&mut [T]` rather than `&mut Vec<T>` for the fast
///   path when the length does not change). Shared references (`&T`) cannot be restored and
///   are rejected.
/// - `preserve(u = len)`: for a `pgas::GlobalPtr<T>` parameter `u`, the `len` elements it
///   points to (`Cd::preserve_global`; this rank's or another's), for a `pgas::ViewPtr<T>`
///   the `len` elements of this rank's viewable memory (`Cd::preserve_view`), written back
///   before each re-execution. `len` is any `usize` expression, evaluated at the start of each
///   execution. `preserve(u)` of a type that holds a pointer (`cd_runtime::HoldsGlobalPtr`:
///   `GlobalPtr<T>`, `ViewPtr<T>`, containers of them, and types that implement it) is a
///   compile error naming
///   `u = len`, since it would restore the pointer and leave the cells as a failure left them.
/// - `name = "..."`: the CD's name (default: the function's name), as used by the
///   configuration (`[cd.<name>]`) and the report.
/// - `team = <expr>`: the CD spans the ranks of a `pgas::Team` (or `&Team`) instead of the
///   parent's ranks (`cd_runtime::strict_on`). The expression is evaluated once per call,
///   before the CD begins.
/// - `local`: the CD spans this rank alone (`cd_runtime::strict_local`).
///
/// With `kind = "relaxed"` in the configuration, the same function runs as a relaxed CD
/// (`team` and `local` are then unused).
///
/// # Requirements
///
/// - The function returns `Result<T, cd_runtime::CdError>` (any path ending in `Result`), so
///   that a failure it cannot contain escalates to the caller.
/// - Not an `async fn` nor a `const fn`.
/// - The body runs in an `FnMut` closure, once per execution of the CD. References and `Copy`
///   arguments work as usual; an argument taken by value that is not `Copy` may be borrowed
///   and mutated but not moved out of the body (e.g. returned, or passed by value): rustc
///   reports "cannot move out of `x`, a captured variable in an `FnMut` closure". Take it by
///   reference, or clone it.
/// - The expansion names the runtime as `::cd_runtime`, so the crate must depend on
///   `cd-runtime` under that name.
#[proc_macro_attribute]
pub fn strict(attr: TokenStream, item: TokenStream) -> TokenStream {
    attribute(Kind::Strict, attr, item)
}

/// Runs the function's body as a relaxed child CD of the caller's CD (`cd_runtime::relaxed`):
/// it begins and completes on this rank alone, logs its potentially shared communication and,
/// after a failure, re-executes this rank alone by replaying its log. The parent is a strict
/// CD (the relaxed group's LCSA) or another relaxed CD.
///
/// ```ignore
/// use cd_runtime as cd;
/// use pgas::GlobalPtr;
///
/// #[cd::relaxed(preserve(sum), private(scratch = n), privatized(out = n), name = "phase")]
/// fn phase(sum: &mut f64, scratch: GlobalPtr<f64>, out: GlobalPtr<f64>, n: usize)
///     -> Result<(), cd::CdError> { /* ... */ Ok(()) }
/// ```
///
/// expands to
///
/// ```ignore
/// fn phase(sum: &mut f64, scratch: GlobalPtr<f64>, out: GlobalPtr<f64>, n: usize)
///     -> Result<(), cd::CdError> {
///     ::cd_runtime::relaxed("phase", |__cd| -> ::core::result::Result<_, ::cd_runtime::CdError> {
///         ::cd_runtime::__preserve_arg(__cd, "sum", &mut *sum);
///         ::cd_runtime::__private_arg(__cd, "scratch", scratch, n);
///         let out = ::cd_runtime::__privatized_arg(__cd, "out", out, n);
///         { /* ... */ Ok(()) }
///     })
/// }
/// ```
///
/// # Options
///
/// - `preserve(a, b, ...)`: as for [`macro@strict`]. A `pgas::ViewPtr<T>`'s cells (this
///   rank's viewable memory) are private to their owner under a relaxed CD: preserved and
///   restored, never logged (a `view_put` into another rank's is refused inside the CD).
/// - `private(x = len, ...)`: the parameter `x`, a `pgas::GlobalPtr<T>` into this rank's
///   segment, and `len` elements of `T` from it are *private*: no other
///   CD touches them until the relaxed group completes (not logged, simply re-executed).
///   `len` is any `usize` expression; it may name the function's parameters and is evaluated
///   at the start of each execution of the CD. The region is named after the parameter.
/// - `privatized(y = len, ...)`: the same for a *temporarily privatized* region: private while
///   this CD runs, usable by other CDs after it completes (logged once, at completion, as its
///   final bytes). In the body `y` is rebound to the pointer to compute through: `y` itself,
///   or a shadow copy when an enclosing relaxed CD re-executes this one after it completed.
/// - `name = "..."`: the CD's name (default: the function's name), as for [`macro@strict`].
///
/// Everything else the body reaches in other ranks' memory is *potentially shared* (logged),
/// the safe default. A parameter has at most one class, and a class names the region, not
/// the pointer: a private region's cells are preserved with `preserve(x = len)` beside
/// `private(x = len)`; a privatized region cannot be preserved (a replay computes it in a
/// shadow copy). `team` and `local` are not
/// options of a relaxed CD: it spans its parent's ranks and recovers on its own rank.
///
/// When the configuration gives the CD `kind = "strict"`, the same function runs as a strict
/// CD (all the parent's ranks re-execute together) and the class declarations have no effect.
///
/// # Requirements
///
/// As for [`macro@strict`]: the function returns `Result<T, cd_runtime::CdError>`, is neither
/// `async` nor `const`, and its body runs in an `FnMut` closure once per execution.
#[proc_macro_attribute]
pub fn relaxed(attr: TokenStream, item: TokenStream) -> TokenStream {
    attribute(Kind::Relaxed, attr, item)
}

fn attribute(kind: Kind, attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = TokenStream2::from(item);
    match expand(kind, attr.into(), item.clone()) {
        Ok(out) => out.into(),
        Err(e) => {
            // Keep the item as written so the error is the only one reported.
            let mut out = e.to_compile_error();
            out.extend(item);
            out.into()
        }
    }
}

/// Which attribute: the options it takes, its messages, the runtime function it calls.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Strict,
    Relaxed,
}

impl Kind {
    /// `#[cd::strict]` or `#[cd::relaxed]`, as messages name the attribute.
    fn attr(self) -> &'static str {
        match self {
            Kind::Strict => "#[cd::strict]",
            Kind::Relaxed => "#[cd::relaxed]",
        }
    }

    fn word(self) -> &'static str {
        match self {
            Kind::Strict => "strict",
            Kind::Relaxed => "relaxed",
        }
    }

    fn options(self) -> &'static str {
        match self {
            Kind::Strict => "expected preserve(...), name = \"...\", team = ..., or local",
            Kind::Relaxed => {
                "expected preserve(...), private(x = len), privatized(x = len), or name = \"...\""
            }
        }
    }

    fn return_message(self) -> String {
        format!(
            "a {} function must return Result<T, cd::CdError> so failures can escalate",
            self.attr()
        )
    }
}

/// An access class of `#[cd::relaxed]`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Private,
    Privatized,
}

impl Class {
    fn word(self) -> &'static str {
        match self {
            Class::Private => "private",
            Class::Privatized => "privatized",
        }
    }
}

/// The attribute's options.
#[derive(Default)]
struct Options {
    /// `preserve(a, u = len, ..)`: each name, with a length when the cells a pointer points
    /// to are preserved.
    preserve: Option<(Ident, Vec<Preserved>)>,
    name: Option<LitStr>,
    team: Option<(Ident, Expr)>,
    local: Option<Ident>,
    /// `private(x = len, ..)` and `privatized(..)`, in the order given.
    classes: Vec<(Class, Regions)>,
}

/// A preserved parameter, with its length in elements when the cells it points to are preserved.
type Preserved = (Ident, Option<Expr>);

/// Region parameters and their lengths in elements: `x = len, y = len`.
type Regions = Vec<(Ident, Expr)>;

/// A comma-separated list in parentheses, each item parsed by `item`.
fn parse_list<T>(
    input: ParseStream,
    mut item: impl FnMut(ParseStream) -> syn::Result<T>,
) -> syn::Result<Vec<T>> {
    let content;
    syn::parenthesized!(content in input);
    let mut out = Vec::new();
    while !content.is_empty() {
        out.push(item(&content)?);
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    Ok(out)
}

/// The list of `preserve(..)`: names, each with an optional length in elements (`u = len`,
/// the cells a `GlobalPtr<T>` parameter points to).
fn parse_preserved(input: ParseStream) -> syn::Result<Vec<Preserved>> {
    parse_list(input, |input| {
        if !input.peek(Ident::peek_any) {
            return Err(input.error(
                "expected the name of a parameter to preserve, or `u = len` for the cells a \
                 `GlobalPtr<T>` parameter points to",
            ));
        }
        let name = input.call(Ident::parse_any)?;
        if !input.peek(Token![=]) {
            return Ok((name, None));
        }
        input.parse::<Token![=]>()?;
        let len: Expr = input.parse()?;
        Ok((name, Some(len)))
    })
}

/// A list of regions: `(x = len, y = len, ..)`.
fn parse_regions(input: ParseStream, class: Class) -> syn::Result<Regions> {
    let c = class.word();
    parse_list(input, |input| {
        if !input.peek(Ident::peek_any) {
            return Err(input.error(format!(
                "expected a `GlobalPtr<T>` parameter and the region's length in elements: \
                 {c}(x = len)"
            )));
        }
        let name = input.call(Ident::parse_any)?;
        if !input.peek(Token![=]) {
            return Err(Error::new_spanned(
                &name,
                format!(
                    "`{name}` needs the region's length in elements of its `GlobalPtr<T>`: \
                     {c}({name} = len)"
                ),
            ));
        }
        input.parse::<Token![=]>()?;
        let len: Expr = input.parse()?;
        Ok((name, len))
    })
}

fn parse_options(kind: Kind, attr: TokenStream2) -> syn::Result<Options> {
    let mut o = Options::default();
    let options = kind.options();
    let parser = syn::meta::parser(|meta| {
        let Some(key) = meta.path.get_ident().cloned() else {
            return Err(Error::new_spanned(
                &meta.path,
                format!("unknown option `{}`; {options}", shown(&meta.path)),
            ));
        };
        let twice = || Error::new_spanned(&key, format!("option `{key}` given twice"));
        match (kind, key.to_string().as_str()) {
            (_, "preserve") => {
                if o.preserve.is_some() {
                    return Err(twice());
                }
                if !meta.input.peek(token::Paren) {
                    return Err(meta.error(
                        "expected the parameters to preserve: preserve(a, b), or preserve(u = len) \
                         for the cells a `GlobalPtr<T>` parameter points to",
                    ));
                }
                o.preserve = Some((key, parse_preserved(meta.input)?));
            }
            (_, "name") => {
                if o.name.is_some() {
                    return Err(twice());
                }
                let value: Expr = meta.value()?.parse()?;
                match value {
                    Expr::Lit(ExprLit {
                        lit: Lit::Str(s), ..
                    }) => o.name = Some(s),
                    other => {
                        return Err(Error::new_spanned(
                            other,
                            "the CD name must be a string literal: name = \"...\"",
                        ));
                    }
                }
            }
            (Kind::Strict, "team") => {
                if o.team.is_some() {
                    return Err(twice());
                }
                let value: Expr = meta.value()?.parse()?;
                o.team = Some((key, value));
            }
            (Kind::Strict, "local") => {
                if o.local.is_some() {
                    return Err(twice());
                }
                if !meta.input.is_empty() && !meta.input.peek(Token![,]) {
                    return Err(Error::new_spanned(&key, "`local` takes no value"));
                }
                o.local = Some(key);
            }
            (Kind::Relaxed, "team") => {
                return Err(Error::new_spanned(
                    &key,
                    "`team` is not an option of #[cd::relaxed]: a relaxed CD spans its parent's \
                     ranks, and begins, completes and recovers on its own rank; use \
                     #[cd::strict(team = ...)] for a CD on a team",
                ));
            }
            (Kind::Relaxed, "local") => {
                return Err(Error::new_spanned(
                    &key,
                    "`local` is not an option of #[cd::relaxed]: a relaxed CD already recovers \
                     on its own rank; use #[cd::strict(local)] for a strict CD of this rank alone",
                ));
            }
            (Kind::Relaxed, w @ ("private" | "privatized")) => {
                let class = if w == "private" {
                    Class::Private
                } else {
                    Class::Privatized
                };
                if o.classes.iter().any(|(c, _)| *c == class) {
                    return Err(twice());
                }
                if !meta.input.peek(token::Paren) {
                    return Err(meta.error(format!(
                        "expected the `GlobalPtr<T>` parameters and their lengths in elements: \
                         {w}(x = len, y = len)"
                    )));
                }
                let list = parse_regions(meta.input, class)?;
                o.classes.push((class, list));
            }
            (Kind::Strict, w @ ("private" | "privatized")) => {
                return Err(Error::new_spanned(
                    &key,
                    format!(
                        "`{w}` is an option of #[cd::relaxed]: access classes are declared by \
                         relaxed CDs (a strict CD logs nothing)"
                    ),
                ));
            }
            (_, other) => {
                return Err(Error::new_spanned(
                    &key,
                    format!("unknown option `{other}`; {options}"),
                ));
            }
        }
        Ok(())
    });
    parser.parse2(attr)?;
    if let (Some((team, _)), Some(local)) = (&o.team, &o.local) {
        let mut e = Error::new_spanned(
            local,
            "`local` and `team = ...` cannot both be given: `local` runs the CD on this rank \
             alone, `team` on the ranks of a team",
        );
        e.combine(Error::new_spanned(team, "`team` given here"));
        return Err(e);
    }
    Ok(o)
}

/// Tokens naming a non-function item for an error (its keyword and name), not its whole body.
fn item_head(item: &Item) -> TokenStream2 {
    match item {
        Item::Struct(i) => {
            let (k, n) = (&i.struct_token, &i.ident);
            quote!(#k #n)
        }
        Item::Enum(i) => {
            let (k, n) = (&i.enum_token, &i.ident);
            quote!(#k #n)
        }
        Item::Union(i) => {
            let (k, n) = (&i.union_token, &i.ident);
            quote!(#k #n)
        }
        Item::Trait(i) => {
            let (k, n) = (&i.trait_token, &i.ident);
            quote!(#k #n)
        }
        Item::Impl(i) => {
            let (k, t) = (&i.impl_token, &i.self_ty);
            quote!(#k #t)
        }
        Item::Mod(i) => {
            let (k, n) = (&i.mod_token, &i.ident);
            quote!(#k #n)
        }
        Item::Const(i) => {
            let (k, n) = (&i.const_token, &i.ident);
            quote!(#k #n)
        }
        Item::Static(i) => {
            let (k, n) = (&i.static_token, &i.ident);
            quote!(#k #n)
        }
        Item::Type(i) => {
            let (k, n) = (&i.type_token, &i.ident);
            quote!(#k #n)
        }
        other => other.to_token_stream(),
    }
}

fn expand(kind: Kind, attr: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    let attr_name = kind.attr();
    let parsed: Item = syn::parse2(item)?;
    let mut f: ItemFn = match parsed {
        Item::Fn(f) => f,
        other => {
            return Err(Error::new_spanned(
                item_head(&other),
                format!(
                    "{attr_name} applies to functions (with a body): it runs the body as a {} CD",
                    kind.word()
                ),
            ));
        }
    };
    let options = parse_options(kind, attr)?;
    let mut errors: Vec<Error> = Vec::new();

    if let Some(a) = &f.sig.asyncness {
        errors.push(Error::new_spanned(
            a,
            format!(
                "{attr_name} cannot be applied to an `async fn`: a CD body must run to \
                 completion on its rank before the CD completes"
            ),
        ));
    }
    if let Some(c) = &f.sig.constness {
        errors.push(Error::new_spanned(
            c,
            format!("{attr_name} cannot be applied to a `const fn`: a CD runs at run time"),
        ));
    }
    match &f.sig.output {
        ReturnType::Default => {
            let (fn_token, ident, parens) = (&f.sig.fn_token, &f.sig.ident, &f.sig.paren_token);
            let mut args = TokenStream2::new();
            parens.surround(&mut args, |_| {});
            errors.push(Error::new_spanned(
                quote!(#fn_token #ident #args),
                kind.return_message(),
            ));
        }
        ReturnType::Type(_, ty) => {
            if !is_result(ty) {
                errors.push(Error::new_spanned(ty, kind.return_message()));
            }
        }
    }

    let fn_name = f.sig.ident.clone();
    let cd = Ident::new("__cd", Span::mixed_site());
    let mut preserves = Vec::new();
    let mut seen: Vec<&Ident> = Vec::new();
    let empty = Vec::new();
    let list = options.preserve.as_ref().map_or(&empty, |(_, l)| l);
    for (name, len) in list {
        if name == "self" {
            errors.push(Error::new_spanned(
                name,
                format!(
                    "`self` cannot be preserved by {attr_name}; preserve the state it needs in \
                     the body, e.g. cd_runtime::current().preserve(\"x\", &mut self.x)"
                ),
            ));
            continue;
        }
        if seen.contains(&name) {
            errors.push(Error::new_spanned(
                name,
                format!("`{name}` is preserved twice"),
            ));
            continue;
        }
        seen.push(name);
        let key = LitStr::new(&name.to_string(), name.span());
        if let Some(len) = len {
            // The cells: the pointer itself is not restored, so it needs no `mut` binding.
            match locate(&f, name) {
                Found::Plain(_) => preserves.push(quote_spanned! {name.span()=>
                    ::cd_runtime::__preserve_cells(#cd, #key, #name, #len);
                }),
                Found::Pattern => errors.push(pattern_error(kind, name, &fn_name, "preserves")),
                Found::Missing => errors.push(missing_error(name, &fn_name)),
            }
            continue;
        }
        match find_param(&mut f, name) {
            Param::Plain { by_ref, ty } => {
                let arg = if by_ref {
                    quote_spanned!(name.span()=> &mut *#name)
                } else {
                    quote_spanned!(name.span()=> &mut #name)
                };
                let refusal = pointer_refusal(kind, name, &ty, by_ref);
                preserves.push(quote_spanned! {name.span()=>
                    #refusal
                    ::cd_runtime::__preserve_arg(#cd, #key, #arg);
                });
            }
            Param::Shared(ty) => errors.push(Error::new_spanned(
                name,
                format!(
                    "`{name}` is a shared reference (`{ty}`): a CD restores preserved state when it \
                     re-executes, so a preserved parameter must be `&mut T` or taken by value"
                ),
            )),
            Param::Pattern => errors.push(pattern_error(kind, name, &fn_name, "preserves")),
            Param::Missing => errors.push(missing_error(name, &fn_name)),
        }
    }

    // Access classes (#[cd::relaxed] only; the parser refuses them for strict).
    let mut declared: Vec<(&Ident, Class)> = Vec::new();
    for (class, regions) in &options.classes {
        let c = class.word();
        for (name, len) in regions {
            if name == "self" {
                errors.push(Error::new_spanned(
                    name,
                    format!(
                        "`self` cannot be declared {c}: name a `GlobalPtr<T>` parameter, or call \
                         cd_runtime::current().{c}(\"name\", ptr, len) in the body"
                    ),
                ));
                continue;
            }
            if let Some((_, earlier)) = declared.iter().find(|(n, _)| *n == name) {
                let msg = if earlier == class {
                    format!("`{name}` is declared {c} twice")
                } else {
                    format!(
                        "`{name}` is declared both {} and {c}: a region has one access class",
                        earlier.word()
                    )
                };
                errors.push(Error::new_spanned(name, msg));
                continue;
            }
            declared.push((name, *class));
            if list.iter().any(|(n, l)| n == name && l.is_none()) {
                errors.push(Error::new_spanned(
                    name,
                    format!(
                        "`{name}` is both preserved and declared {c}: preserve({name}) would \
                         preserve the pointer, not the region; write preserve({name} = len) to \
                         preserve the region's cells"
                    ),
                ));
                continue;
            }
            if *class == Class::Privatized && seen.contains(&name) {
                errors.push(Error::new_spanned(
                    name,
                    format!(
                        "`{name}` is both preserved and declared privatized: a replay of the \
                         completed CD computes the region in a shadow copy while other CDs may \
                         read it, so its cells cannot be restored in place; declare it \
                         private({name} = len) to preserve its cells, or preserve the inputs it \
                         is computed from"
                    ),
                ));
                continue;
            }
            match locate(&f, name) {
                Found::Plain(_) => {
                    let key = LitStr::new(&name.to_string(), name.span());
                    preserves.push(match class {
                        Class::Private => quote_spanned! {name.span()=>
                            ::cd_runtime::__private_arg(#cd, #key, #name, #len);
                        },
                        // Rebound: a re-execution computes the region in a shadow copy.
                        Class::Privatized => quote_spanned! {name.span()=>
                            let #name = ::cd_runtime::__privatized_arg(#cd, #key, #name, #len);
                        },
                    });
                }
                Found::Pattern => errors.push(pattern_error(kind, name, &fn_name, "declares")),
                Found::Missing => errors.push(missing_error(name, &fn_name)),
            }
        }
    }

    if let Some(mut e) = errors.pop() {
        // Report in source order.
        for other in errors.into_iter().rev() {
            let mut first = other;
            first.combine(e);
            e = first;
        }
        return Err(e);
    }

    let name = options
        .name
        .clone()
        .unwrap_or_else(|| LitStr::new(&fn_name.to_string(), fn_name.span()));
    let block = &f.block;
    let body = quote! {
        |#cd| -> ::core::result::Result<_, ::cd_runtime::CdError> {
            #(#preserves)*
            #block
        }
    };
    let call = match kind {
        Kind::Relaxed => quote!(::cd_runtime::relaxed(#name, #body)),
        Kind::Strict => {
            if let Some((_, team)) = &options.team {
                quote!(::cd_runtime::strict_on(#name, &(#team), #body))
            } else if options.local.is_some() {
                quote!(::cd_runtime::strict_local(#name, #body))
            } else {
                quote!(::cd_runtime::strict(#name, #body))
            }
        }
    };
    let (outer, inner): (Vec<_>, Vec<_>) = f
        .attrs
        .iter()
        .partition(|a| matches!(a.style, AttrStyle::Outer));
    let (vis, sig) = (&f.vis, &f.sig);
    Ok(quote! {
        #(#outer)*
        #vis #sig {
            #(#inner)*
            #call
        }
    })
}

fn missing_error(name: &Ident, fn_name: &Ident) -> Error {
    Error::new_spanned(name, format!("`{name}` is not a parameter of `{fn_name}`"))
}

fn pattern_error(kind: Kind, name: &Ident, fn_name: &Ident, verb: &str) -> Error {
    Error::new_spanned(
        name,
        format!(
            "`{name}` is bound by a pattern in the parameters of `{fn_name}`; \
             {} {verb} only parameters bound to a plain name (take the \
             whole value as `p: T` and destructure it in the body)",
            kind.attr()
        ),
    )
}

/// A compile-time check that the preserved parameter `name` (of type `ty` as written) holds
/// no global pointer (`cd_runtime::HoldsGlobalPtr`): `preserve(name)` of one would preserve
/// the pointer and silently leave the cells it points to unrestored.
///
/// The runtime's probe (autoref specialization) gives a refusal token for a type that holds a
/// pointer; a local trait with the parameter's own name in its message is implemented for the
/// other token only, so rustc's error names `name = len`.
fn pointer_refusal(kind: Kind, name: &Ident, ty: &str, by_ref: bool) -> TokenStream2 {
    let attr = kind.attr();
    let message = format!(
        "`{name}: {ty}` holds a pointer: {attr} preserve({name}) would preserve the \
         pointer, not the cells it points to"
    );
    let label = format!(
        "for a `GlobalPtr<T>` or `ViewPtr<T>`, write preserve({name} = len) to preserve `len` elements it points to"
    );
    let note = format!(
        "for a value that holds pointers among other state, preserve in the body what must be \
         restored: cd_runtime::current().preserve_global(\"..\", ptr, len) (or preserve_view) \
         for cells, \
         cd_runtime::current().preserve(\"{name}\", ..) for the value itself"
    );
    let span = name.span();
    let value = if by_ref {
        quote_spanned!(span=> &*#name)
    } else {
        quote_spanned!(span=> &#name)
    };
    let cells = Ident::new("__PreserveTheCells", Span::mixed_site());
    let check = Ident::new("__holds_no_pointer", Span::mixed_site());
    quote_spanned! {span=>
        {
            #[diagnostic::on_unimplemented(message = #message, label = #label, note = #note)]
            trait #cells {}
            impl #cells for ::cd_runtime::__NoPointer {}
            fn #check<K: #cells>(_: K) {}
            #[allow(unused_imports)]
            use ::cd_runtime::{__ProbeHoldsPointer as _, __ProbeNoPointer as _};
            #check((&::cd_runtime::__Probe(#value)).__pointer_kind());
        }
    }
}

/// Tokens as a person would write them (`&Vec<f64>`, not `& Vec < f64 >`).
fn shown(t: &impl ToTokens) -> String {
    let mut s = t.to_token_stream().to_string();
    for (from, to) in [
        (" <", "<"),
        ("< ", "<"),
        (" >", ">"),
        (" ,", ","),
        (" ::", "::"),
        (":: ", "::"),
        ("& ", "&"),
    ] {
        s = s.replace(from, to);
    }
    s
}

/// True for a type path whose last segment is `Result` (`Result<T, E>`, `std::result::Result`,
/// or an alias such as `cd::Result<T>`).
fn is_result(ty: &Type) -> bool {
    match ty {
        Type::Path(p) => p
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident.to_string().ends_with("Result")),
        Type::Paren(p) => is_result(&p.elem),
        Type::Group(g) => is_result(&g.elem),
        _ => false,
    }
}

enum Param {
    /// A parameter bound to a plain name: `by_ref` when its type is `&mut T`, whose type as
    /// written is `ty`.
    Plain { by_ref: bool, ty: String },
    /// A plain parameter of type `&T`.
    Shared(String),
    /// The name is bound inside a pattern (`(a, b): (f64, f64)`, `ref a`, `a @ ..`).
    Pattern,
    /// No parameter binds the name.
    Missing,
}

enum Found {
    /// The parameter at this index of the signature binds the name plainly (`x: T`,
    /// `mut x: T`).
    Plain(usize),
    /// The name is bound inside a pattern.
    Pattern,
    /// No parameter binds the name.
    Missing,
}

/// Where the parameter `name` is.
fn locate(f: &ItemFn, name: &Ident) -> Found {
    for (i, arg) in f.sig.inputs.iter().enumerate() {
        let FnArg::Typed(pt) = arg else { continue };
        match &*pt.pat {
            Pat::Ident(PatIdent {
                ident,
                by_ref: None,
                subpat: None,
                ..
            }) if ident == name => return Found::Plain(i),
            pat => {
                if binds(pat, name) {
                    return Found::Pattern;
                }
            }
        }
    }
    Found::Missing
}

/// Finds the parameter `name`; a by-value one is made `mut` so it can be restored.
fn find_param(f: &mut ItemFn, name: &Ident) -> Param {
    let i = match locate(f, name) {
        Found::Plain(i) => i,
        Found::Pattern => return Param::Pattern,
        Found::Missing => return Param::Missing,
    };
    let Some(FnArg::Typed(pt)) = f.sig.inputs.iter_mut().nth(i) else {
        unreachable!("locate returns the index of a typed parameter")
    };
    let ty = strip(&pt.ty).clone();
    let Pat::Ident(PatIdent {
        ident, mutability, ..
    }) = &mut *pt.pat
    else {
        unreachable!("locate returns a plain parameter")
    };
    match ty {
        Type::Reference(ref r) if r.mutability.is_some() => Param::Plain {
            by_ref: true,
            ty: shown(&ty),
        },
        Type::Reference(_) => Param::Shared(shown(&ty)),
        _ => {
            if mutability.is_none() {
                *mutability = Some(Token![mut](ident.span()));
            }
            Param::Plain {
                by_ref: false,
                ty: shown(&ty),
            }
        }
    }
}

fn strip(ty: &Type) -> &Type {
    match ty {
        Type::Paren(p) => strip(&p.elem),
        Type::Group(g) => strip(&g.elem),
        other => other,
    }
}

/// True when `pat` binds `name` somewhere.
fn binds(pat: &Pat, name: &Ident) -> bool {
    match pat {
        Pat::Ident(p) => p.ident == *name || p.subpat.as_ref().is_some_and(|(_, s)| binds(s, name)),
        Pat::Tuple(t) => t.elems.iter().any(|p| binds(p, name)),
        Pat::TupleStruct(t) => t.elems.iter().any(|p| binds(p, name)),
        Pat::Struct(s) => s.fields.iter().any(|fp| binds(&fp.pat, name)),
        Pat::Slice(s) => s.elems.iter().any(|p| binds(p, name)),
        Pat::Reference(r) => binds(&r.pat, name),
        Pat::Paren(p) => binds(&p.pat, name),
        Pat::Or(o) => o.cases.iter().any(|p| binds(p, name)),
        Pat::Type(t) => binds(&t.pat, name),
        _ => false,
    }
}
