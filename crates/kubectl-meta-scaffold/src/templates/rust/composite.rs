//! The sync hook of CompositeController {{CONTROLLER}}: the children one {{PARENT_KIND}} should
//! have, and its status. kit.rs has the request and answer types; the hook contract (every
//! field, the children keys, the defaults) is in kubectl-meta's docs.

mod kit;

use kit::*;
use serde_json::json;

fn sync(request: SyncRequest) -> SyncResponse {
    let name = kit::name_of(&request.parent);
{{SPEC_DECL}}    // Desired children: the engine creates, updates or deletes objects to match this list.
    let children = {{CHILDREN}};
    // The status reports what was observed, not what is about to be created.
{{STATUS}}
    SyncResponse {
        status,
        children,
        ..Default::default()
    }
}

fn main() {
    kit::main(vec![("sync", kit::hook(sync))]);
}
