//! [`ApiError`]: every error the service answers, over HTTP and over its own gRPC API, with a
//! stable [`ErrorCode`] a program can branch on.
//!
//! Over HTTP the body is `{"error": {"code": "unknown_rule", "message": "…", "rule": "…"}}` with
//! the code's status; over gRPC the status carries the code's gRPC code, the message, a
//! `google.rpc.ErrorInfo` in its details (domain `sluice`, `reason` the code, `metadata` the
//! same extra fields) and the `sluice-error-code` metadata entry.
//!
//! Invariants: a code's text, HTTP status and gRPC code never change once published (clients
//! branch on them; the OpenAPI document and README list them); the message is for people and may
//! change. Only a store that cannot answer, a time-out and the service's own fault are 5xx (or
//! 408): the client's input never causes one.

use std::collections::HashMap;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tonic_types::{ErrorDetails, StatusExt};
use utoipa::ToSchema;

/// What went wrong, as clients branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 400: the body is not the JSON asked for (empty, malformed, a field missing, unknown or of
    /// the wrong type).
    BadJson,
    /// 400: the query string asks for something this endpoint does not take.
    BadQuery,
    /// 404: no rule by that name is in force (`rule` says which).
    UnknownRule,
    /// 400: a limit of the rule counts per an attribute the request does not carry (`rule`,
    /// `attribute`, `limit_id` say which).
    MissingAttribute,
    /// 400: an attribute's value is not a string or a number, or is too long (`attribute`).
    BadAttribute,
    /// 400: `cost` is not a whole number from 0 to the maximum.
    BadCost,
    /// 400: a `duration` that is not one (`15m`, `1h`), or over 366 days.
    BadDuration,
    /// 400: the text given as a lease is not a lease of the rules in force.
    InvalidLease,
    /// 400: the text given as a reservation is not one, or the rule cannot settle one.
    InvalidReservation,
    /// 400: a rule that does not validate.
    InvalidRule,
    /// 400: the rule has no limit by that id (`rule`, `limit_id`).
    UnknownLimit,
    /// 400: an identity that is not one as `GET /v1/blocks` lists them.
    BadIdentity,
    /// 400: a check-all request with no part or more parts than accepted. Its code keeps the
    /// name it was published under.
    #[serde(rename = "bad_batch")]
    BadCheckAll,
    /// 400: a run-time limit that cannot be set, read or removed as asked: an unknown or
    /// non-settable limit, or numbers a rule file would refuse (`rule`).
    InvalidRuntimeLimit,
    /// 409: the limit already holds the most run-time limits it may (`rule`, `limit_id`).
    RuntimeLimitsFull,
    /// 401: admin endpoints need the right `Authorization: Bearer <token>`.
    Unauthorized,
    /// 404: admin endpoints are off (no token configured).
    AdminDisabled,
    /// 404: no endpoint at this path.
    NotFound,
    /// 405: the endpoint does not take this method.
    MethodNotAllowed,
    /// 408: the request was not answered within `request_timeout`.
    Timeout,
    /// 413: the request body is larger than accepted.
    BodyTooLarge,
    /// 500: the service's own fault.
    Internal,
    /// 503: the store did not answer an operation that has no fail policy (admin, leases).
    StoreUnavailable,
}

impl ErrorCode {
    /// Every code, for documentation and tests.
    pub const ALL: [ErrorCode; 23] = [
        ErrorCode::BadJson,
        ErrorCode::BadQuery,
        ErrorCode::UnknownRule,
        ErrorCode::MissingAttribute,
        ErrorCode::BadAttribute,
        ErrorCode::BadCost,
        ErrorCode::BadDuration,
        ErrorCode::InvalidLease,
        ErrorCode::InvalidReservation,
        ErrorCode::InvalidRule,
        ErrorCode::UnknownLimit,
        ErrorCode::BadIdentity,
        ErrorCode::BadCheckAll,
        ErrorCode::InvalidRuntimeLimit,
        ErrorCode::RuntimeLimitsFull,
        ErrorCode::Unauthorized,
        ErrorCode::AdminDisabled,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::Timeout,
        ErrorCode::BodyTooLarge,
        ErrorCode::Internal,
        ErrorCode::StoreUnavailable,
    ];

    /// The code as it is written on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadJson => "bad_json",
            ErrorCode::BadQuery => "bad_query",
            ErrorCode::UnknownRule => "unknown_rule",
            ErrorCode::MissingAttribute => "missing_attribute",
            ErrorCode::BadAttribute => "bad_attribute",
            ErrorCode::BadCost => "bad_cost",
            ErrorCode::BadDuration => "bad_duration",
            ErrorCode::InvalidLease => "invalid_lease",
            ErrorCode::InvalidReservation => "invalid_reservation",
            ErrorCode::InvalidRule => "invalid_rule",
            ErrorCode::UnknownLimit => "unknown_limit",
            ErrorCode::BadIdentity => "bad_identity",
            ErrorCode::BadCheckAll => "bad_batch",
            ErrorCode::InvalidRuntimeLimit => "invalid_runtime_limit",
            ErrorCode::RuntimeLimitsFull => "runtime_limits_full",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::AdminDisabled => "admin_disabled",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::Timeout => "timeout",
            ErrorCode::BodyTooLarge => "body_too_large",
            ErrorCode::Internal => "internal",
            ErrorCode::StoreUnavailable => "store_unavailable",
        }
    }

    /// The HTTP status of the code.
    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::UnknownRule | ErrorCode::AdminDisabled | ErrorCode::NotFound => {
                StatusCode::NOT_FOUND
            }
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::RuntimeLimitsFull => StatusCode::CONFLICT,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::Timeout => StatusCode::REQUEST_TIMEOUT,
            ErrorCode::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::StoreUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    /// The gRPC code of the code.
    pub fn grpc(self) -> tonic::Code {
        match self.status() {
            StatusCode::NOT_FOUND => tonic::Code::NotFound,
            StatusCode::UNAUTHORIZED => tonic::Code::Unauthenticated,
            // A bound reached that only removing entries lifts: retrying alone will not help.
            StatusCode::CONFLICT => tonic::Code::FailedPrecondition,
            StatusCode::METHOD_NOT_ALLOWED => tonic::Code::Unimplemented,
            StatusCode::REQUEST_TIMEOUT => tonic::Code::DeadlineExceeded,
            StatusCode::PAYLOAD_TOO_LARGE => tonic::Code::ResourceExhausted,
            StatusCode::INTERNAL_SERVER_ERROR => tonic::Code::Internal,
            StatusCode::SERVICE_UNAVAILABLE => tonic::Code::Unavailable,
            _ => tonic::Code::InvalidArgument,
        }
    }
}

/// An error answer: its code, a message for people, and what it is about when that helps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ApiError {
    /// What went wrong, stable (see [`ErrorCode`]).
    pub code: ErrorCode,
    /// What went wrong, for people.
    pub message: String,
    /// The rule it is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The attribute it is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attribute: Option<String>,
    /// The limit it is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_id: Option<String>,
}

/// The body of every 4xx and 5xx answer of the HTTP API.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ApiError,
}

/// The metadata key of the error code on gRPC answers.
pub const GRPC_CODE_KEY: &str = "sluice-error-code";

/// The `domain` of the `google.rpc.ErrorInfo` of gRPC errors.
pub const ERROR_DOMAIN: &str = "sluice";

impl ApiError {
    /// An error of `code` saying `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            rule: None,
            attribute: None,
            limit_id: None,
        }
    }

    /// A [`ErrorCode::BadJson`] saying `message`.
    pub fn bad_json(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::BadJson, message)
    }

    /// The same, about `rule`.
    pub fn with_rule(mut self, rule: impl Into<String>) -> ApiError {
        self.rule = Some(rule.into());
        self
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.code.status()
    }

    /// The JSON body.
    pub fn body(&self) -> Vec<u8> {
        // Plain strings and an enum: serializing cannot fail.
        serde_json::to_vec(&serde_json::json!({ "error": self })).unwrap_or_default()
    }

    /// The gRPC status: code, message, `google.rpc.ErrorInfo` details, `sluice-error-code`.
    pub fn to_status(&self) -> tonic::Status {
        let mut metadata = HashMap::new();
        for (key, value) in [
            ("rule", &self.rule),
            ("attribute", &self.attribute),
            ("limit_id", &self.limit_id),
        ] {
            if let Some(value) = value {
                metadata.insert(key.to_string(), value.clone());
            }
        }
        let details = ErrorDetails::with_error_info(self.code.as_str(), ERROR_DOMAIN, metadata);
        let mut status =
            tonic::Status::with_error_details(self.code.grpc(), self.message.clone(), details);
        status.metadata_mut().insert(
            GRPC_CODE_KEY,
            tonic::metadata::MetadataValue::from_static(self.code.as_str()),
        );
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status(), self.body()).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if self.code == ErrorCode::Unauthorized {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<sluice::Error> for ApiError {
    fn from(error: sluice::Error) -> ApiError {
        let message = error.to_string();
        match error {
            sluice::Error::UnknownRule { rule } => {
                ApiError::new(ErrorCode::UnknownRule, message).with_rule(rule)
            }
            sluice::Error::MissingAttribute {
                rule,
                limit_id,
                attribute,
            } => ApiError {
                rule: Some(rule),
                attribute: Some(attribute),
                limit_id: Some(limit_id),
                ..ApiError::new(ErrorCode::MissingAttribute, message)
            },
            sluice::Error::AttributeTooLong { attribute, .. } => ApiError {
                attribute: Some(attribute),
                ..ApiError::new(ErrorCode::BadAttribute, message)
            },
            sluice::Error::InvalidCost { .. } => ApiError::new(ErrorCode::BadCost, message),
            sluice::Error::ConflictingParts { rule, .. } => {
                ApiError::new(ErrorCode::BadCheckAll, message).with_rule(rule)
            }
            sluice::Error::InvalidLease { .. } => ApiError::new(ErrorCode::InvalidLease, message),
            sluice::Error::InvalidReservation { .. } => {
                ApiError::new(ErrorCode::InvalidReservation, message)
            }
            sluice::Error::InvalidRule { rule, .. } => {
                ApiError::new(ErrorCode::InvalidRule, message).with_rule(rule)
            }
            sluice::Error::InvalidRuntimeLimit { rule, .. } => {
                ApiError::new(ErrorCode::InvalidRuntimeLimit, message).with_rule(rule)
            }
            sluice::Error::RuntimeLimitsFull { rule, limit_id, .. } => ApiError {
                rule: Some(rule),
                limit_id: Some(limit_id),
                ..ApiError::new(ErrorCode::RuntimeLimitsFull, message)
            },
            sluice::Error::Store(_) => ApiError::new(ErrorCode::StoreUnavailable, message),
            // An error a later library adds: a failure of the service until it has its own code.
            _ => ApiError::new(ErrorCode::Internal, message),
        }
    }
}

impl From<ApiError> for tonic::Status {
    fn from(error: ApiError) -> tonic::Status {
        error.to_status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_written_as_serde_writes_them() {
        for code in ErrorCode::ALL {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::Value::String(code.as_str().into())
            );
        }
    }

    #[test]
    fn only_the_service_or_its_store_answer_5xx() {
        for code in ErrorCode::ALL {
            let server = matches!(code, ErrorCode::Internal | ErrorCode::StoreUnavailable);
            assert_eq!(code.status().is_server_error(), server, "{code:?}");
        }
    }

    #[test]
    fn grpc_statuses_carry_the_code_in_error_info_and_metadata() {
        let error = ApiError::from(sluice::Error::UnknownRule { rule: "r".into() });
        let status = error.to_status();
        assert_eq!(status.code(), tonic::Code::NotFound);
        assert_eq!(
            status.metadata().get(GRPC_CODE_KEY).unwrap(),
            "unknown_rule"
        );
        let info = status.get_error_details().error_info().cloned().unwrap();
        assert_eq!(info.reason, "unknown_rule");
        assert_eq!(info.domain, ERROR_DOMAIN);
        assert_eq!(info.metadata["rule"], "r");
    }
}
