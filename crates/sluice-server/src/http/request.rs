//! The JSON bodies that name a rule and an identity (`/v1/check`, `/v1/peek` and the admin
//! endpoints), read in place from the request's bytes.
//!
//! Names and values borrow from the body unless they hold escapes, so deciding a request copies
//! none of its attributes. Attribute values are strings, or numbers taken as their decimal text
//! (as `serde_json` prints them); any other value is kept as JSON only to be named in the 400 it
//! gets. A name given twice keeps its last value, and attributes are checked in name order, so
//! the first refused attribute is the same whatever order the client wrote them in.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, de};
use serde_json::{Number, Value};
use sluice::Check;
use sluice::limiter::MAX_COST;

use super::error::{ApiError, ErrorCode};

/// The body of `/v1/check` and `/v1/peek`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"rule": "login", "attributes": {"ip": "203.0.113.9"}}))]
pub struct DecisionRequest<'a> {
    /// The rule to check.
    #[serde(borrow)]
    #[schema(value_type = String)]
    pub rule: Cow<'a, str>,
    /// The request's identity values.
    #[serde(default, borrow)]
    #[schema(schema_with = attributes_schema)]
    pub attributes: RequestAttributes<'a>,
    /// Units to consume (default 1; 0 peeks).
    #[serde(default)]
    #[schema(value_type = Option<u64>, minimum = 0, maximum = 10_000_000)]
    pub cost: Option<Value>,
    /// `cost` is an estimate: an admitted check returns a reservation to settle
    /// (`POST /v1/settle`).
    #[serde(default)]
    pub reserve: bool,
}

impl DecisionRequest<'_> {
    /// How the check counts: its cost, as a reservation when asked.
    pub fn check(&self) -> Result<Check, ApiError> {
        let check = Check::cost(self.cost()?);
        Ok(if self.reserve { check.reserve() } else { check })
    }

    /// The cost, refusing anything but a whole number in range.
    pub fn cost(&self) -> Result<u64, ApiError> {
        let refuse = |value: &Value| {
            ApiError::new(
                ErrorCode::BadCost,
                format!("`cost` must be a whole number from 0 to {MAX_COST}, not {value}"),
            )
        };
        match &self.cost {
            None | Some(Value::Null) => Ok(1),
            Some(value @ Value::Number(n)) => n.as_u64().ok_or_else(|| refuse(value)),
            Some(other) => Err(refuse(other)),
        }
    }
}

/// The `attributes` object of a request body.
#[derive(Debug, Default, Deserialize)]
#[serde(transparent)]
pub struct RequestAttributes<'a>(#[serde(borrow)] BTreeMap<Name<'a>, AttributeValue<'a>>);

impl RequestAttributes<'_> {
    /// `(name, value)` pairs for the limiter, or a 400 naming the first value that is neither a
    /// string nor a number.
    pub fn pairs(&self) -> Result<Vec<(&str, &str)>, ApiError> {
        self.0
            .iter()
            .map(|(Name(name), value)| match value {
                AttributeValue::Text(text) => Ok((name.as_ref(), text.as_ref())),
                AttributeValue::Other(other) => Err(ApiError {
                    attribute: Some(name.to_string()),
                    ..ApiError::new(
                        ErrorCode::BadAttribute,
                        format!("attribute `{name}` must be a string or a number, not {other}"),
                    )
                }),
            })
            .collect()
    }
}

/// An attribute's name, borrowed from the body when it can be.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Name<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Name<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NameVisitor;
        impl<'de> Visitor<'de> for NameVisitor {
            type Value = Name<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an attribute name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Owned(v.to_owned())))
            }
        }
        deserializer.deserialize_str(NameVisitor)
    }
}

/// An attribute's value: its text (a string, or a number's decimal text), or a JSON value the
/// request will be refused for.
#[derive(Debug)]
pub enum AttributeValue<'a> {
    /// A string, borrowed from the body when it can be, or a number as text.
    Text(Cow<'a, str>),
    /// A boolean, null, array or object.
    Other(Value),
}

impl<'de: 'a, 'a> Deserialize<'de> for AttributeValue<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

fn number<'a>(n: Number) -> AttributeValue<'a> {
    AttributeValue::Text(Cow::Owned(n.to_string()))
}

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = AttributeValue<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or a number")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(AttributeValue::Text(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(AttributeValue::Text(Cow::Owned(v.to_owned())))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(number(v.into()))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        // JSON has no NaN or infinity; `serde_json` would read such a number as null.
        Ok(Number::from_f64(v).map_or(AttributeValue::Other(Value::Null), number))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(AttributeValue::Other(Value::Bool(v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(AttributeValue::Other(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Value::deserialize(SeqAccessDeserializer::new(seq)).map(AttributeValue::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Value::deserialize(MapAccessDeserializer::new(map)).map(AttributeValue::Other)
    }
}

/// The schema of the `attributes` object of a request body.
pub(super) fn attributes_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
    let value = OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::String))
        .item(ObjectBuilder::new().schema_type(Type::Number));
    let value = utoipa::openapi::schema::Schema::OneOf(value.build());
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "The request's identity values by attribute name: strings, or numbers taken as \
             their decimal text.",
        ))
        .additional_properties(Some(value))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(body: &str) -> Result<Vec<(String, String)>, String> {
        let request: DecisionRequest = serde_json::from_str(body).map_err(|e| e.to_string())?;
        let pairs = request.attributes.pairs().map_err(|e| e.message)?;
        Ok(pairs
            .into_iter()
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect())
    }

    fn text(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn strings_and_numbers_are_text_in_name_order() {
        let body =
            r#"{"rule":"r","attributes":{"user":"ann","org":7,"score":-2,"ratio":0.5,"big":1e3}}"#;
        assert_eq!(
            pairs(body).unwrap(),
            text(&[
                ("big", "1000.0"),
                ("org", "7"),
                ("ratio", "0.5"),
                ("score", "-2"),
                ("user", "ann")
            ])
        );
    }

    #[test]
    fn plain_strings_are_borrowed_and_escaped_ones_decoded() {
        let body = r#"{"rule":"r","attributes":{"user":"ann","ip":"1\u002e2"}}"#;
        let request: DecisionRequest = serde_json::from_str(body).unwrap();
        assert!(matches!(request.rule, Cow::Borrowed("r")));
        let values: Vec<_> = request.attributes.0.values().collect();
        assert!(matches!(values[0], AttributeValue::Text(Cow::Owned(s)) if s == "1.2"));
        assert!(matches!(
            values[1],
            AttributeValue::Text(Cow::Borrowed("ann"))
        ));
    }

    #[test]
    fn a_name_given_twice_keeps_its_last_value() {
        let body = r#"{"rule":"r","attributes":{"user":"a","user":"b"}}"#;
        assert_eq!(pairs(body).unwrap(), text(&[("user", "b")]));
    }

    #[test]
    fn other_values_are_refused_by_name_in_name_order() {
        let body = r#"{"rule":"r","attributes":{"z":true,"b":{"x":[1,null]},"a":"ok"}}"#;
        assert_eq!(
            pairs(body).unwrap_err(),
            r#"attribute `b` must be a string or a number, not {"x":[1,null]}"#
        );
        let body = r#"{"rule":"r","attributes":{"user":null}}"#;
        assert_eq!(
            pairs(body).unwrap_err(),
            "attribute `user` must be a string or a number, not null"
        );
    }
}
