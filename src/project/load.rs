//! Reading a project file into its schema ([`super::schema::ProjectFile`]): YAML 1.2 (strict
//! booleans, as definitions are read), one document. A syntax or schema error (an unknown
//! field, a wrong type, a missing field) names the file, the line and column serde-saphyr
//! reports, and the field's path (`hooks[0].sever`) from serde_path_to_error.

use super::error::{Problem, ProjectError};
use super::schema::ProjectFile;

/// Parse `text` (the contents of the file shown as `shown`).
pub fn parse(shown: &str, text: &str) -> Result<ProjectFile, ProjectError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let options = serde_saphyr::options! { strict_booleans: true };
    let mut path = String::new();
    let result = serde_saphyr::with_deserializer_from_str_with_options(text, options, |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            path = e.path().to_string();
            e.into_inner()
        })
    });
    result.map_err(|e| {
        let location = e.location();
        // serde_path_to_error ends the path of a value it could not start with `?`; the
        // `Spanned` wrappers add a `.value` step the file does not have.
        let path = path.replace(".value", "");
        let field = match path.trim_end_matches('?').trim_end_matches('.') {
            "" => "(file)".to_string(),
            p => p.to_string(),
        };
        ProjectError::Syntax {
            shown: shown.to_string(),
            problem: Problem {
                line: location.map_or(0, |l| l.line()),
                column: location.map_or(0, |l| l.column()),
                field,
                message: first_line(&e.to_string()),
            },
        }
    })
}

/// serde-saphyr's message without its `error: ` prefix, its location suffix and its snippet.
fn first_line(message: &str) -> String {
    let m = message.strip_prefix("error: ").unwrap_or(message);
    let m = m.lines().next().unwrap_or_default();
    // The position is said once, in front (`FILE:LINE:COLUMN:`).
    let m = match m.strip_prefix("line ").and_then(|r| r.split_once(": ")) {
        Some((pos, rest))
            if pos
                .split(" column ")
                .all(|n| n.chars().all(|c| c.is_ascii_digit())) =>
        {
            rest
        }
        _ => m,
    };
    match m.find(" at line ") {
        Some(i) => m[..i].to_string(),
        None => m.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syntax(text: &str) -> Problem {
        match parse("./kubectl-meta.yaml", text) {
            Err(ProjectError::Syntax { problem, .. }) => problem,
            other => panic!("expected a syntax error, got {other:?}"),
        }
    }

    #[test]
    fn an_unknown_field_is_named_with_its_path_and_line() {
        let p = syntax(
            "apiVersion: kubectl-meta.dev/v1alpha1\nkind: Project\nname: web\ncontrollers: [c.yaml]\nhooks:\n- name: web\n  sever: python3 server.py\n",
        );
        assert_eq!(p.line, 7, "{p:?}");
        assert!(p.field.starts_with("hooks[0]"), "{p:?}");
        assert!(p.message.contains("unknown field `sever`"), "{p:?}");
    }

    #[test]
    fn malformed_yaml_has_a_line_and_column() {
        let p = syntax("apiVersion: kubectl-meta.dev/v1alpha1\nkind: Project\nname: [web\n");
        assert!(p.line >= 3, "{p:?}");
        assert!(p.column > 0, "{p:?}");
    }

    #[test]
    fn a_missing_field_and_a_wrong_type_are_named() {
        let p = syntax("apiVersion: kubectl-meta.dev/v1alpha1\nkind: Project\nname: web\n");
        assert!(p.message.contains("controllers"), "{p:?}");
        let p = syntax(
            "apiVersion: kubectl-meta.dev/v1alpha1\nkind: Project\nname: web\ncontrollers: c.yaml\n",
        );
        assert_eq!(p.line, 4, "{p:?}");
        assert_eq!(p.field, "controllers", "{p:?}");
    }
}
