//! [`Notify`]: notice before the wall. A quota's `notify: { at: [0.8, 1.0], webhook: URL }` asks
//! for one event per identity, threshold and period, when a decision's count first reaches the
//! threshold's share of the quota.
//!
//! Invariants (kept by [`Notify::validate`], called by `Limit::validate`): only on a quota; 1 to
//! [`MAX_THRESHOLDS`] thresholds, each a share in (0, 1] to 1/10,000, strictly increasing; the
//! webhook an `http://` or `https://` URL with a host, at most [`MAX_WEBHOOK_LEN`] bytes, no
//! whitespace or control characters. A threshold is kept as an integer number of 1/10,000 of the
//! quota, so limits stay comparable (`Eq`) and a threshold reads back as it was written.

use serde::{Deserialize, Serialize};

use super::ModelError;

/// The most thresholds one quota notifies at.
pub const MAX_THRESHOLDS: usize = 10;

/// The longest webhook URL, in bytes.
pub const MAX_WEBHOOK_LEN: usize = 2048;

/// The parts of the quota a [`Threshold`] counts in: 1/10,000.
const PARTS: u32 = 10_000;

/// Where and when a quota sends notice of its use.
///
/// ```
/// use sluice::model::Notify;
/// let notify: Notify = serde_json::from_str(
///     r#"{"at": [0.8, 1.0], "webhook": "http://billing.internal/quota"}"#,
/// ).unwrap();
/// assert!(notify.validate().is_ok());
/// assert_eq!(notify.at[0].units_of(10_000), 8_000);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Notify {
    /// The shares of the quota to notify at, increasing, each above 0 and at most 1
    /// (`[0.8, 1.0]`: at 80 % and when the quota is used up).
    #[cfg_attr(feature = "schema", schemars(example = &[0.8, 1.0]))]
    pub at: Vec<Threshold>,
    /// The URL each event is posted to (CloudEvents JSON), `http://` or `https://`.
    #[cfg_attr(feature = "schema", schemars(example = &"http://billing.internal/quota-events"))]
    pub webhook: String,
}

/// A share of a quota, written as a number in (0, 1] (`0.8`), kept to 1/10,000.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Threshold(u32);

impl Threshold {
    /// The share `share` of a quota, or an error when it is not in (0, 1] to 1/10,000.
    pub fn new(share: f64) -> Result<Threshold, ModelError> {
        let parts = share * f64::from(PARTS);
        if !(share > 0.0 && share <= 1.0) || (parts - parts.round()).abs() > 1e-6 {
            return Err(ModelError::new(
                "at",
                format!("{share}: a share of the quota above 0 and at most 1, to 1/10000"),
            ));
        }
        Ok(Threshold(parts.round() as u32))
    }

    /// The share as written (`0.8`).
    pub fn share(self) -> f64 {
        f64::from(self.0) / f64::from(PARTS)
    }

    /// The count at which a quota of `quota` units reaches this share: the share of it, rounded
    /// up, and at least 1.
    pub fn units_of(self, quota: u64) -> u64 {
        let units = u128::from(quota) * u128::from(self.0);
        u64::try_from(units.div_ceil(u128::from(PARTS)))
            .unwrap_or(u64::MAX)
            .max(1)
    }
}

impl Serialize for Threshold {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.share())
    }
}

impl<'de> Deserialize<'de> for Threshold {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Threshold, D::Error> {
        let share = f64::deserialize(d)?;
        Threshold::new(share).map_err(|e| serde::de::Error::custom(e.message))
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for Threshold {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Threshold".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1,
            "description": "A share of the quota, above 0 and at most 1."
        })
    }
}

impl Notify {
    /// Checks the invariants listed in the module docs.
    pub fn validate(&self) -> Result<(), ModelError> {
        if self.at.is_empty() || self.at.len() > MAX_THRESHOLDS {
            return Err(ModelError::new(
                "notify.at",
                format!("1 to {MAX_THRESHOLDS} shares of the quota, e.g. `[0.8, 1.0]`"),
            ));
        }
        if self.at.windows(2).any(|w| w[0] >= w[1]) {
            return Err(ModelError::new(
                "notify.at",
                "the shares must increase, each written once",
            ));
        }
        let url = self.webhook.as_str();
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"));
        let host = rest.map(|r| r.split(['/', '?', '#']).next().unwrap_or_default());
        if url.len() > MAX_WEBHOOK_LEN
            || host.is_none_or(str::is_empty)
            || url.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(ModelError::new(
                "notify.webhook",
                format!(
                    "`{}`: an http:// or https:// URL with a host, at most {MAX_WEBHOOK_LEN} \
                     bytes",
                    url.chars().take(80).collect::<String>()
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notify(at: &[f64], webhook: &str) -> Result<Notify, String> {
        let at = at
            .iter()
            .map(|&s| Threshold::new(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.field.to_string())?;
        let n = Notify {
            at,
            webhook: webhook.to_string(),
        };
        n.validate().map_err(|e| e.field.to_string())?;
        Ok(n)
    }

    #[test]
    fn thresholds_are_shares_of_the_quota_rounded_up() {
        let t = Threshold::new(0.8).unwrap();
        assert_eq!(t.share(), 0.8);
        assert_eq!(t.units_of(10), 8);
        assert_eq!(t.units_of(11), 9);
        assert_eq!(Threshold::new(0.0001).unwrap().units_of(3), 1);
        assert_eq!(Threshold::new(1.0).unwrap().units_of(u64::MAX), u64::MAX);
        for bad in [0.0, -0.5, 1.01, 0.00001, f64::NAN] {
            assert!(Threshold::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_notify_is_checked_naming_its_field() {
        assert!(notify(&[0.5, 0.8, 1.0], "http://hooks.internal:8080/q?x=1").is_ok());
        assert!(notify(&[1.0], "https://example.com").is_ok());
        assert_eq!(notify(&[], "http://a").unwrap_err(), "notify.at");
        assert_eq!(notify(&[0.8, 0.5], "http://a").unwrap_err(), "notify.at");
        assert_eq!(notify(&[0.8, 0.8], "http://a").unwrap_err(), "notify.at");
        assert_eq!(notify(&[0.1; 11], "http://a").unwrap_err(), "notify.at");
        for bad in [
            "ftp://a",
            "http://",
            "http:///x",
            "a b",
            "http://a\nb",
            "example.com",
        ] {
            assert_eq!(notify(&[1.0], bad).unwrap_err(), "notify.webhook", "{bad}");
        }
        let long = format!("http://a/{}", "x".repeat(MAX_WEBHOOK_LEN));
        assert_eq!(notify(&[1.0], &long).unwrap_err(), "notify.webhook");
    }

    #[test]
    fn a_threshold_reads_back_as_written() {
        let n: Notify = serde_json::from_str(r#"{"at":[0.8,1],"webhook":"http://h/"}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&n).unwrap(),
            r#"{"at":[0.8,1.0],"webhook":"http://h/"}"#
        );
        assert!(serde_json::from_str::<Notify>(r#"{"at":[2],"webhook":"http://h/"}"#).is_err());
    }
}
