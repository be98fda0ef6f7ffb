// The map hook of MapController {{CONTROLLER}}: the outputs of one input object of a
// {{PARENT_KIND}}. The engine calls it once per input (in parallel), and writes the parent's
// status itself. kit.go has the request and answer types; the hook contract is in
// kubectl-meta's docs.
package main

func mapInput(request MapRequest) MapResponse {
	name := nameOf(request.Input) + "-" + nameOf(request.Parent)
{{SPEC_DECL}}	// Desired outputs of this input: the engine creates, updates or deletes objects to match.
	outputs := []Object{
{{CHILDREN}}
	}
	return MapResponse{Outputs: outputs}
}

func main() {
	run(map[string]Handler{"map": hook(mapInput)})
}
