//! The `#[remote]` attribute of `pgas`, used as `#[pgas::remote]`: see [`macro@remote`].

#![forbid(unsafe_code)]

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{Error, FnArg, ItemFn, ReturnType, Type};

/// Makes a function callable on any rank by `pgas::rpc(rank, f, args)` and
/// `pgas::rpc_ff(rank, f, args)`, registered at link time (no `RpcTable`).
///
/// ```ignore
/// #[pgas::remote]
/// fn add(a: u64, b: u64) -> u64 {
///     a + b
/// }
/// // pgas::rpc(1, add, (2, 3)).wait() == 5; add(2, 3) == 5 still calls it here.
/// ```
///
/// The function becomes a constant `pgas::Remote` of the same name, which still calls the
/// function where it is named (`add(2, 3)`). The arguments travel as one value: the argument
/// itself for a function of one parameter, a tuple of them otherwise (`()` for none); each
/// parameter must be `serde::Serialize + serde::de::DeserializeOwned`. A function returning
/// `pgas::Future<T>` replies when the future is ready, with its `T`. The function is
/// registered under its path (`crate::module::name`), which every process of a job agrees on
/// at launch (the same binary everywhere). It runs at the target inside its progress, where it
/// may start communication but not wait.
///
/// Refused: generic, `async`, `const`, `unsafe` or `extern` functions, and methods (`self`).
/// Being a constant, the name cannot be rebound by a `let` where it is in scope (`let add =
/// ...` is a pattern against the constant, a compile error): name the binding otherwise.
#[proc_macro_attribute]
pub fn remote(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = TokenStream2::from(attr);
    let out = if !attr.is_empty() {
        Err(Error::new(
            attr.span(),
            "#[pgas::remote] takes no options: write `#[pgas::remote]`",
        ))
    } else {
        syn::parse::<ItemFn>(item).and_then(expand)
    };
    out.unwrap_or_else(Error::into_compile_error).into()
}

fn expand(f: ItemFn) -> syn::Result<TokenStream2> {
    let sig = &f.sig;
    let refuse = |span: proc_macro2::Span, what: &str| {
        Err(Error::new(
            span,
            format!(
                "#[pgas::remote] cannot register {what}: a remote function is a plain `fn` \
                 whose arguments and result are sent between ranks"
            ),
        ))
    };
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return refuse(sig.generics.span(), "a generic function");
    }
    if let Some(a) = &sig.asyncness {
        return refuse(a.span, "an `async` function");
    }
    if let Some(c) = &sig.constness {
        return refuse(c.span, "a `const` function");
    }
    if let Some(u) = &sig.unsafety {
        return refuse(u.span, "an `unsafe` function");
    }
    if let Some(abi) = &sig.abi {
        return refuse(abi.extern_token.span, "an `extern` function");
    }
    if let Some(v) = &sig.variadic {
        return refuse(v.dots.spans[0], "a variadic function");
    }
    let mut types: Vec<Type> = Vec::new();
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(r) => return refuse(r.span(), "a method (`self`)"),
            FnArg::Typed(t) => types.push((*t.ty).clone()),
        }
    }
    let name = &sig.ident;
    let vis = &f.vis;
    let body_fn = format_ident!("__pgas_remote_body_{}", name);
    let invoke_fn = format_ident!("__pgas_remote_invoke_{}", name);
    let entry = format_ident!("__PGAS_REMOTE_ENTRY_{}", name);
    let ret: Type = match &sig.output {
        ReturnType::Default => syn::parse_quote!(()),
        ReturnType::Type(_, t) => (**t).clone(),
    };
    let values: Vec<_> = (0..types.len())
        .map(|i| format_ident!("__a{}", i))
        .collect();
    let (args_ty, args_pat) = if types.len() == 1 {
        let t = &types[0];
        let v = &values[0];
        (quote!(#t), quote!(#v))
    } else {
        (quote!((#(#types,)*)), quote!((#(#values,)*)))
    };
    let docs: Vec<_> = f
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect();
    let others: Vec<_> = f
        .attrs
        .iter()
        .filter(|a| !a.path().is_ident("doc"))
        .collect();
    let mut body_sig = sig.clone();
    body_sig.ident = body_fn.clone();
    let block = &f.block;
    let path = quote!(::pgas::remote_registry);
    Ok(quote! {
        #[doc(hidden)]
        #[allow(non_snake_case)]
        #(#others)*
        #body_sig #block

        #[doc(hidden)]
        #[allow(non_snake_case)]
        fn #invoke_fn(bytes: &[u8]) -> #path::InvokeResult {
            #path::invoke(bytes, |#args_pat: #args_ty| #body_fn(#(#values),*))
        }

        #[::pgas::__private::linkme::distributed_slice(#path::REMOTES)]
        #[linkme(crate = ::pgas::__private::linkme)]
        #[doc(hidden)]
        #[allow(non_upper_case_globals)]
        static #entry: #path::RemoteEntry =
            #path::RemoteEntry::new(::core::concat!(::core::module_path!(), "::", ::core::stringify!(#name)), #invoke_fn);

        #(#docs)*
        #[allow(non_upper_case_globals)]
        #vis const #name: #path::Remote<#args_ty, <#ret as #path::Reply>::Value, fn(#(#types),*) -> #ret> =
            #path::Remote::new(&#entry, #body_fn);
    })
}
