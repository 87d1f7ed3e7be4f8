//! Errors as the API answers them, and request bodies parsed into them.
//!
//! Every client mistake is a 4xx with `{"error": "..."}` saying what is wrong: axum's own
//! rejections are plain text, so bodies are taken as bytes and parsed here. Only a store failure
//! during an admin operation is a 5xx (503): the client's input is never the cause of one.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::MAX_BODY_BYTES;

/// An error answer: a status and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What is wrong, for the `error` field.
    pub message: String,
}

impl ApiError {
    /// A 400 with this message.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// Any status with this message.
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(serde_json::json!({ "error": self.message })),
        )
            .into_response()
    }
}

impl From<sluice::Error> for ApiError {
    fn from(error: sluice::Error) -> ApiError {
        let status = match &error {
            sluice::Error::UnknownRule { .. } => StatusCode::NOT_FOUND,
            sluice::Error::RuntimeLimitsFull { .. } => StatusCode::CONFLICT,
            sluice::Error::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, error.to_string())
    }
}

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
        ApiError::new(rejection.status(), rejection.body_text())
    }
}

/// The 413 of a body over [`MAX_BODY_BYTES`].
pub fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the request body is larger than {MAX_BODY_BYTES} bytes"),
    )
}

/// Parses a JSON body that was read whole.
pub fn parse_bytes<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "the request body is empty; expected a JSON object",
        ));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

/// The 404 for paths the API does not have.
pub async fn no_route(uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("no endpoint at {}", uri.path()),
    )
}

/// The 405 for a known path with a method it does not take.
pub async fn wrong_method(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{} does not take {method}", uri.path()),
    )
}
