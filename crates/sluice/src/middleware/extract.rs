//! The [`Extract`] trait: how the middleware learns a request's identity attributes.
//!
//! An extractor reads the request head and appends `(attribute, value)` pairs. Absence is not an
//! error here: an extractor whose value is missing appends nothing, and the limiter decides
//! (identity fallback such as `member|ip` relies on that; a limit that needs the attribute
//! answers 400 with the attribute's name). An extractor fails only when a value is present but
//! unusable (400) or the server is wired wrongly (500), so a client can never cause a panic.
//!
//! Composites: several extractors for one rule are a tuple, a `Vec<Box<dyn Extract>>`, or
//! successive [`SluiceLayer::extract`](super::SluiceLayer::extract) calls.

use std::sync::Arc;

use http::StatusCode;
use http::request::Parts;

/// The attributes extracted from one request, in extraction order.
pub type AttributeList = Vec<(String, String)>;

/// Appends a request's identity attributes to `out`.
///
/// ```
/// use http::request::Parts;
/// use sluice::middleware::{AttributeList, Extract, ExtractError};
///
/// /// The tenant, from a subdomain: `acme.example.com` → `tenant=acme`.
/// struct Tenant;
///
/// impl Extract for Tenant {
///     fn extract(&self, parts: &mut Parts, out: &mut AttributeList) -> Result<(), ExtractError> {
///         let host = parts.headers.get(http::header::HOST).and_then(|h| h.to_str().ok());
///         if let Some(sub) = host.and_then(|h| h.split('.').next()) {
///             out.push(("tenant".into(), sub.to_string()));
///         }
///         Ok(())
///     }
/// }
///
/// let (mut parts, ()) = http::Request::builder()
///     .header("host", "acme.example.com")
///     .body(())
///     .unwrap()
///     .into_parts();
/// let mut out = AttributeList::new();
/// Tenant.extract(&mut parts, &mut out).unwrap();
/// assert_eq!(out, [("tenant".to_string(), "acme".to_string())]);
/// ```
pub trait Extract: Send + Sync + 'static {
    /// Appends this extractor's attributes; appends nothing when the request lacks them.
    ///
    /// `parts` is mutable only because some framework accessors need it (axum's path
    /// parameters); an extractor must not change the request.
    fn extract(&self, parts: &mut Parts, out: &mut AttributeList) -> Result<(), ExtractError>;
}

/// Why attributes could not be extracted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ExtractError {
    /// Whose fault it is.
    pub kind: ExtractErrorKind,
    /// What is wrong, for the response body and the log.
    pub message: String,
}

/// Whose fault an [`ExtractError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExtractErrorKind {
    /// The request carries a value that cannot be used (HTTP 400).
    BadRequest,
    /// The server is wired wrongly, e.g. no peer address was recorded (HTTP 500).
    Misconfigured,
}

impl ExtractError {
    /// A value in the request cannot be used.
    pub fn bad_request(message: impl Into<String>) -> ExtractError {
        ExtractError {
            kind: ExtractErrorKind::BadRequest,
            message: message.into(),
        }
    }

    /// The server is wired wrongly.
    pub fn misconfigured(message: impl Into<String>) -> ExtractError {
        ExtractError {
            kind: ExtractErrorKind::Misconfigured,
            message: message.into(),
        }
    }

    /// The HTTP status this error answers with.
    pub fn status(&self) -> StatusCode {
        match self.kind {
            ExtractErrorKind::BadRequest => StatusCode::BAD_REQUEST,
            ExtractErrorKind::Misconfigured => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// An extractor from a closure, for one-off needs.
///
/// ```
/// use sluice::middleware::{from_fn, AttributeList, ExtractError};
/// let method = from_fn(|parts, out: &mut AttributeList| {
///     out.push(("method".into(), parts.method.to_string()));
///     Ok::<_, ExtractError>(())
/// });
/// # let _ = method;
/// ```
pub fn from_fn<F>(f: F) -> FromFn<F>
where
    F: Fn(&mut Parts, &mut AttributeList) -> Result<(), ExtractError> + Send + Sync + 'static,
{
    FromFn(f)
}

/// See [`from_fn`].
#[derive(Debug, Clone)]
pub struct FromFn<F>(F);

impl<F> Extract for FromFn<F>
where
    F: Fn(&mut Parts, &mut AttributeList) -> Result<(), ExtractError> + Send + Sync + 'static,
{
    fn extract(&self, parts: &mut Parts, out: &mut AttributeList) -> Result<(), ExtractError> {
        (self.0)(parts, out)
    }
}

impl<E: Extract + ?Sized> Extract for Box<E> {
    fn extract(&self, parts: &mut Parts, out: &mut AttributeList) -> Result<(), ExtractError> {
        (**self).extract(parts, out)
    }
}

impl<E: Extract + ?Sized> Extract for Arc<E> {
    fn extract(&self, parts: &mut Parts, out: &mut AttributeList) -> Result<(), ExtractError> {
        (**self).extract(parts, out)
    }
}

impl<E: Extract> Extract for Vec<E> {
    fn extract(&self, parts: &mut Parts, out: &mut AttributeList) -> Result<(), ExtractError> {
        self.iter().try_for_each(|e| e.extract(parts, out))
    }
}

macro_rules! tuple_extract {
    ($($name:ident),+) => {
        impl<$($name: Extract),+> Extract for ($($name,)+) {
            #[allow(non_snake_case)]
            fn extract(&self, parts: &mut Parts, out: &mut AttributeList) -> Result<(), ExtractError> {
                let ($($name,)+) = self;
                $($name.extract(parts, out)?;)+
                Ok(())
            }
        }
    };
}

tuple_extract!(A);
tuple_extract!(A, B);
tuple_extract!(A, B, C);
tuple_extract!(A, B, C, D);
tuple_extract!(A, B, C, D, E);
tuple_extract!(A, B, C, D, E, F);
