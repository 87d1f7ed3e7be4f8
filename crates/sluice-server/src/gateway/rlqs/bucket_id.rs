//! RLQS bucket ids as Sluice keeps them: checked against the bounds below and put in one
//! canonical (sorted) form, so `{a: 1, b: 2}` and `{b: 2, a: 1}` are the same bucket, as Envoy
//! says they are.
//!
//! Bounds, each a refusal with `INVALID_ARGUMENT` naming the bucket: at least one entry, at most
//! [`MAX_ENTRIES`] entries (as for an RLS descriptor), keys
//! not empty, and at most [`MAX_BUCKET_ID_BYTES`] bytes of keys and values together.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;
use tonic::Status;

use crate::config::gateway::MAX_ENTRIES;

/// Most bytes the keys and values of one bucket id may hold together.
pub const MAX_BUCKET_ID_BYTES: usize = 1024;

/// A bucket id, sorted by key.
pub type BucketKey = BTreeMap<String, String>;

/// The bucket id of a report in canonical form, or why it is refused.
pub fn canonical(id: Option<&BucketId>) -> Result<BucketKey, Status> {
    let Some(id) = id else {
        return Err(Status::invalid_argument("a bucket usage has no bucket_id"));
    };
    if id.bucket.is_empty() {
        return Err(Status::invalid_argument("a bucket_id has no entries"));
    }
    if id.bucket.len() > MAX_ENTRIES {
        return Err(Status::invalid_argument(format!(
            "a bucket_id has {} entries; at most {MAX_ENTRIES} are accepted",
            id.bucket.len()
        )));
    }
    let bytes: usize = id.bucket.iter().map(|(k, v)| k.len() + v.len()).sum();
    if bytes > MAX_BUCKET_ID_BYTES {
        return Err(Status::invalid_argument(format!(
            "a bucket_id holds {bytes} bytes; at most {MAX_BUCKET_ID_BYTES} are accepted"
        )));
    }
    if id.bucket.keys().any(String::is_empty) {
        return Err(Status::invalid_argument("a bucket_id has an empty key"));
    }
    Ok(id
        .bucket
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect())
}

/// The wire form of a canonical bucket id.
pub fn wire(key: &BucketKey) -> BucketId {
    BucketId {
        bucket: key.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(entries: &[(&str, &str)]) -> BucketId {
        BucketId {
            bucket: entries
                .iter()
                .map(|&(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn order_does_not_matter_and_bounds_are_refused() {
        let a = canonical(Some(&id(&[("a", "1"), ("b", "2")]))).unwrap();
        let b = canonical(Some(&id(&[("b", "2"), ("a", "1")]))).unwrap();
        assert_eq!(a, b);
        assert!(canonical(None).is_err());
        assert!(canonical(Some(&id(&[]))).is_err());
        assert!(canonical(Some(&id(&[("", "x")]))).is_err());
        let long = "x".repeat(MAX_BUCKET_ID_BYTES);
        let refused = canonical(Some(&id(&[("k", &long)]))).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
        let many: Vec<(String, String)> = (0..=MAX_ENTRIES)
            .map(|i| (format!("k{i}"), "v".to_string()))
            .collect();
        let many: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert!(canonical(Some(&id(&many))).is_err());
    }
}
