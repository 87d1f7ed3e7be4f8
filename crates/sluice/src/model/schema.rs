//! JSON Schemas (feature `schema`) of the model types whose rule-file form is text or read by a
//! hand-written deserializer: durations (`30s`), rates (`100/1m`), `by` alternatives
//! (`member|ip`) and the matchers of a `when`. The derived schemas of the other types reach these
//! through `#[schemars(with = ...)]` or the impls below.
//!
//! Invariant: each schema accepts every text its parser accepts (patterns are never stricter than
//! the parser); the parser stays the judge of what is valid beyond them (bounds, zero counts).

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use super::{By, Matcher, Rate};

/// A duration as rule files write it ([`parse_duration`](super::parse_duration)), for
/// `#[schemars(with = "DurationText")]` on duration fields.
#[derive(Debug, Clone, Copy)]
pub struct DurationText;

impl JsonSchema for DurationText {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": "^\\s*0*[1-9][0-9]*(ms|s|m|h|d)\\s*$",
            "description": "A whole number above zero and a unit: `ms`, `s`, `m`, `h` or `d` (`50ms`, `30s`, `15m`, `1h`, `1d`).",
            "examples": ["30s"]
        })
    }
}

impl JsonSchema for Rate {
    fn schema_name() -> Cow<'static, str> {
        "Rate".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": "^\\s*[0-9]+\\s*/\\s*[0-9]*\\s*[a-z]+\\s*$",
            "description": "`count/window`: units admitted per window, such as `100/1m`. The window is a duration; a count of one may be dropped and the unit spelt out (`5/s`, `5/second`, `100/min`, `10/2 hours`). The count is 1 to 10000000, the window 1ms to 366d.",
            "examples": ["100/1m"]
        })
    }
}

impl JsonSchema for By {
    fn schema_name() -> Cow<'static, str> {
        "By".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": "^\\s*[a-z0-9_]{1,64}\\s*(\\|\\s*[a-z0-9_]{1,64}\\s*)*$",
            "description": "An attribute name (1 to 64 characters of a-z, 0-9 and _), or alternatives `member|session|ip`: the first the request carries is counted.",
            "examples": ["ip"]
        })
    }
}

impl JsonSchema for Matcher {
    fn schema_name() -> Cow<'static, str> {
        "Matcher".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let not = generator.subschema_for::<Matcher>();
        json_schema!({
            "description": "A test on one attribute's value: a value (equal to it), a list (one of them), `{ prefix: \"/api/\" }`, `{ present: true }`, `{ cidr: [\"10.0.0.0/8\"] }` (an address inside one of the networks) or `{ not: <matcher> }`. An empty value counts as absent.",
            "anyOf": [
                { "type": ["string", "number", "boolean"], "description": "The value is exactly this." },
                {
                    "type": "array",
                    "items": { "type": ["string", "number", "boolean"] },
                    "maxItems": super::MAX_MATCHER_ITEMS,
                    "description": "The value is one of these."
                },
                {
                    "type": "object",
                    "properties": { "prefix": { "type": ["string", "number", "boolean"] } },
                    "required": ["prefix"],
                    "additionalProperties": false,
                    "description": "The value starts with this."
                },
                {
                    "type": "object",
                    "properties": { "present": { "type": "boolean" } },
                    "required": ["present"],
                    "additionalProperties": false,
                    "description": "The attribute is present (true) or absent (false)."
                },
                {
                    "type": "object",
                    "properties": {
                        "cidr": {
                            "anyOf": [
                                { "type": "string" },
                                { "type": "array", "items": { "type": "string" }, "maxItems": super::MAX_MATCHER_ITEMS }
                            ]
                        }
                    },
                    "required": ["cidr"],
                    "additionalProperties": false,
                    "description": "The value is an address inside one of these networks (`10.0.0.0/8`, `2001:db8::/32`, or one address)."
                },
                {
                    "type": "object",
                    "properties": { "not": not },
                    "required": ["not"],
                    "additionalProperties": false,
                    "description": "The inner matcher does not hold."
                }
            ]
        })
    }
}

/// A limit's schema is its rule-file form's (`limit_fields`).
impl JsonSchema for super::Limit {
    fn schema_name() -> Cow<'static, str> {
        "Limit".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        super::limit_fields::LimitFields::json_schema(generator)
    }
}

/// An override's schema is its rule-file form's.
impl JsonSchema for super::Override {
    fn schema_name() -> Cow<'static, str> {
        "Override".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        super::overrides::OverrideFields::json_schema(generator)
    }
}
