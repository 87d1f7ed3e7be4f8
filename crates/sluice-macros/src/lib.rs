//! `#[sluice::limited]`: rate-limit an async function declaratively.
//!
//! ```text
//! #[sluice::limited(rule = "employee", attribute = id, limiter = self.limiter)]
//! async fn employee(&self, id: u64) -> Result<Employee, AppError> { ... }
//! ```
//!
//! Before the body runs, the function checks one call against the rule and returns early with
//! `Err(sluice::Limited)` converted by `?` (so the function's error type needs
//! `From<sluice::Limited>`; `Result<T, sluice::Limited>` works as it is).
//!
//! Arguments:
//! - `rule = "name"` (required): the rule to check;
//! - `attribute = expr`: one attribute, named after the expression's last identifier
//!   (`attribute = id` is attribute `id`, `attribute = user.member` is attribute `member`); its
//!   value is the expression's `ToString` text;
//! - `attributes(name = expr, ...)`: several attributes with explicit names
//!   (`attributes(member = user.id, ip = addr)`), for limits that count per several;
//! - `limiter = expr`: a `Limiter`, `&Limiter` or `Arc<Limiter>` (e.g. `self.limiter`); without
//!   it the global limiter set by `sluice::set_global_limiter` is used;
//! - `cost = expr`: units per call (default 1).
//!
//! The expansion refers to the crate as `::sluice`.
//!
//! Former spellings, still accepted: the attribute `#[sluice::limit]` (now `limited`: "limit"
//! names the rule's `Limit` alone), and the arguments `key = expr` and `key(name = expr, ...)`
//! (now `attribute` and `attributes`: a request's named values are attributes everywhere).
//!
//! # Layout
//! One file: argument parsing (`Args`) and the expansion (`expand`), with unit tests of the
//! error messages.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ItemFn, LitStr, Meta, MetaNameValue, ReturnType, Token};

/// Rate-limits an async function (see the crate docs and `sluice::Limited`).
#[proc_macro_attribute]
pub fn limited(args: TokenStream, item: TokenStream) -> TokenStream {
    limit(args, item)
}

/// The former name of [`macro@limited`], still accepted.
#[proc_macro_attribute]
pub fn limit(args: TokenStream, item: TokenStream) -> TokenStream {
    match expand(args.into(), item.into()) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// The parsed arguments of the attribute.
struct Args {
    rule: LitStr,
    keys: Vec<(String, Expr)>,
    limiter: Option<Expr>,
    cost: Option<Expr>,
}

const EXPECTED: &str = "expected `rule = \"name\"`, `attribute = expr`, \
                        `attributes(name = expr, ...)`, `limiter = expr` or `cost = expr`";

impl Args {
    fn parse(tokens: TokenStream2) -> syn::Result<Args> {
        let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(tokens)?;
        let mut rule = None;
        let mut keys = Vec::new();
        let mut limiter = None;
        let mut cost = None;
        for meta in metas {
            let name = meta
                .path()
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_default();
            match (name.as_str(), meta) {
                ("rule", Meta::NameValue(nv)) => match &nv.value {
                    Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    }) => set(&mut rule, s.clone(), &nv)?,
                    other => {
                        return Err(syn::Error::new(
                            other.span(),
                            "`rule` takes a string literal: rule = \"name\"",
                        ));
                    }
                },
                // `key` is the former spelling of `attribute` and `attributes`.
                ("attribute" | "key", Meta::NameValue(nv)) => {
                    let attribute = implied_name(&nv.value)?;
                    push_key(&mut keys, attribute, nv.value, nv.path.span())?;
                }
                ("attributes" | "key", Meta::List(list)) => {
                    let pairs = list.parse_args_with(
                        Punctuated::<MetaNameValue, Token![,]>::parse_terminated,
                    )?;
                    for nv in pairs {
                        let attribute =
                            nv.path
                                .get_ident()
                                .map(ToString::to_string)
                                .ok_or_else(|| {
                                    syn::Error::new(
                                        nv.path.span(),
                                        "an attribute name is one identifier",
                                    )
                                })?;
                        push_key(&mut keys, attribute, nv.value, nv.path.span())?;
                    }
                }
                ("limiter", Meta::NameValue(nv)) => set(&mut limiter, nv.value.clone(), &nv)?,
                ("cost", Meta::NameValue(nv)) => set(&mut cost, nv.value.clone(), &nv)?,
                (_, meta) => {
                    let message = if name.is_empty() {
                        format!("unknown argument; {EXPECTED}")
                    } else {
                        format!("unknown or malformed argument `{name}`; {EXPECTED}")
                    };
                    return Err(syn::Error::new(meta.span(), message));
                }
            }
        }
        let rule = rule.ok_or_else(|| {
            syn::Error::new(
                Span::call_site(),
                "missing `rule = \"name\"`: which rule limits this function?",
            )
        })?;
        Ok(Args {
            rule,
            keys,
            limiter,
            cost,
        })
    }
}

fn set<T>(slot: &mut Option<T>, value: T, at: &MetaNameValue) -> syn::Result<()> {
    if slot.is_some() {
        return Err(syn::Error::new(
            at.path.span(),
            "argument given twice; give each argument once",
        ));
    }
    *slot = Some(value);
    Ok(())
}

/// `id` → `id`, `user.member` → `member`, `self.user.id` → `id`.
fn implied_name(expr: &Expr) -> syn::Result<String> {
    let name = match expr {
        Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        Expr::Field(f) => match &f.member {
            syn::Member::Named(ident) => Some(ident.to_string()),
            syn::Member::Unnamed(_) => None,
        },
        Expr::Reference(r) => return implied_name(&r.expr),
        _ => None,
    };
    name.ok_or_else(|| {
        syn::Error::new(
            expr.span(),
            "cannot name an attribute after this expression; write `attributes(name = expr)`",
        )
    })
}

/// Attribute names follow the rules' `by` syntax, checked here so a typo fails at compile time.
fn push_key(
    keys: &mut Vec<(String, Expr)>,
    name: String,
    value: Expr,
    span: Span,
) -> syn::Result<()> {
    let name = name.strip_prefix("r#").unwrap_or(&name).to_string();
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(syn::Error::new(
            span,
            format!("attribute `{name}`: names are 1 to 64 characters of a-z, 0-9 and _"),
        ));
    }
    if keys.iter().any(|(k, _)| *k == name) {
        return Err(syn::Error::new(
            span,
            format!("attribute `{name}` given twice"),
        ));
    }
    keys.push((name, value));
    Ok(())
}

/// Expands the attribute on `item` (exposed for tests of the error messages).
fn expand(args: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    let args = Args::parse(args)?;
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = syn::parse2::<ItemFn>(item)?;
    if sig.asyncness.is_none() {
        return Err(syn::Error::new(
            sig.fn_token.span,
            "#[sluice::limited] applies to `async fn`s",
        ));
    }
    let question = match &sig.output {
        ReturnType::Default => {
            return Err(syn::Error::new(
                sig.ident.span(),
                "#[sluice::limited] needs a function returning `Result<T, E>` where \
                 `E: From<sluice::Limited>`",
            ));
        }
        // A function whose error type lacks `From<sluice::Limited>` is reported at its return
        // type, where the fix is.
        ReturnType::Type(_, ty) => quote_spanned!(ty.span()=> ?),
    };
    let rule = &args.rule;
    let names = args.keys.iter().map(|(name, _)| name);
    let values = args.keys.iter().map(|(_, value)| value);
    let count = args.keys.len();
    // `let r = &(expr);` keeps a temporary the expression makes alive for the whole check.
    let limiter = match &args.limiter {
        Some(expr) => quote! {
            let __sluice_limiter_ref = &(#expr);
            let __sluice_limiter = ::core::option::Option::Some(
                <_ as ::core::borrow::Borrow<::sluice::Limiter>>::borrow(__sluice_limiter_ref)
            );
        },
        None => quote!(let __sluice_limiter = ::core::option::Option::None;),
    };
    let cost = match &args.cost {
        Some(expr) => quote!(::sluice::Check::cost(#expr)),
        None => quote!(::sluice::Check::ONE),
    };
    // The lease of a concurrency limit is held while the body runs, released when it returns.
    Ok(quote! {
        #(#attrs)*
        #vis #sig {
            let __sluice_lease = {
                #limiter
                let __sluice_attributes: [(&'static str, ::std::string::String); #count] = [
                    #((#names, ::std::string::ToString::to_string(&(#values))),)*
                ];
                let __sluice_decision = ::sluice::__macro_support::check_call(
                    __sluice_limiter,
                    #rule,
                    &__sluice_attributes[..],
                    #cost,
                )
                .await #question;
                ::sluice::__macro_support::hold_lease(__sluice_limiter, __sluice_decision)
            };
            #block
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(args: TokenStream2, item: TokenStream2) -> String {
        match expand(args, item) {
            Ok(tokens) => panic!("expected an error, got {tokens}"),
            Err(e) => e.to_string(),
        }
    }

    fn item() -> TokenStream2 {
        quote!(
            async fn f(id: u64) -> Result<(), E> {
                Ok(())
            }
        )
    }

    #[test]
    fn bad_arguments_say_what_is_expected() {
        let e = error(quote!(rule = "r", ky = id), item());
        assert!(e.contains("unknown or malformed argument `ky`"), "{e}");
        assert!(e.contains("attributes(name = expr"), "{e}");
        let e = error(quote!(attribute = id), item());
        assert!(e.contains("missing `rule"), "{e}");
        let e = error(quote!(rule = emp), item());
        assert!(e.contains("string literal"), "{e}");
        let e = error(quote!(rule = "r", attribute = id + 1), item());
        assert!(e.contains("attributes(name = expr)"), "{e}");
        let e = error(quote!(rule = "r", attributes(Member = m)), item());
        assert!(e.contains("a-z, 0-9 and _"), "{e}");
        let e = error(quote!(rule = "r", attributes(id = a, id = b)), item());
        assert!(e.contains("given twice"), "{e}");
        let e = error(quote!(rule = "r", rule = "s"), item());
        assert!(e.contains("given twice"), "{e}");
    }

    #[test]
    fn only_async_functions_returning_results() {
        let e = error(
            quote!(rule = "r"),
            quote!(
                fn f() -> Result<(), E> {
                    Ok(())
                }
            ),
        );
        assert!(e.contains("async fn"), "{e}");
        let e = error(
            quote!(rule = "r"),
            quote!(
                async fn f() {}
            ),
        );
        assert!(e.contains("Result<T, E>"), "{e}");
    }

    #[test]
    fn the_former_key_arguments_expand_as_attributes() {
        let item = || {
            quote!(
                async fn f(id: u64, user: U, addr: A) -> Result<(), E> {
                    Ok(())
                }
            )
        };
        let expanded = |args: TokenStream2| expand(args, item()).unwrap().to_string();
        assert_eq!(
            expanded(quote!(rule = "r", key = id)),
            expanded(quote!(rule = "r", attribute = id))
        );
        assert_eq!(
            expanded(quote!(rule = "r", key(member = user.id, ip = addr))),
            expanded(quote!(rule = "r", attributes(member = user.id, ip = addr)))
        );
        let e = error(quote!(rule = "r", key = id, attribute = id), item());
        assert!(e.contains("given twice"), "{e}");
    }

    #[test]
    fn names_are_implied_by_the_last_identifier() {
        let expr: Expr = syn::parse_quote!(self.user.member_id);
        assert_eq!(implied_name(&expr).unwrap(), "member_id");
        let expr: Expr = syn::parse_quote!(&id);
        assert_eq!(implied_name(&expr).unwrap(), "id");
    }

    #[test]
    fn expansion_checks_before_the_body() {
        let out = expand(
            quote!(
                rule = "emp",
                attributes(member = user.id, ip = addr),
                limiter = self.limiter
            ),
            quote!(
                async fn f(&self, user: U, addr: A) -> Result<u8, E> {
                    Ok(1)
                }
            ),
        )
        .unwrap()
        .to_string();
        let check = out.find("check_call").unwrap();
        let body = out.find("Ok (1)").unwrap();
        assert!(check < body, "{out}");
        assert!(out.contains("\"member\""), "{out}");
        assert!(out.contains("self . limiter"), "{out}");
    }
}
