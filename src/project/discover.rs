//! Finding the project file: `kubectl-meta.yaml` in the current directory or the nearest parent
//! that has one, as cargo finds `Cargo.toml`; the search stops at the filesystem root.

use std::path::{Path, PathBuf};

/// The project file's name.
pub const FILE_NAME: &str = "kubectl-meta.yaml";

/// A project file found by [`find`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Its absolute path.
    pub path: PathBuf,
    /// How messages show it: relative to where the search started (`./kubectl-meta.yaml`,
    /// `../kubectl-meta.yaml`).
    pub shown: String,
}

/// The project file governing `start` (a directory): `start/kubectl-meta.yaml`, else the same
/// in each parent, up to the root. A directory named `kubectl-meta.yaml` does not count.
pub fn find(start: &Path) -> Option<Found> {
    for (up, dir) in start.ancestors().enumerate() {
        let path = dir.join(FILE_NAME);
        if path.is_file() {
            let shown = if up == 0 {
                format!("./{FILE_NAME}")
            } else {
                format!("{}{FILE_NAME}", "../".repeat(up))
            };
            return Some(Found { path, shown });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_in_the_directory_or_the_nearest_parent() {
        let root = tempfile::tempdir().unwrap();
        let sub = root.path().join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        assert_eq!(find(&sub), None);
        std::fs::write(root.path().join(FILE_NAME), "").unwrap();
        let f = find(&sub).unwrap();
        assert_eq!(f.path, root.path().join(FILE_NAME));
        assert_eq!(f.shown, "../../kubectl-meta.yaml");
        // The nearest one wins.
        std::fs::write(root.path().join("a").join(FILE_NAME), "").unwrap();
        assert_eq!(find(&sub).unwrap().shown, "../kubectl-meta.yaml");
        assert_eq!(
            find(&root.path().join("a")).unwrap().shown,
            "./kubectl-meta.yaml"
        );
    }

    #[test]
    fn a_directory_of_that_name_is_not_a_project_file() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join(FILE_NAME)).unwrap();
        assert_eq!(find(root.path()), None);
    }
}
