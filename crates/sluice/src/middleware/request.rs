//! Extractors over the request itself: a header, a path or query parameter, and a value that
//! earlier middleware (authentication) put in the request's extensions.
//!
//! Each appends nothing when its value is absent (see [`Extract`]); a value that is present but
//! not text is a 400.

use std::fmt;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use axum::extract::{FromRequestParts, MatchedPath, Query, RawPathParams};
use http::header::HeaderName;
use http::request::Parts;

use super::extract::{AttributeList, Extract, ExtractError};

/// A request header's value.
#[derive(Debug, Clone)]
pub struct Header {
    name: String,
    header: HeaderName,
}

impl Header {
    /// Extracts header `header` (e.g. `HeaderName::from_static("x-api-key")`) as attribute `name`.
    pub fn new(name: impl Into<String>, header: HeaderName) -> Header {
        Header {
            name: name.into(),
            header,
        }
    }
}

impl Extract for Header {
    fn extract(&self, parts: &mut Parts, out: &mut AttributeList) -> Result<(), ExtractError> {
        if let Some(value) = parts.headers.get(&self.header) {
            let text = value.to_str().map_err(|_| {
                ExtractError::bad_request(format!("header `{}` is not visible ASCII", self.header))
            })?;
            out.push((self.name.clone(), text.trim().to_string()));
        }
        Ok(())
    }
}

/// A path parameter of the matched route (`/employees/{id}` → `id`), percent-decoded.
///
/// axum records path parameters when it routes, so the layer must sit inside the router (on a
/// route, or through `Router::layer` / `Router::route_layer`, which wrap each route), not wrap a
/// router from outside; otherwise the request answers 500 saying so.
#[derive(Debug, Clone)]
pub struct PathParam {
    name: String,
    param: String,
}

impl PathParam {
    /// Extracts path parameter `param` as the attribute of the same name.
    pub fn new(param: impl Into<String>) -> PathParam {
        let param = param.into();
        PathParam {
            name: param.clone(),
            param,
        }
    }

    /// Names the attribute differently from the parameter.
    pub fn named(mut self, name: impl Into<String>) -> PathParam {
        self.name = name.into();
        self
    }
}

impl Extract for PathParam {
    fn extract(&self, parts: &mut Parts, out: &mut AttributeList) -> Result<(), ExtractError> {
        // axum exposes path parameters only through its async extractor. That extractor reads
        // the request's extensions and is ready at once; it is polled a single time, and were
        // it ever pending the request fails with a clear error instead of waiting.
        let polled = {
            let future = pin!(RawPathParams::from_request_parts(parts, &()));
            future.poll(&mut Context::from_waker(Waker::noop()))
        };
        let params = match polled {
            Poll::Ready(Ok(params)) => params,
            Poll::Ready(Err(rejection)) => {
                let message = rejection.body_text();
                return Err(if rejection.status() == http::StatusCode::BAD_REQUEST {
                    ExtractError::bad_request(message)
                } else {
                    ExtractError::misconfigured(format!(
                        "path parameter `{}`: {message}; apply the layer inside the router",
                        self.param
                    ))
                });
            }
            Poll::Pending => {
                return Err(ExtractError::misconfigured(
                    "path parameters were not available synchronously",
                ));
            }
        };
        match params.iter().find(|(k, _)| *k == self.param) {
            Some((_, value)) => {
                out.push((self.name.clone(), value.to_string()));
                Ok(())
            }
            // A route that matched has every parameter it declares, so an absent one means the
            // route does not declare it or the layer runs before routing: wiring, not input.
            None => Err(ExtractError::misconfigured(
                match parts.extensions.get::<MatchedPath>() {
                    Some(route) => format!(
                        "path parameter `{}` is not in the route `{}`",
                        self.param,
                        route.as_str()
                    ),
                    None => format!(
                        "path parameter `{}`: no route has matched yet; apply the layer inside \
                         the router (on the route or with `Router::layer`), not around it",
                        self.param
                    ),
                },
            )),
        }
    }
}

/// A query string parameter (`?q=...`), percent-decoded; the first one when repeated.
#[derive(Debug, Clone)]
pub struct QueryParam {
    name: String,
    param: String,
}

impl QueryParam {
    /// Extracts query parameter `param` as the attribute of the same name.
    pub fn new(param: impl Into<String>) -> QueryParam {
        let param = param.into();
        QueryParam {
            name: param.clone(),
            param,
        }
    }

    /// Names the attribute differently from the parameter.
    pub fn named(mut self, name: impl Into<String>) -> QueryParam {
        self.name = name.into();
        self
    }
}

impl Extract for QueryParam {
    fn extract(&self, parts: &mut Parts, out: &mut AttributeList) -> Result<(), ExtractError> {
        let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)
            .map_err(|e| ExtractError::bad_request(format!("query string: {}", e.body_text())))?;
        if let Some((_, value)) = pairs.into_iter().find(|(k, _)| *k == self.param) {
            out.push((self.name.clone(), value));
        }
        Ok(())
    }
}

/// A value that earlier middleware inserted in the request's extensions, such as the
/// authenticated user.
///
/// ```
/// use sluice::middleware::Extension;
///
/// #[derive(Clone)]
/// struct CurrentUser { id: u64 }
///
/// // By a field of the inserted type:
/// let member = Extension::map("member", |u: &CurrentUser| u.id.to_string());
/// // Or by the type itself when it implements Display:
/// #[derive(Clone)]
/// struct MemberId(String);
/// impl std::fmt::Display for MemberId {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str(&self.0) }
/// }
/// let member = Extension::<MemberId>::new("member");
/// # let _ = member;
/// ```
pub struct Extension<T> {
    name: String,
    to_value: fn(&T) -> String,
}

impl<T: Send + Sync + 'static> Extension<T> {
    /// Extracts the extension of type `T` with its `Display` text as attribute `name`.
    pub fn new(name: impl Into<String>) -> Extension<T>
    where
        T: fmt::Display,
    {
        Extension::map(name, |t| t.to_string())
    }

    /// Extracts `to_value(extension)` as attribute `name` (a plain `fn`: it captures nothing).
    pub fn map(name: impl Into<String>, to_value: fn(&T) -> String) -> Extension<T> {
        Extension {
            name: name.into(),
            to_value,
        }
    }
}

impl<T> Clone for Extension<T> {
    fn clone(&self) -> Self {
        Extension {
            name: self.name.clone(),
            to_value: self.to_value,
        }
    }
}

impl<T> fmt::Debug for Extension<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extension")
            .field("name", &self.name)
            .field("type", &std::any::type_name::<T>())
            .finish()
    }
}

impl<T: Send + Sync + 'static> Extract for Extension<T> {
    fn extract(&self, parts: &mut Parts, out: &mut AttributeList) -> Result<(), ExtractError> {
        if let Some(t) = parts.extensions.get::<T>() {
            out.push((self.name.clone(), (self.to_value)(t)));
        }
        Ok(())
    }
}
