//! The map hook of MapController {{CONTROLLER}}: the outputs of one input object of a
//! {{PARENT_KIND}}. The engine calls it once per input (in parallel), and writes the parent's
//! status itself. kit.rs has the request and answer types; the hook contract is in
//! kubectl-meta's docs.

mod kit;

use kit::*;
use serde_json::json;

fn map_input(request: MapRequest) -> MapResponse {
    let (input, parent) = (kit::name_of(&request.input), kit::name_of(&request.parent));
    let name = format!("{input}-{parent}");
{{SPEC_DECL}}    // Desired outputs of this input: the engine creates, updates or deletes objects to match.
    let outputs = {{CHILDREN}};
    MapResponse {
        outputs,
        ..Default::default()
    }
}

fn main() {
    kit::main(vec![("map", kit::hook(map_input))]);
}
