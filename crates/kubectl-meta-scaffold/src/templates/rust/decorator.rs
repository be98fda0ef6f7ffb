//! The sync hook of DecoratorController {{CONTROLLER}}: for one {{PARENT_KIND}} (the target), the
//! labels to add and the attachments it should have. kit.rs has the request and answer types;
//! the hook contract (every field, the attachments keys, the defaults) is in kubectl-meta's docs.

mod kit;

use kit::*;
use serde_json::json;

/// The label this decorator adds to its targets.
const DECORATED: &str = "{{DECORATED_LABEL}}";

fn sync(request: DecoratorRequest) -> DecoratorResponse {
    let name = kit::name_of(&request.object);
{{SPEC_DECL}}    // Desired attachments: the engine creates, updates or deletes objects to match this list.
    let attachments = {{CHILDREN}};
    // The status reports what was observed, not what is about to be created.
{{STATUS}}
    let labels = [(DECORATED.to_string(), Some("true".to_string()))].into();
    DecoratorResponse {
        labels,
        attachments,
        status,
        ..Default::default()
    }
}

fn main() {
    kit::main(vec![("sync", kit::hook(sync))]);
}
