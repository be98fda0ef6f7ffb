// The sync hook of CompositeController {{CONTROLLER}}: the children one {{PARENT_KIND}} should
// have, and its status. kit.go has the request and answer types; the hook contract (every
// field, the children keys, the defaults) is in kubectl-meta's docs.
package main

func sync(request SyncRequest) SyncResponse {
	name := nameOf(request.Parent)
{{SPEC_DECL}}	// Desired children: the engine creates, updates or deletes objects to match this list.
	children := []Object{
{{CHILDREN}}
	}
	// The status reports what was observed, not what is about to be created.
{{STATUS}}
	return SyncResponse{Status: status, Children: children}
}

func main() {
	run(map[string]Handler{"sync": hook(sync)})
}
