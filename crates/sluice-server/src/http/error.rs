//! Request bodies parsed into [`ApiError`]s, and the errors of paths and methods the API does
//! not have.
//!
//! Every client mistake is a 4xx with `{"error": {"code", "message"}}` (see
//! [`crate::api_error`]): axum's own rejections are plain text, so bodies are taken as bytes and
//! parsed here.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// Largest request body accepted (bigger ones get 413).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

pub use crate::api_error::{ApiError, ErrorCode};

/// Parses a JSON body, whatever its content type (gateways and `curl -d` often send none).
pub fn json_body<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    parse_json(&body)
}

/// Parses a JSON body into a value that may borrow from its bytes; a body that could not be
/// read is the 4xx it ended with.
pub fn parse_json<'a, T: Deserialize<'a>>(
    body: &'a Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    parse_bytes(body.as_ref().map_err(unreadable)?)
}

/// The 4xx of a body that could not be read.
pub fn unreadable(rejection: &BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        too_large()
    } else {
        ApiError::bad_json(rejection.body_text())
    }
}

/// The 413 of a body over [`MAX_BODY_BYTES`].
pub fn too_large() -> ApiError {
    ApiError::new(
        ErrorCode::BodyTooLarge,
        format!("the request body is larger than {MAX_BODY_BYTES} bytes"),
    )
}

/// Parses a JSON body that was read whole.
pub fn parse_bytes<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_json(
            "the request body is empty; expected a JSON object",
        ));
    }
    serde_json::from_slice(bytes).map_err(|e| ApiError::bad_json(format!("invalid JSON body: {e}")))
}

/// The 404 for paths the API does not have.
pub async fn no_route(uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        format!("no endpoint at {}", uri.path()),
    )
}

/// The 405 for a known path with a method it does not take.
pub async fn wrong_method(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        format!("{} does not take {method}", uri.path()),
    )
}
