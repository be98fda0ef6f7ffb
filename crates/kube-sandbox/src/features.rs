//! kube-apiserver feature gates the sandbox models (`--feature-gates`), each off or on as a
//! 1.36 kube-apiserver has it unless set.

/// The feature gates of a sandbox. `FeatureGates::default()` is a 1.36 kube-apiserver's
/// defaults; [`FeatureGates::parse`] reads kube-apiserver's `--feature-gates` syntax.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGates {
    /// `ShardedListAndWatch` (KEP-5866, alpha in 1.36, off by default). On: list and watch
    /// take `shardSelector=shardRange(object.metadata.uid, '0x…', '0x…') || …`, return only the
    /// objects whose FNV-1a 64 hash of the uid (or namespace) falls in a range, and a JSON list
    /// echoes the selector in `metadata.shardInfo.selector`; a selector that does not parse is
    /// a 500 whose message starts `invalid shard selector: `. Off: the parameter is ignored.
    pub sharded_list_and_watch: bool,
}

/// A `--feature-gates` value the sandbox cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    /// An entry is not `Name=true|false`.
    #[error("feature gate {0:?} is not NAME=true or NAME=false")]
    Syntax(String),
    /// A gate the sandbox does not model.
    #[error("unknown feature gate {0:?} (the sandbox models: ShardedListAndWatch)")]
    Unknown(String),
}

impl FeatureGates {
    /// Read `Name=true,Other=false` (kube-apiserver's `--feature-gates`); unset gates keep
    /// their defaults.
    pub fn parse(text: &str) -> Result<FeatureGates, FeatureGateError> {
        let mut g = FeatureGates::default();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, value) = entry
                .split_once('=')
                .ok_or_else(|| FeatureGateError::Syntax(entry.to_string()))?;
            let on = match value.trim().to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => return Err(FeatureGateError::Syntax(entry.to_string())),
            };
            match name.trim() {
                "ShardedListAndWatch" => g.sharded_list_and_watch = on,
                other => return Err(FeatureGateError::Unknown(other.to_string())),
            }
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kube_apiserver_syntax() {
        assert!(!FeatureGates::default().sharded_list_and_watch);
        assert!(
            FeatureGates::parse("ShardedListAndWatch=true")
                .expect("valid")
                .sharded_list_and_watch
        );
        assert_eq!(
            FeatureGates::parse("ShardedListAndWatch=yes"),
            Err(FeatureGateError::Syntax("ShardedListAndWatch=yes".into()))
        );
        assert_eq!(
            FeatureGates::parse("Nope=true"),
            Err(FeatureGateError::Unknown("Nope".into()))
        );
    }
}
