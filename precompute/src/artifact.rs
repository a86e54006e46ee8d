//! stub
#[derive(Debug, thiserror::Error)]
#[error("artifact")]
pub struct ArtifactError;
