//! tower middleware and identity extractors.
